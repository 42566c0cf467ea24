package data

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// DB is the module's access to its database. It is safe for concurrent use.
type DB struct {
	scoped db.Scoped
	q      *sqlc.Queries
	calls  orgCalls
	routes *routes      // the pool's workers (nodes.go), shared with every DB on it
	log    *slog.Logger // RetryTx's retries (WithLogger)
}

// New returns a DB on pool. The pool must come from db.Open, which registers
// pgvector's types on every connection.
func New(pool *pgxpool.Pool) *DB {
	r := routesOf(pool)
	scoped := db.Scope(pool).WithRouter(r)
	return &DB{scoped: scoped, q: sqlc.New(scoped), routes: r}
}

// AsOrg returns ctx carrying org: every statement a DB sends for it runs as
// that org (row-level security shows it that org's rows only).
func AsOrg(ctx context.Context, org uuid.UUID) context.Context { return db.WithOrg(ctx, org) }

// OnOrgWorker marks the transactions begun with ctx as free to run on the
// Citus worker that holds the org (nodes.go): the caller vouches that they
// take no advisory lock (db.OnOrgNode says why).
func OnOrgWorker(ctx context.Context) context.Context { return db.OnOrgNode(ctx) }

// OrgOf is the org AsOrg put in ctx.
func OrgOf(ctx context.Context) (uuid.UUID, bool) { return db.OrgOf(ctx) }

// Q is the generated queries, sent as the context's org.
func (d *DB) Q() *sqlc.Queries { return d.q }

// Scoped is the pool that sends as the context's org: for transactions
// (pgx.BeginFunc) and batches.
func (d *DB) Scoped() db.Scoped { return d.scoped }

// Pool is the pool itself, for what is not one org's statement (a
// connection's own settings, statements that name every org).
func (d *DB) Pool() *pgxpool.Pool { return d.scoped.Pool }

// Citus reports whether the database is a Citus coordinator. Only package
// cluster and the routes below ask.
func (d *DB) Citus(ctx context.Context) (bool, error) { return db.IsCitus(ctx, d.scoped.Pool) }

// Runs splits n items into the groups one statement or transaction may take
// together: all of them on a single node; each org's alone on a Citus
// cluster, where a statement that locks rows may not span shards and there
// is no distributed transaction. orgOf names item i's org; the groups keep
// the items' order, and the orgs are in the order of their first item.
func (d *DB) Runs(ctx context.Context, n int, orgOf func(int) uuid.UUID) ([][]int, error) {
	if n == 0 {
		return nil, nil
	}
	citus, err := d.Citus(ctx)
	if err != nil {
		return nil, err
	}
	if !citus {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return [][]int{all}, nil
	}
	return ByOrg(n, orgOf), nil
}

// ByOrg groups the items 0..n-1 by the org orgOf names for each, whatever
// the database: the groups keep the items' order, and the orgs are in the
// order of their first item.
func ByOrg(n int, orgOf func(int) uuid.UUID) [][]int {
	var runs [][]int
	at := map[uuid.UUID]int{}
	for i := range n {
		o := orgOf(i)
		k, ok := at[o]
		if !ok {
			k = len(runs)
			at[o] = k
			runs = append(runs, nil)
		}
		runs[k] = append(runs[k], i)
	}
	return runs
}

// Pick is the items of xs at idx, in idx's order (a group of Runs).
func Pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = xs[i]
	}
	return out
}
