package data

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/orgcall"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// On a Citus cluster the search's ranking statements and the store's
// duplicate check run on the org's worker through knowledge_run_org
// (migrations 00033, 00047; internal/orgcall): the coordinator planned them
// on every call (it makes custom plans, to route them) and the worker
// planned the shard query again; there the worker prepares them once per
// session against the org's shards and keeps a generic plan, as a single
// node does. The call goes to that worker itself when the app can reach it
// (nodes.go). Each call names its statement, whose text is stored once. The
// settings a single node gets from a statement's own set_config (which a
// coordinator does not pass on) travel with the call. A single node sends
// the statements as they are.

// orgCalls holds one orgcall.Statement per statement text.
type orgCalls struct{ m sync.Map } // positional SQL -> *orgcall.Statement

func (o *orgCalls) get(sql string) *orgcall.Statement {
	if v, ok := o.m.Load(sql); ok {
		return v.(*orgcall.Statement)
	}
	v, _ := o.m.LoadOrStore(sql, orgcall.New("knowledge", sql))
	return v.(*orgcall.Statement)
}

// OnWorker runs stmt for org on the org's worker when the database is a
// Citus coordinator, with settings (name, value pairs) set there first; ok
// is false on a single node, where the caller sends the statement itself.
func (d *DB) OnWorker(ctx context.Context, stmt *pgbatch.Named, org uuid.UUID, settings []string, named pgx.NamedArgs) (rows pgx.Rows, ok bool, err error) {
	citus, err := d.Citus(ctx)
	if err != nil || !citus {
		return nil, false, err
	}
	sql, pos, err := stmt.Args(named)
	if err != nil {
		return nil, true, err
	}
	rows, err = d.onWorker(ctx, d.calls.get(sql), org, settings, pos)
	return rows, true, err
}

// onWorker runs st for org on its worker's pool (nodes.go), the statement
// itself on the org's shards (orgcall's QueryShards), or through the
// coordinator (knowledge_run_org, which Citus delegates to the worker)
// when the worker is unknown or cannot be reached.
func (d *DB) onWorker(ctx context.Context, st *orgcall.Statement, org uuid.UUID, settings []string, args []any) (pgx.Rows, error) {
	if err := st.Learn(ctx, d.scoped.Pool); err != nil {
		return nil, err
	}
	var rows pgx.Rows
	err := d.OrgCall(ctx, org, func(p *pgxpool.Pool) error {
		var err error
		if p == d.routes.coord {
			rows, err = st.Query(ctx, p, org, settings, args)
		} else {
			rows, err = st.QueryShards(ctx, p, &d.routes.shards, org, settings, args)
		}
		return err
	})
	return rows, err
}

// Reads is the generated queries for org's reads: sent whole to its worker
// on a Citus cluster, else the DB's own. settings (name, value pairs) are
// set for each statement alone, local to its transaction: on a worker by
// the call's first statement (orgcall), on a single node by a SetLocal
// sent ahead of it in the same batch (one round trip either way).
func (d *DB) Reads(ctx context.Context, org uuid.UUID, settings ...string) (*sqlc.Queries, error) {
	citus, err := d.Citus(ctx)
	if err != nil {
		return nil, err
	}
	if citus {
		return sqlc.New(workerDB{d: d, org: org, settings: settings}), nil
	}
	if len(settings) == 0 {
		return d.q, nil
	}
	return sqlc.New(localDB{d: d, settings: settings}), nil
}

// localDB is a sqlc DBTX of a single node whose reads each run after
// their settings, in one batch (pgbatch.Pipeline).
type localDB struct {
	d        *DB
	settings []string
}

func (l localDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p := pgbatch.New(l.d.scoped)
	names, values := make([]string, 0, len(l.settings)/2), make([]string, 0, len(l.settings)/2)
	for i := 0; i+1 < len(l.settings); i += 2 {
		names, values = append(names, l.settings[i]), append(values, l.settings[i+1])
	}
	if err := sqlc.New(p).SetLocal(ctx, sqlc.SetLocalParams{Names: names, Values: values}); err != nil {
		return nil, err
	}
	return p.Query(ctx, sql, args...)
}

func (l localDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return db.RowOfQuery(l.Query(ctx, sql, args...))
}

func (l localDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("knowledge: Reads is for reads")
}

// workerDB is a sqlc DBTX whose reads run on org's worker
// (knowledge_run_org), for a sqlc query of one org sent there whole.
type workerDB struct {
	d        *DB
	org      uuid.UUID
	settings []string
}

func (w workerDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return w.d.onWorker(ctx, w.d.calls.get(sql), w.org, w.settings, args)
}

func (w workerDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return db.RowOfQuery(w.Query(ctx, sql, args...))
}

func (w workerDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("knowledge: a write cannot run through knowledge_run_org")
}
