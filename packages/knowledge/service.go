package knowledge

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/documents"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/entries"
	"github.com/agentfleet/orchestrator/packages/knowledge/erasure"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/knowledge/transfer"
)

// Options are what a Service is made with besides its pool: its
// dependencies, its tuning (Config) and knobs for tests (Testing). Every
// zero value is the documented default, so Options{} is a working service
// with the local embedder.
type Options struct {
	// Embedder embeds search queries. Default: the local embedder.
	Embedder embed.Embedder
	// NextEmbedder is the next model of a model switch (maintenance/modelswitch.go):
	// an org that has cut over to it is searched with it. Default: none.
	NextEmbedder embed.Embedder
	// Reranker reorders the fused top candidates of every search that
	// does not say rerank: false (search/rerank.go). Default: none.
	Reranker rerank.Reranker
	// RerankObserver is told of every rerank (the MCP server's metrics).
	// Default: none.
	RerankObserver rerank.Observer
	// Enqueuer receives committed entries. Default: none (the reconciler
	// of the worker picks pending entries up).
	Enqueuer domain.Enqueuer
	// Redis holds idempotence keys. Default: none; then client tokens are
	// only guarded by the unique key in Postgres.
	// A *redis.ClusterClient for a Redis Cluster (ParseRedisURL): every
	// key is one slot's (no multi-key command), and the scans by org visit
	// every master (ScanKeys).
	Redis redis.UniversalClient
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of every time the service decides with (expiry,
	// as-of reads, the times it records). Default: time.Now.
	Now func() time.Time

	// Config tunes the service (the apps read it from their environment:
	// packages/appenv/knowledgeenv).
	Config

	// Testing holds knobs for tests, benchmarks and evaluations; a
	// deployment leaves it zero.
	Testing TestingKnobs
}

// Config tunes a Service; its zero value is the documented defaults.
type Config struct {
	// EmbedTimeout bounds the provider's call for a query embedding.
	// Default: DefaultEmbedTimeout.
	EmbedTimeout time.Duration
	// QueryEmbedBudget is how long a search waits for its query embedding
	// (search/queryvec.go): past it, a slow provider degrades the search to the
	// lexical lists instead of holding it, and the call goes on (up to
	// EmbedTimeout) to fill the query vector cache. Default:
	// DefaultQueryEmbedBudget.
	QueryEmbedBudget time.Duration
	// TextSearchConfig is the PostgreSQL text search configuration (stop
	// words, stemming) an org's lexical index is built with when its first
	// entry is indexed; the org keeps it (knowledge_search_stats.config),
	// and its queries are analysed with the same. Default:
	// DefaultTextSearchConfig.
	TextSearchConfig string
	// VectorCalibration maps the embedder's cosine similarities to evidence
	// (see search/rrf.go). Default: CalibrationFor(Embedder.Model()).
	VectorCalibration *VectorCalibration
	// RerankTopN is how many fused candidates the reranker reads (1 to
	// MaxRerankTopN). Default: DefaultRerankTopN.
	RerankTopN int
	// RerankBudget bounds a search up to the reranker's answer, from the
	// search's start (the reranker gets what the ranking left); past it
	// the fused order stands (reranked false, timeout). Default:
	// DefaultRerankBudget.
	RerankBudget time.Duration
	// RerankCalibration maps the reranker's scores to evidence (see
	// search/rerank.go). Default: RerankCalibrationFor(Reranker.Model()).
	RerankCalibration *RerankCalibration
	// Chunk is how the embeddings worker cuts bodies (the MCP server must
	// cut alike): a store whose text is one chunk writes the vector its
	// duplicate check made as the entry's own, so the worker has nothing
	// left to embed (entries/similar.go). Default: ChunkOptionsFor(Embedder.Model()).
	Chunk ChunkOptions
	// MaxStagedBytes bounds what an org's open uploads in parts may
	// reserve (their totalBytes; documents/uploads.go): a start past it is refused.
	// Default: DefaultMaxStagedBytes.
	MaxStagedBytes int64
}

// TestingKnobs change how a Service works for a test, a benchmark or an
// evaluation; each answers as a deployment's would, or says how not.
type TestingKnobs struct {
	// SerialSearch runs a search's two ranking statements (the lexical
	// lists, the vector list) one after the other, always. Otherwise a
	// search runs them at once on two connections when the pool has two to
	// spare (lower latency on an idle server), and one after the other
	// when it has not (one connection at a time under load); both give the
	// same answer.
	SerialSearch bool
	// SkipSimilar turns off store's duplicate check (entries/similar.go), to
	// compare a store with and without it. Stores then answer similar: [].
	SkipSimilar bool
	// UnboundedPostings reads every posting of every query term (no
	// PerTermPostings bound): the exact reference an evaluation compares
	// the bounded read with.
	UnboundedPostings bool
	// SimilarBudget replaces the bound of each statement of the duplicate
	// check (similarBudget, entries/similar.go; 0: that bound). Tests that assert
	// what the check finds set it far above any load's latency, so that a
	// loaded machine cannot turn their answer into "no check"; a test of
	// the bound itself sets it below any statement's.
	SimilarBudget time.Duration
	// FilterMatches replaces FilterMatchMax, the most matches of a filter
	// a search reads first (search/filtersearch.go): a small bound makes a test's
	// filter take the lists' own path; negative: never read first (the
	// lists test every filter on their candidates), to compare the two.
	FilterMatches int
}

// Defaults of Config.
const (
	// DefaultEmbedTimeout bounds a query embedding's provider call.
	DefaultEmbedTimeout = search.DefaultEmbedTimeout
	// DefaultTextSearchConfig is the text search configuration of a
	// deployment that sets none.
	DefaultTextSearchConfig = search.DefaultTextSearchConfig
)

// Service is the knowledge domain API. It is safe for concurrent use.
type Service struct {
	data *data.DB
	opts Options

	search    *search.Searcher // search, lists, completions, and the next model's (package search)
	relations *relations.Relations
	maint     *maintenance.Maintenance // the operators' calls on what maintenance keeps
	entries   *entries.Entries         // store, supersede, correct, get, task links (package entries)
	erasure   *erasure.Erasure
	transfer  *transfer.Transfer
	documents *documents.Documents // store_document and uploads in parts (package documents)
}

// New returns a Service on pool. The pool must come from db.Open, which
// registers pgvector's types on every connection.
func New(pool *pgxpool.Pool, opts Options) *Service {
	if opts.Embedder == nil {
		opts.Embedder = embed.NewLocal()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.TextSearchConfig = cmp.Or(opts.TextSearchConfig, DefaultTextSearchConfig)
	if opts.Chunk.Chars <= 0 {
		opts.Chunk = ChunkOptionsFor(opts.Embedder.Model())
	}
	d := data.New(pool).WithLogger(opts.Logger)
	s := &Service{data: d, opts: opts,
		search: search.New(d, search.Options{
			Embedder: opts.Embedder, NextEmbedder: opts.NextEmbedder, Redis: opts.Redis, Logger: opts.Logger, Now: opts.Now,
			EmbedTimeout: opts.EmbedTimeout, QueryEmbedBudget: opts.QueryEmbedBudget, TextSearchConfig: opts.TextSearchConfig,
			VectorCalibration: opts.VectorCalibration, SerialSearch: opts.Testing.SerialSearch,
			Reranker: opts.Reranker, RerankTopN: opts.RerankTopN, RerankBudget: opts.RerankBudget,
			RerankCalibration: opts.RerankCalibration, RerankObserver: opts.RerankObserver,
			UnboundedPostings: opts.Testing.UnboundedPostings, FilterMatches: opts.Testing.FilterMatches,
		}),
		relations: relations.New(d, relations.Options{Now: opts.Now}),
		erasure:   erasure.New(d, erasure.Options{Redis: opts.Redis, Logger: opts.Logger, TextSearchConfig: opts.TextSearchConfig}),
		transfer:  transfer.New(d, transfer.Options{Now: opts.Now}),
		documents: documents.New(d, documents.Options{Enqueuer: opts.Enqueuer, Logger: opts.Logger, Now: opts.Now, MaxStagedBytes: opts.MaxStagedBytes})}
	s.maint = NewMaintenance(s, MaintenanceConfig{})
	s.entries = entries.New(d, entries.Options{Search: s.search, Relations: s.relations,
		Enqueuer: opts.Enqueuer, Redis: opts.Redis, Logger: opts.Logger, Now: opts.Now,
		Chunk: opts.Chunk, TextSearchConfig: opts.TextSearchConfig,
		SkipSimilar: opts.Testing.SkipSimilar, SimilarBudget: opts.Testing.SimilarBudget})
	return s
}

// Router sends an org's statements to the Citus worker that holds it
// (docs/operators.md, "Search on a cluster"), for the writes of other
// modules that act for several orgs at once: the audit trail's
// (tenancy.Service.WithRouter).
func (s *Service) Router() db.Router { return s.data.Router() }

// scope returns ctx carrying org: every statement sent for it runs as that
// org (row-level security). The facade's methods call it once with the
// caller's org before they hand the call to a capability.
func (s *Service) scope(ctx context.Context, org uuid.UUID) context.Context {
	return data.AsOrg(ctx, org)
}
