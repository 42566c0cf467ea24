// Package embed turns text into vectors. The Embedder interface is what the
// knowledge service (query vectors) and the embeddings worker (entry vectors)
// both use, so they always compare vectors of the same model.
package embed

import (
	"context"
	"errors"
)

// Dimensions is the local embedder's width and Config.Dimensions'
// default. The knowledge.embedding column takes any width from
// MinDimensions to MaxDimensions (db/migrations/00008_embedding_width.sql):
// a vector's model and width name its space, and search compares only
// vectors of the configured space.
const Dimensions = 768

// The widths a model may have: the column's CHECK. Past 2,000 (pgvector's
// HNSW limit for vector) the space's index is on halfvec.
const (
	MinDimensions = 64
	MaxDimensions = 3072
)

// Embedder embeds a batch of texts. Implementations are safe for concurrent use.
type Embedder interface {
	// Model names the model; it is stored with every vector, and search only
	// compares vectors whose model is the current one.
	Model() string
	// Dimensions of the vectors returned, MinDimensions to MaxDimensions.
	Dimensions() int
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// InProcess is implemented by an embedder that computes a vector in this
// process in microseconds (Local). Search embeds a query with it directly:
// the query vector caches (knowledge/search/queryvec.go) exist for providers
// behind HTTP, and looking a vector up in Redis costs more than computing
// this one.
type InProcess interface {
	Embedder
	InProcess()
}

// ErrPermanent marks a failure that retrying cannot fix (the provider refused
// the input, bad credentials, a wrong model). Wrap it: fmt.Errorf("...: %w", ErrPermanent).
var ErrPermanent = errors.New("permanent embedding failure")
