package db

import (
	"context"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// On a Citus cluster (migration 00027, docs/operators.md "Running on a
// cluster") the row-level security policies are enforced by the workers,
// on the shards, and read app.org_id in the worker's own session. The
// coordinator passes a setting on to the workers only for SET LOCAL inside
// a transaction block (citus.propagate_set_commands = local, which the
// migration sets for the database), never for set_config(). So, against a
// coordinator, Scoped sends a single statement as one batch
// BEGIN; SET LOCAL app.org_id = '<org>'; <statement>; COMMIT (still one
// round trip), and a transaction's first statement behind SET LOCAL
// instead of set_config. A single PostgreSQL is sent exactly what it was
// before.

// IsCitus reports whether pool's database has the citus extension (the
// coordinator of a cluster). It asks once per pool.
func IsCitus(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	if v, ok := citusPools.Load(pool); ok {
		return v.(bool), nil
	}
	var yes bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&yes); err != nil {
		return false, err
	}
	citusPools.Store(pool, yes)
	return yes, nil
}

var citusPools sync.Map // *pgxpool.Pool -> bool

// SetLocalOrgSQL is SET LOCAL app.org_id for org: the form a Citus
// coordinator passes on to its workers. A uuid's text needs no quoting.
func SetLocalOrgSQL(org uuid.UUID) string {
	return "SET LOCAL app.org_id = '" + org.String() + "'"
}

// OrgQueue queues, in b, what sets app.org_id to org for the rest of a
// transaction: SetOrgSQL, or SET LOCAL on a Citus coordinator.
func OrgQueue(b *pgx.Batch, org uuid.UUID, citus bool) {
	if citus {
		b.Queue(SetLocalOrgSQL(org))
		return
	}
	b.Queue(SetOrgSQL, org.String())
}

// OrgBatch is one org's statements in a batch that acts for several orgs
// (Scoped.ExecForOrgs).
type OrgBatch struct {
	Org   uuid.UUID
	Batch *pgx.Batch
}

// ExecForOrgs sends the orgs' statements as one batch, one round trip and
// one transaction (all or none), each org's behind the setting of that
// org: row-level security accepts a row only for the org set, and a batch
// of several orgs' rows (the audit writer's) sets each in turn. On a
// single node the batch's implicit transaction holds them and each
// set_config holds until the next; on a Citus coordinator, SET LOCAL
// inside BEGIN ... COMMIT, the form it passes on to the workers. It is for
// writes: the statements' results are not read.
func (s Scoped) ExecForOrgs(ctx context.Context, parts []OrgBatch) error {
	citus, err := IsCitus(ctx, s.Pool)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	if citus {
		b.Queue("BEGIN")
	}
	for _, p := range parts {
		OrgQueue(b, p.Org, citus)
		b.QueuedQueries = append(b.QueuedQueries, p.Batch.QueuedQueries...)
	}
	if citus {
		b.Queue("COMMIT")
	}
	return s.Pool.SendBatch(ctx, b).Close()
}

// clusterBatch sends b's statements for org on a connection of its own, in
// BEGIN ... COMMIT behind SET LOCAL, as one batch. The results are b's; the
// returned BatchResults' Close reads the COMMIT, rolls back a transaction
// an error left open, and gives the connection back.
func clusterBatch(ctx context.Context, pool *pgxpool.Pool, org uuid.UUID, b *pgx.Batch) pgx.BatchResults {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return failedBatch{err}
	}
	nb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+3)}
	nb.Queue("BEGIN")
	nb.Queue(SetLocalOrgSQL(org))
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	nb.Queue("COMMIT")
	br := conn.SendBatch(ctx, nb)
	cb := &clusterResults{BatchResults: br, conn: conn, ctx: ctx}
	for range 2 {
		if _, err := br.Exec(); err != nil {
			cb.Close()
			return failedBatch{err}
		}
	}
	return cb
}

type clusterResults struct {
	pgx.BatchResults
	conn   *pgxpool.Conn
	ctx    context.Context
	closed bool
	err    error
}

func (c *clusterResults) Close() error {
	if c.closed {
		return c.err
	}
	c.closed = true
	c.err = c.BatchResults.Close()
	if c.conn.Conn().PgConn().TxStatus() != 'I' && !c.conn.Conn().IsClosed() {
		// An error skipped the COMMIT: the explicit transaction is open (and
		// failed). Roll it back so the connection goes back to the pool clean.
		if _, err := c.conn.Exec(context.WithoutCancel(c.ctx), "ROLLBACK"); err != nil && c.err == nil {
			c.err = err
		}
	}
	c.conn.Release()
	return c.err
}
