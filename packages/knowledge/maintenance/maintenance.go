package maintenance

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/cluster"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Maintenance keeps the knowledge tables searchable, out of the agents'
// and operators' way: the lexical indexer (IndexAll, IndexPending), the
// tables' upkeep and the per-org vector indexes (Upkeep,
// UpkeepVectorIndexes), the space's vector indexes (EnsureVectorIndex), a
// model switch's backfill (Backfill), the org counters' folding
// (CompactCounts), and a new connection readied for search (WarmConn, the
// MCP server's pool hook). The embeddings worker runs it (jobs.Worker);
// tools run it after a bulk load (apps/eval, the benchmarks). It also
// answers the operators' calls on what it keeps (Stats, SearchIndexStatus,
// SetTextSearchConfig, ModelSwitchCoverage, FinishModelSwitch), which the
// facade's Service delegates to it. It is safe for concurrent use.
//
// A Maintenance works on its DB, with the embedder of the service whose
// tables it keeps (the space whose indexes it builds), its text search
// configuration and its logger: the indexer writes what that service
// searches. Its statements that cross orgs (the indexer's queue, upkeep,
// the backfill) need a pool of a role exempt from row-level security: the
// worker's, or the schema owner's.
type Maintenance struct {
	data    *data.DB
	q       *sqlc.Queries
	cluster *cluster.Cluster // the Citus-only operations (shards, isolation)
	emb     embed.Embedder
	tsc     string // the text search configuration of an org's new index
	now     func() time.Time
	log     *slog.Logger
	warm    func(context.Context, *pgx.Conn) error
	cfg     Config
}

// Options are what a Maintenance is made with besides its DB; every zero
// value is the documented default.
type Options struct {
	// Embedder is the service's: its space's vector indexes are the ones
	// built. Default: the local embedder.
	Embedder embed.Embedder
	// TextSearchConfig is the text search configuration an org's lexical
	// index is built with when its first entry is indexed. Default:
	// domain.DefaultTextSearchConfig.
	TextSearchConfig string
	// Now is the clock uploads expire by. Default: time.Now.
	Now func() time.Time
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Warm readies a new connection for search (WarmConn): search's, which
	// knows its statements. Default: nothing to ready.
	Warm func(context.Context, *pgx.Conn) error
	// Config tunes it.
	Config
}

// Config tunes a Maintenance; its zero value is the documented defaults
// (the apps read it from their environment: packages/appenv/knowledgeenv).
type Config struct {
	// VectorIndexMemory is the most memory (bytes) an HNSW index build may
	// take (maintenance_work_mem of its connection); a build takes what its
	// graph needs up to that (vecspace.BuildMemory). Default:
	// DefaultVectorIndexMemory.
	VectorIndexMemory int64
	// OrgVectorIndexMinDocs is the size from which Upkeep gives an org its
	// own HNSW index (upkeep.go). Default: OrgVectorIndexMinDocs; tests
	// lower it for small orgs.
	OrgVectorIndexMinDocs int
	// PairVectorIndexMinDocs is how many entries of an org a metadata pair
	// needs for Upkeep to give it an HNSW index (upkeep.go). Default:
	// PairVectorIndexMinDocs; tests lower it.
	PairVectorIndexMinDocs int
}

// DefaultVectorIndexMemory is Config.VectorIndexMemory's default: room for
// the graph of 1M entries of 768 dimensions (3.8 GB), or of 560,000 of
// 1,536. A parallel build reserves it in shared memory (/dev/shm) for the
// build's length, so it is a ceiling a database server must be able to
// give, not a target.
const DefaultVectorIndexMemory = 4 << 30

// New returns the maintenance of the tables d holds.
func New(d *data.DB, o Options) *Maintenance {
	if o.Embedder == nil {
		o.Embedder = embed.NewLocal()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.VectorIndexMemory <= 0 {
		o.VectorIndexMemory = DefaultVectorIndexMemory
	}
	if o.OrgVectorIndexMinDocs <= 0 {
		o.OrgVectorIndexMinDocs = OrgVectorIndexMinDocs
	}
	if o.PairVectorIndexMinDocs <= 0 {
		o.PairVectorIndexMinDocs = PairVectorIndexMinDocs
	}
	return &Maintenance{data: d, q: d.Q(), cluster: cluster.New(d), emb: o.Embedder,
		tsc: cmp.Or(o.TextSearchConfig, domain.DefaultTextSearchConfig), now: o.Now, log: o.Logger,
		warm: o.Warm, cfg: o.Config}
}

// CompactCounts folds the counters' pending deltas (of every org) into
// their totals, batch rows at a time, until a batch finds none left or ctx
// ends; Upkeep calls it. It returns how many deltas it folded. Readers are
// exact either way: it only keeps the deltas they sum short.
func (m *Maintenance) CompactCounts(ctx context.Context, batch int) (_ int64, err error) {
	defer data.WrapOp(&err, "knowledge.CompactCounts")
	return CompactCounts(ctx, m.data, batch)
}

// IsolateOrg gives org a shard of its own on a Citus cluster
// (cluster.Cluster.IsolateOrg), copying its rows with mode
// (cluster.IsolateAuto when empty); it refuses on a single node.
func (m *Maintenance) IsolateOrg(ctx context.Context, org uuid.UUID, mode string) (cluster.IsolateReport, error) {
	return m.cluster.IsolateOrg(ctx, org, mode)
}

// WarmConn readies a new database connection for search, for
// db.AfterConnect (Options.Warm does it: search.Searcher.WarmConn). A
// failure is logged, never returned: a cold connection still works.
func (m *Maintenance) WarmConn(ctx context.Context, conn *pgx.Conn) error {
	if m.warm == nil {
		return nil
	}
	return m.warm(ctx, conn)
}
