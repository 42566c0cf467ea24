package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// ReembedModel is ReembedSpace for a model of whatever width.
func ReembedModel(ctx context.Context, pool *pgxpool.Pool, enq knowledge.Enqueuer, orgID uuid.UUID, model string, all bool) (int, error) {
	return ReembedSpace(ctx, pool, enq, orgID, knowledge.VectorSpace{Model: model}, all)
}

// ReembedSpace asks for new vectors for the entries of one org and
// returns how many it set pending. all=false: only failed entries and
// ready entries of another model than space's, or of another width
// (space.Dims > 0), after a model change; all=true: every entry.
//
// Each chosen entry gets a new generation (so jobs still in flight for the
// old one do nothing), goes back to pending (its vector is cleared: the schema
// ties 'ready' to a vector) and is enqueued. An enqueue that fails is
// reported in the error but not undone: the entry is pending, so the
// worker's reconciler enqueues it after its grace period.
func ReembedSpace(ctx context.Context, pool *pgxpool.Pool, enq knowledge.Enqueuer, orgID uuid.UUID, space knowledge.VectorSpace, all bool) (int, error) {
	rows, err := knowledge.NewOutbox(pool).RequestReembed(ctx, orgID, space, all)
	if err != nil {
		return 0, err
	}
	var failed []error
	for _, job := range rows {
		if err := enq.EnqueueEmbedding(ctx, job); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return len(rows), fmt.Errorf("%d entries set pending, %d not enqueued (the worker's reconciler will enqueue them): %w",
			len(rows), len(failed), errors.Join(failed...))
	}
	return len(rows), nil
}
