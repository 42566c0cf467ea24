// Package embed turns text into vectors. The Embedder interface is what the
// knowledge service (query vectors) and the embeddings worker (entry vectors)
// both use, so they always compare vectors of the same model.
package embed

import (
	"context"
	"errors"
)

// Dimensions is the width of the knowledge.embedding column.
const Dimensions = 768

// Embedder embeds a batch of texts. Implementations are safe for concurrent use.
type Embedder interface {
	// Model names the model; it is stored with every vector, and search only
	// compares vectors whose model is the current one.
	Model() string
	// Dimensions of the vectors returned; must equal the column's width.
	Dimensions() int
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ErrPermanent marks a failure that retrying cannot fix (the provider refused
// the input, bad credentials, a wrong model). Wrap it: fmt.Errorf("...: %w", ErrPermanent).
var ErrPermanent = errors.New("permanent embedding failure")
