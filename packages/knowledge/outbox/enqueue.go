package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// enqueueTimeout bounds one hand-over to the queue.
const enqueueTimeout = 5 * time.Second

// Enqueue hands a committed entry to the embeddings pipeline through e (a
// store's, a correction's, a document's sections'); a nil e does nothing.
// It runs after commit, detached from the caller's cancellation; a failure
// is only logged because the entry's pending status is the outbox the
// reconciler re-reads.
func Enqueue(ctx context.Context, e domain.Enqueuer, log *slog.Logger, job domain.EmbeddingJob) {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	if err := e.EnqueueEmbedding(ctx, job); err != nil {
		log.Warn("knowledge: enqueue embedding failed; the reconciler will retry",
			"org", job.OrgID, "entry", job.EntryID, "generation", job.Generation, "err", err)
	}
}
