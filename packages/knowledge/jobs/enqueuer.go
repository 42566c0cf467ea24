// Package jobs holds the asynq task types, payloads, enqueuer and handlers of
// the embeddings pipeline.
package jobs

import (
	"context"
	"errors"

	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Enqueuer puts embedding jobs on the embeddings queue. Stub until the
// embeddings issue lands.
type Enqueuer struct {
	client *asynq.Client
}

// NewEnqueuer returns an Enqueuer on client.
func NewEnqueuer(client *asynq.Client) *Enqueuer { return &Enqueuer{client: client} }

// EnqueueEmbedding implements knowledge.Enqueuer.
func (e *Enqueuer) EnqueueEmbedding(ctx context.Context, job knowledge.EmbeddingJob) error {
	return errors.New("not implemented yet")
}
