package knowledge

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/cluster"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
)

// Maintenance keeps the knowledge tables searchable, out of the agents'
// and operators' way: the lexical indexer (IndexAll, IndexPending), the
// tables' upkeep and the per-org vector indexes (Upkeep,
// UpkeepVectorIndexes), the space's vector indexes (EnsureVectorIndex), a
// model switch's backfill (Backfill), the org counters' folding
// (CompactCounts), and a new connection readied for search (WarmConn, the
// MCP server's pool hook). The embeddings worker runs it (jobs.Worker);
// tools run it after a bulk load (apps/eval, the benchmarks). Agents' and
// operators' calls are the Service's. It is safe for concurrent use.
//
// A Maintenance works on its Service's pool, with its embedder (the space
// whose indexes it builds and whose statements WarmConn plans), its text
// search configuration and its logger: the indexer writes what that
// service searches. Its statements that cross orgs (the indexer's queue,
// upkeep, the backfill) need a pool of a role exempt from row-level
// security: the worker's, or the schema owner's.
type Maintenance struct {
	s       *Service
	cfg     MaintenanceConfig
	cluster *cluster.Cluster // the Citus-only operations (shards, isolation)
}

// MaintenanceConfig tunes a Maintenance; its zero value is the documented
// defaults (the apps read it from their environment:
// packages/appenv/knowledgeenv).
type MaintenanceConfig struct {
	// VectorIndexMemory is the most memory (bytes) an HNSW index build may
	// take (maintenance_work_mem of its connection); a build takes what its
	// graph needs up to that (vecspace.BuildMemory). Default:
	// DefaultVectorIndexMemory.
	VectorIndexMemory int64
	// OrgVectorIndexMinDocs is the size from which Upkeep gives an org its
	// own HNSW index (upkeep.go). Default: OrgVectorIndexMinDocs; tests
	// lower it for small orgs.
	OrgVectorIndexMinDocs int
}

// DefaultVectorIndexMemory is MaintenanceConfig.VectorIndexMemory's
// default: room for the graph of 1M entries of 768 dimensions (3.8 GB), or
// of 560,000 of 1,536. A parallel build reserves it in shared memory
// (/dev/shm) for the build's length, so it is a ceiling a database server
// must be able to give, not a target.
const DefaultVectorIndexMemory = 4 << 30

// NewMaintenance returns the maintenance of the tables s searches.
func NewMaintenance(s *Service, cfg MaintenanceConfig) *Maintenance {
	if cfg.VectorIndexMemory <= 0 {
		cfg.VectorIndexMemory = DefaultVectorIndexMemory
	}
	if cfg.OrgVectorIndexMinDocs <= 0 {
		cfg.OrgVectorIndexMinDocs = OrgVectorIndexMinDocs
	}
	return &Maintenance{s: s, cfg: cfg, cluster: cluster.New(s.data)}
}

// CompactCounts folds the counters' pending deltas (of every org) into
// their totals, batch rows at a time, until none is left or ctx ends;
// Upkeep calls it. It returns how many counters it changed. Readers are
// exact either way: it only keeps the deltas they sum short.
func (m *Maintenance) CompactCounts(ctx context.Context, batch int) (_ int64, err error) {
	defer data.WrapOp(&err, "knowledge.CompactCounts")
	return m.s.compactCounts(ctx, batch)
}

// IsolateOrg gives org a shard of its own on a Citus cluster
// (cluster.Cluster.IsolateOrg), copying its rows with mode (IsolateAuto
// when empty); it refuses on a single node.
func (m *Maintenance) IsolateOrg(ctx context.Context, org uuid.UUID, mode string) (IsolateReport, error) {
	return m.cluster.IsolateOrg(ctx, org, mode)
}

// IsolateReport says what IsolateOrg did.
type IsolateReport = cluster.IsolateReport

// Shard transfer modes of IsolateOrg (cluster.IsolateAuto, ...).
const (
	IsolateAuto         = cluster.IsolateAuto
	IsolateBlockWrites  = cluster.IsolateBlockWrites
	IsolateForceLogical = cluster.IsolateForceLogical
)

// WarmConn readies a new database connection for search, for
// db.AfterConnect (search.Searcher.WarmConn says how). A failure is
// logged, never returned: a cold connection still works.
func (m *Maintenance) WarmConn(ctx context.Context, conn *pgx.Conn) error {
	return m.s.search.WarmConn(ctx, conn)
}
