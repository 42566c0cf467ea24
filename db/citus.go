package db

import (
	"cmp"
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
// (Scoped.ExecForOrgs). Done is set once they are written.
type OrgBatch struct {
	Org   uuid.UUID
	Batch *pgx.Batch
	Done  bool
}

// ExecForOrgs sends the orgs' statements (those not Done) as one batch, one
// round trip and one transaction (all or none), each org's behind the
// setting of that org: row-level security accepts a row only for the org
// set, and a batch of several orgs' rows (the audit writer's) sets each in
// turn. On a single node the batch's implicit transaction holds them and
// each set_config holds until the next; on a Citus coordinator, SET LOCAL
// inside BEGIN ... COMMIT, the form it passes on to the workers. It is for
// writes: the statements' results are not read.
//
// With a Router on a Citus cluster, the orgs are grouped by the node the
// router names and each group is one transaction on that node (on the
// coordinator when the node cannot be reached): the rows of several
// workers in one transaction cost a two-phase commit, planned and relayed
// statement by statement by the coordinator. A group that fails leaves its
// parts not Done and the others are still sent; the error is the first
// group's. The statements are queued again for each send (a batch once
// sent holds its connection's prepared statements).
func (s Scoped) ExecForOrgs(ctx context.Context, parts []OrgBatch) error {
	citus, err := IsCitus(ctx, s.Pool)
	if err != nil {
		return err
	}
	// Without a router (a single node, or no routes): one group, on s's
	// own pool. (The writes take no advisory lock: OnOrgNode.)
	nodeCtx := OnOrgNode(ctx)
	type group struct {
		pool   *pgxpool.Pool
		failed func(error) bool
		idx    []int
	}
	var groups []*group
	byPool := map[*pgxpool.Pool]*group{}
	for i, p := range parts {
		if p.Done {
			continue
		}
		pool, failed := s.route(nodeCtx, p.Org, citus)
		g := byPool[pool]
		if g == nil {
			g = &group{pool: pool, failed: failed}
			byPool[pool] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	var first error
	for _, g := range groups {
		err := g.pool.SendBatch(ctx, orgsBatch(parts, g.idx, citus)).Close()
		if err != nil && g.failed != nil && g.failed(err) {
			err = s.Pool.SendBatch(ctx, orgsBatch(parts, g.idx, citus)).Close()
		}
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		for _, i := range g.idx {
			parts[i].Done = true
		}
	}
	return first
}

// orgsBatch is the batch of parts[idx], each behind its org's setting, in
// BEGIN ... COMMIT on a Citus node; the statements queued anew.
func orgsBatch(parts []OrgBatch, idx []int, citus bool) *pgx.Batch {
	b := &pgx.Batch{}
	if citus {
		b.Queue("BEGIN")
	}
	for _, i := range idx {
		OrgQueue(b, parts[i].Org, citus)
		for _, q := range parts[i].Batch.QueuedQueries {
			b.Queue(q.SQL, q.Arguments...)
		}
	}
	if citus {
		b.Queue("COMMIT")
	}
	return b
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
