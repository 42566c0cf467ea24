// Package rerank asks a reranking model how well each of a search's best
// candidates answers the query: the Cohere API shape (POST /v1/rerank,
// served by Cohere, Jina, vLLM, Infinity and LiteLLM) and Hugging Face
// text-embeddings-inference's (POST /rerank). The search (package search)
// sends it the fused top candidates, each as its title and best passage,
// and fuses the relevance scores it answers with the lists' evidence.
//
// A reranker is optional and never needed for an answer: the search waits
// for it a bounded time, and a failure leaves the fused order. The Client
// New returns carries a circuit breaker (github.com/sony/gobreaker), so a
// provider that keeps failing is not called at all for a while: a dead
// provider costs a search nothing, not its budget every time.
package rerank

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reranker scores documents against a query. Implementations are safe for
// concurrent use.
type Reranker interface {
	// Model names the model; the score's calibration is per model
	// (package search, RerankCalibrationFor).
	Model() string
	// Rerank returns one Result per document, best first; each names the
	// document by its index in docs.
	Rerank(ctx context.Context, query string, docs []string) ([]Result, error)
}

// Result is the relevance of one document: its index in the request and
// the model's score (for the sigmoid cross-encoders most servers run, 0 to
// 1; its meaning is the model's).
type Result struct {
	Index int
	Score float64
}

// ErrBreakerOpen is returned without calling the provider while the
// breaker is open (BreakerFailures failures in a row, for BreakerOpenFor).
var ErrBreakerOpen = errors.New("rerank: breaker open: the provider failed repeatedly and is left alone for a while")

// StatusError is a non-2xx answer of the provider.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("rerank provider: HTTP %d: %s", e.Status, e.Message)
}

// Observer receives each search's rerank: the model, how many candidates
// were sent, how long the search waited, and the outcome ("ok", or why the
// fused order stood: timeout, error, breaker_open). The MCP server turns
// it into metrics.
type Observer interface {
	Reranked(model string, candidates int, wait time.Duration, outcome string)
}
