package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/after"
)

// enqueueTimeout bounds one hand-over to the queue.
const enqueueTimeout = 5 * time.Second

// Enqueue hands a committed entry to the embeddings pipeline through e (a
// store's, a correction's, a document's sections'); a nil e does nothing.
// It runs after commit, detached from the caller's cancellation, and after
// the call's answer when the caller's edge runs such work (package after:
// the MCP server); a failure is only logged because the entry's pending
// status is the outbox the reconciler re-reads.
func Enqueue(ctx context.Context, e domain.Enqueuer, log *slog.Logger, job domain.EmbeddingJob) {
	if e == nil {
		return
	}
	after.Run(ctx, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, enqueueTimeout)
		defer cancel()
		if err := e.EnqueueEmbedding(ctx, job); err != nil {
			log.Warn("knowledge: enqueue embedding failed; the reconciler will retry",
				"org", job.OrgID, "entry", job.EntryID, "generation", job.Generation, "err", err)
		}
	})
}
