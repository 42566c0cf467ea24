package documents

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/outbox"
)

// Documents stores documents (store_document) and the uploads in parts
// that end in one (document_upload_start, _append, _finish). Every
// method's ctx carries the caller's org (data.AsOrg: the facade puts it
// there). It is safe for concurrent use.
type Documents struct {
	// pool sends every statement as the context's org (db.Scoped).
	pool db.Scoped
	data *data.DB
	q    *sqlc.Queries
	opts Options
}

// Options are what Documents are made with besides their database; every
// zero value is the documented default.
type Options struct {
	// Enqueuer receives the entries a store committed (the document's and
	// its new sections'). Default: none (the reconciler of the worker
	// picks pending entries up).
	Enqueuer domain.Enqueuer
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of uploads' expiry. Default: time.Now.
	Now func() time.Time
	// MaxStagedBytes bounds what an org's open uploads in parts may
	// reserve (their totalBytes; uploads.go): a start past it is refused.
	// Default: DefaultMaxStagedBytes.
	MaxStagedBytes int64
}

// New returns the Documents of d's database.
func New(d *data.DB, o Options) *Documents {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Documents{pool: d.Scoped(), data: d, q: d.Q(), opts: o}
}

func (s *Documents) log() *slog.Logger { return s.opts.Logger }

// enqueueAll hands the new entries to the embeddings pipeline, a few at a
// time (a document's hundreds of sections would otherwise wait on one
// round trip each). A failure is logged by enqueue: the reconciler
// re-enqueues pending entries.
func (s *Documents) enqueueAll(ctx context.Context, jobs []domain.EmbeddingJob) {
	const parallel = 8
	var wg sync.WaitGroup
	next := make(chan domain.EmbeddingJob)
	for range min(parallel, len(jobs)) {
		wg.Go(func() {
			for j := range next {
				outbox.Enqueue(ctx, s.opts.Enqueuer, s.log(), j)
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
}
