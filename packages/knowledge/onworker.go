package knowledge

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/orgcall"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// On a Citus cluster the search's ranking statements and the store's
// duplicate check run on the org's worker through knowledge_run_org
// (migration 00033, internal/orgcall): the coordinator planned them on
// every call (it makes custom plans, to route them) and the worker planned
// the shard query again; there the worker prepares them once per session
// against the org's shards and keeps a generic plan, as a single node
// does. The settings a single node gets from SearchConfig or SimilarConfig
// (set_config, which a coordinator does not pass on) travel with the call.
// A single node sends the statements as before.

// orgCalls holds one orgcall.Statement per statement text.
type orgCalls struct{ m sync.Map } // positional SQL -> *orgcall.Statement

func (o *orgCalls) get(sql string) *orgcall.Statement {
	if v, ok := o.m.Load(sql); ok {
		return v.(*orgcall.Statement)
	}
	v, _ := o.m.LoadOrStore(sql, orgcall.New("knowledge", sql))
	return v.(*orgcall.Statement)
}

// onWorker runs stmt for org on the org's worker when the Service's
// database is a Citus coordinator; ok is false on a single node, where
// the caller sends the statement itself.
func (s *Service) onWorker(ctx context.Context, stmt *pgbatch.Named, org uuid.UUID, settings []string, named pgx.NamedArgs) (rows pgx.Rows, ok bool, err error) {
	citus, err := db.IsCitus(ctx, s.pool.Pool)
	if err != nil || !citus {
		return nil, false, err
	}
	sql, pos, err := stmt.Args(named)
	if err != nil {
		return nil, true, err
	}
	rows, err = s.orgCalls.get(sql).Query(ctx, s.pool.Pool, org, settings, pos)
	return rows, true, err
}

// searchSettings are SearchConfig's settings (queries/search.sql) as
// name, value pairs.
func searchSettings(efSearch int, pinVectorPlan bool) []string {
	st := []string{
		"hnsw.ef_search", strconv.Itoa(efSearch),
		"hnsw.iterative_scan", "relaxed_order",
		"plan_cache_mode", "force_generic_plan",
		"jit", "off",
	}
	if pinVectorPlan {
		st = append(st, "enable_seqscan", "off", "enable_sort", "off", "enable_bitmapscan", "off")
	}
	return st
}

// similarSettings are SimilarConfig's (queries/knowledge.sql).
var similarSettings = []string{"plan_cache_mode", "force_generic_plan", "enable_seqscan", "off", "jit", "off"}

// workerDB is a sqlc DBTX whose reads run on org's worker
// (knowledge_run_org), for a sqlc query of one org sent there whole.
type workerDB struct {
	s        *Service
	org      uuid.UUID
	settings []string
}

func (w workerDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return w.s.orgCalls.get(sql).Query(ctx, w.s.pool.Pool, w.org, w.settings, args)
}

func (w workerDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return db.RowOfQuery(w.Query(ctx, sql, args...))
}

func (w workerDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("knowledge: a write cannot run through knowledge_run_org")
}

// readsOf is the sqlc queries for org's reads: on its worker on a Citus
// cluster (workerDB), else the Service's own.
func (s *Service) readsOf(ctx context.Context, org uuid.UUID) (*sqlc.Queries, error) {
	citus, err := db.IsCitus(ctx, s.pool.Pool)
	if err != nil || !citus {
		return s.q, err
	}
	return sqlc.New(workerDB{s: s, org: org}), nil
}
