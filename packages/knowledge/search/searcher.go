package search

import (
	"cmp"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// Searcher answers the reads of an org's entries: the hybrid search, the
// ranking's lists (SearchLists), the listing (List), the completions
// (Complete) and the document references of hits (DocumentOf). Every
// method's ctx carries the caller's org (data.AsOrg: the facade puts it
// there). It is safe for concurrent use.
type Searcher struct {
	// pool sends every statement as the context's org (db.Scoped).
	pool db.Scoped
	data *data.DB
	q    *sqlc.Queries
	opts Options

	next      *Searcher      // the next model's searches (modelserve.go)
	servedBy  servedByCache  // orgs cut over to it (modelserve.go)
	tableDocs tableDocsCache // the vector plan's table size (search.go)
	vecStmt   *pgbatch.Named // the vector list's statement, of the embedder's space (search.go)
	qvec      *queryVectors  // query vector cache (queryvec.go)
	listKeys  listKeyCache   // list cursor key (browse.go)
	common    commonFilters  // filters found common lately (filtersearch.go)

	pairRecords atomic.Int64 // recordPairSearch's in flight (filtersearch.go)
}

// Options are what a Searcher is made with besides its database: its
// dependencies, its tuning and knobs for tests. Every zero value is the
// documented default.
type Options struct {
	// Embedder embeds search queries. Default: the local embedder.
	Embedder embed.Embedder
	// NextEmbedder is the next model of a model switch: an org that has
	// cut over to it is searched with it (modelserve.go). Default: none.
	NextEmbedder embed.Embedder
	// Redis shares the query vectors between replicas (queryvec.go).
	// Default: none; then they are cached in this process only.
	Redis redis.UniversalClient
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of the as-of reads and of the expiry a read
	// decides with. Default: time.Now.
	Now func() time.Time

	// EmbedTimeout bounds the provider's call for a query embedding.
	// Default: DefaultEmbedTimeout.
	EmbedTimeout time.Duration
	// QueryEmbedBudget is how long a search waits for its query embedding
	// (queryvec.go). Default: DefaultQueryEmbedBudget.
	QueryEmbedBudget time.Duration
	// TextSearchConfig is the text search configuration of an org whose
	// index has none yet. Default: DefaultTextSearchConfig.
	TextSearchConfig string
	// VectorCalibration maps the embedder's cosine similarities to evidence
	// (rrf.go). Default: CalibrationFor(Embedder.Model()); the next model
	// gets the same given calibration, else its own model's.
	VectorCalibration *VectorCalibration

	// Reranker reorders the fused top candidates of a search (rerank.go).
	// Default: none (answers say reranked false, not_configured).
	Reranker rerank.Reranker
	// RerankTopN is how many fused candidates it reads, 1 to
	// MaxRerankTopN. Default: DefaultRerankTopN.
	RerankTopN int
	// RerankBudget bounds a search up to the reranker's answer, from
	// the search's start: the reranker gets what the ranking left. Default:
	// DefaultRerankBudget.
	RerankBudget time.Duration
	// RerankCalibration maps its scores to evidence. Default:
	// RerankCalibrationFor(Reranker.Model()).
	RerankCalibration *RerankCalibration
	// RerankObserver is told of every rerank (metrics). Default: none.
	RerankObserver rerank.Observer

	// SerialSearch runs a search's two ranking statements one after the
	// other, always (the facade's TestingKnobs.SerialSearch says why).
	SerialSearch bool
	// UnboundedPostings reads every posting of every query term: the exact
	// reference an evaluation compares the bounded read with.
	UnboundedPostings bool
	// FilterMatches replaces domain.FilterMatchMax, the most matches of a
	// filter a search reads first (filtersearch.go); negative: never read
	// first.
	FilterMatches int
}

// Defaults of Options.
const (
	// DefaultEmbedTimeout bounds a query embedding's provider call.
	DefaultEmbedTimeout = 5 * time.Second
	// DefaultTextSearchConfig is the text search configuration of a
	// deployment that sets none.
	DefaultTextSearchConfig = domain.DefaultTextSearchConfig
)

// New returns the Searcher of d's database. d's pool must come from
// db.Open, which registers pgvector's types on every connection.
func New(d *data.DB, o Options) *Searcher {
	if o.Embedder == nil {
		o.Embedder = embed.NewLocal()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.EmbedTimeout <= 0 {
		o.EmbedTimeout = DefaultEmbedTimeout
	}
	if o.QueryEmbedBudget <= 0 {
		o.QueryEmbedBudget = DefaultQueryEmbedBudget
	}
	o.TextSearchConfig = cmp.Or(o.TextSearchConfig, DefaultTextSearchConfig)
	if o.RerankTopN <= 0 {
		o.RerankTopN = DefaultRerankTopN
	}
	o.RerankTopN = min(o.RerankTopN, MaxRerankTopN)
	if o.RerankBudget <= 0 {
		o.RerankBudget = DefaultRerankBudget
	}
	if o.Reranker != nil && o.RerankCalibration == nil {
		c := RerankCalibrationFor(o.Reranker.Model())
		o.RerankCalibration = &c
	}
	var next *Searcher
	if o.NextEmbedder != nil {
		no := o
		no.Embedder, no.NextEmbedder = o.NextEmbedder, nil // its calibration: the given one, else its model's
		next = New(d, no)
	}
	if o.VectorCalibration == nil {
		c := CalibrationFor(o.Embedder.Model())
		o.VectorCalibration = &c
	}
	return &Searcher{pool: d.Scoped(), data: d, q: d.Q(), opts: o, next: next, qvec: newQueryVectors(),
		vecStmt: vectorStmt(vecspace.Of(o.Embedder))}
}

func (s *Searcher) log() *slog.Logger { return s.opts.Logger }

// Embedder is the model s embeds queries with.
func (s *Searcher) Embedder() embed.Embedder { return s.opts.Embedder }

// Calibration is the calibration of s's embedder's cosines (rrf.go).
func (s *Searcher) Calibration() VectorCalibration { return *s.opts.VectorCalibration }
