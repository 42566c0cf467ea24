package entries

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/outbox"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
)

// Entries writes and reads one entry at a time: the store (with its
// duplicate check and its idempotence), the supersession and the
// correction of an entry, its whole read, and its task links. Every
// method's ctx carries the caller's org (data.AsOrg: the facade puts it
// there). It is safe for concurrent use.
type Entries struct {
	// pool sends every statement as the context's org (db.Scoped).
	pool db.Scoped
	data *data.DB
	q    *sqlc.Queries
	opts Options
}

// Options are what Entries are made with besides their database: their
// dependencies and knobs. Every zero value is the documented default,
// except Search, which is required.
type Options struct {
	// Search is the org's reads: the duplicate check ranks new text by its
	// vector list (with the model that serves the org: ServedBy), and Get
	// names the document of a section (DocumentOf). Its embedder is the
	// deployment's own model, whose vectors the embeddings worker writes.
	Search *search.Searcher
	// Relations gives Get an entry's relation summary. Default: the
	// relations of the same database.
	Relations *relations.Relations
	// Enqueuer receives committed entries. Default: none (the reconciler
	// of the worker picks pending entries up).
	Enqueuer domain.Enqueuer
	// Redis holds the store's idempotence keys (idempotence.go). Default:
	// none; then client tokens are only guarded by the unique key in
	// Postgres.
	Redis redis.UniversalClient
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of expiry and of the entries' states. Default:
	// time.Now.
	Now func() time.Time
	// Chunk is how the embeddings worker cuts bodies for the Search's own
	// model: a store whose text is one chunk writes the vector its
	// duplicate check made as the entry's own (similar.go). Default:
	// outbox.ChunkOptionsFor(the Search's embedder's model).
	Chunk outbox.ChunkOptions
	// TextSearchConfig is the text search configuration of an org whose
	// lexical index has none yet (the duplicate check analyses new text
	// with the org's). Default: search.DefaultTextSearchConfig.
	TextSearchConfig string

	// SkipSimilar turns off the store's duplicate check, to compare a
	// store with and without it. Stores then answer similar: [].
	SkipSimilar bool
	// SimilarBudget replaces the bound of each statement of the duplicate
	// check (similarBudget; 0: that bound).
	SimilarBudget time.Duration
}

// New returns the Entries of d's database.
func New(d *data.DB, o Options) *Entries {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Relations == nil {
		o.Relations = relations.New(d, relations.Options{Now: o.Now})
	}
	if o.Chunk.Chars <= 0 {
		o.Chunk = outbox.ChunkOptionsFor(o.Search.Embedder().Model())
	}
	if o.TextSearchConfig == "" {
		o.TextSearchConfig = search.DefaultTextSearchConfig
	}
	if o.SimilarBudget <= 0 {
		o.SimilarBudget = similarBudget
	}
	return &Entries{pool: d.Scoped(), data: d, q: d.Q(), opts: o}
}

func (s *Entries) log() *slog.Logger { return s.opts.Logger }

// Enqueue hands a committed entry to the embeddings pipeline (the store's
// and the correction's): outbox.Enqueue with the Options' Enqueuer.
func (s *Entries) Enqueue(ctx context.Context, job domain.EmbeddingJob) {
	outbox.Enqueue(ctx, s.opts.Enqueuer, s.log(), job)
}
