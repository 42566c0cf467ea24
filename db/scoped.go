package db

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tenancy in the database (migration 00019, docs/operators.md "Roles"):
// every tenant table has a row-level security policy that shows a role
// subject to it (knowledge_app) only the rows of the transaction's
// app.org_id. Scoped is the one place that sets it: the org travels in the
// context (WithOrg, set by the services from their caller), and every
// statement or transaction Scoped sends for a context with an org starts
// with set_config('app.org_id', org, true), which lasts until the end of
// that transaction and no longer.
//
// A single statement and its set_config go out together as one pipelined
// batch: PostgreSQL runs the statements of one batch (up to its Sync) as
// one implicit transaction, so the setting holds for the statement and
// costs no round trip. A transaction (Begin, BeginTx) sets it as its first
// statement.
//
// A context without an org sends statements unchanged: the roles exempt
// from the policies (the schema's owner, the operator) see every org, and
// the application's role sees no tenant row, so a path that forgot its
// caller fails loudly instead of reading every org.

type orgKey struct{}

// WithOrg returns ctx carrying org: the statements Scoped sends for it run
// as that org.
func WithOrg(ctx context.Context, org uuid.UUID) context.Context {
	return context.WithValue(ctx, orgKey{}, org)
}

// OrgOf is the org WithOrg put in ctx.
func OrgOf(ctx context.Context) (uuid.UUID, bool) {
	org, ok := ctx.Value(orgKey{}).(uuid.UUID)
	return org, ok
}

// SetOrgSQL is SET LOCAL app.org_id as a function, so its value can be a
// parameter ($1, the org's id as text): for a batch that acts for several
// orgs in one transaction (the audit writer's).
const SetOrgSQL = "SELECT set_config('app.org_id', $1, true)"

// Scoped is a pool whose statements run as the context's org. It has the
// methods of the sqlc DBTX interfaces, pgx.BeginFunc's and
// pgx.BeginTxFunc's, and the pool's own (Stat, Acquire, Ping, Close...)
// through the embedded pool; a connection taken with Acquire is not
// scoped.
type Scoped struct {
	*pgxpool.Pool
	router Router
}

// Scope wraps pool.
func Scope(pool *pgxpool.Pool) Scoped { return Scoped{Pool: pool} }

// Router sends an org's transactions marked by OnOrgNode to another pool
// than a Scoped's own: on a Citus cluster the pool of the worker that
// holds the org's shards (packages/knowledge/internal/data), which runs
// their statements locally instead of having the coordinator plan and
// relay each one (a store's transaction is five). Only the transactions
// that take no advisory lock may go: an advisory lock is the node's own,
// and the others that take it (an operator's purge, a transaction begun on
// the coordinator while the worker cannot be reached, or on another
// worker after a shard moved) would not see it; row locks are the
// shard's, wherever the statement comes from. Single statements stay on
// the Scoped's pool: some read the catalog (an index's state), whose
// authority is the coordinator's.
type Router interface {
	// Route is the pool for org's transaction, and failed, told of an
	// error that stopped it before anything ran (a connection that could
	// not be made), says whether to begin it on the Scoped's own pool
	// instead. failed is nil when the pool is the Scoped's own.
	Route(ctx context.Context, org uuid.UUID) (pool *pgxpool.Pool, failed func(error) bool)
}

// WithRouter is s beginning each org's transactions marked by OnOrgNode
// where r says, on a Citus cluster; the others, and a transaction without
// an org (the operator's, a batch of several orgs), stay on s's own pool.
func (s Scoped) WithRouter(r Router) Scoped { s.router = r; return s }

type orgNodeKey struct{}

// OnOrgNode marks the transactions begun with ctx as free to run on the
// node that holds the org's rows (Router): the caller vouches that they
// take no advisory lock.
func OnOrgNode(ctx context.Context) context.Context {
	return context.WithValue(ctx, orgNodeKey{}, true)
}

// route is the pool for org's transaction (routed on a cluster only, when
// ctx allows it).
func (s Scoped) route(ctx context.Context, org uuid.UUID, citus bool) (*pgxpool.Pool, func(error) bool) {
	if !citus || s.router == nil || ctx.Value(orgNodeKey{}) == nil {
		return s.Pool, nil
	}
	return s.router.Route(ctx, org)
}

// onNode runs fn on the pool for org's statements (route), and again on
// s's own pool when the routed node could not be reached (nothing ran
// there).
func (s Scoped) onNode(ctx context.Context, org uuid.UUID, citus bool, fn func(*pgxpool.Pool) error) error {
	p, failed := s.route(ctx, org, citus)
	err := fn(p)
	if err != nil && failed != nil && failed(err) {
		err = fn(s.Pool)
	}
	return err
}

// CallOnOrgNode runs fn, org's statements that take no advisory lock (a
// distributed function of the org, called on its own), on the pool of the
// node that holds org's rows on a Citus cluster with a Router, and again
// on s's own pool when that node could not be reached; elsewhere on s's
// own pool.
func (s Scoped) CallOnOrgNode(ctx context.Context, org uuid.UUID, fn func(*pgxpool.Pool) error) error {
	citus, err := IsCitus(ctx, s.Pool)
	if err != nil {
		return err
	}
	return s.onNode(OnOrgNode(ctx), org, citus, fn)
}

// Exec runs one statement.
func (s Scoped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if _, ok := OrgOf(ctx); !ok {
		return s.Pool.Exec(ctx, sql, args...)
	}
	return execOne(s.SendBatch(ctx, one(sql, args)))
}

// Query runs one statement; closing the rows gives the connection back.
func (s Scoped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if _, ok := OrgOf(ctx); !ok {
		return s.Pool.Query(ctx, sql, args...)
	}
	return queryOne(s.SendBatch(ctx, one(sql, args)))
}

// QueryRow runs one statement for at most one row.
func (s Scoped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if _, ok := OrgOf(ctx); !ok {
		return s.Pool.QueryRow(ctx, sql, args...)
	}
	return RowOfQuery(s.Query(ctx, sql, args...))
}

// SendBatch sends b after the org's setting, in the same transaction (the
// batch's implicit one; on a Citus coordinator, BEGIN ... COMMIT:
// clusterBatch). The results are b's: the setting's is consumed here.
func (s Scoped) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	org, ok := OrgOf(ctx)
	if !ok {
		return s.Pool.SendBatch(ctx, b)
	}
	citus, err := IsCitus(ctx, s.Pool)
	if err != nil {
		return failedBatch{err}
	}
	if citus {
		return clusterBatch(ctx, s.Pool, org, b)
	}
	return afterSetting(s.Pool.SendBatch(ctx, withOrg(b, org, false)))
}

// Begin starts a transaction that runs as the context's org.
func (s Scoped) Begin(ctx context.Context) (pgx.Tx, error) {
	return s.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is Begin with options. The org is set by the transaction's first
// statement, sent with it as one batch (scopedTx), so a transaction costs
// no round trip more than without row-level security.
func (s Scoped) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	org, ok := OrgOf(ctx)
	citus := false
	if ok {
		var err error
		if citus, err = IsCitus(ctx, s.Pool); err != nil {
			return nil, err
		}
	}
	var tx pgx.Tx
	err := s.onNode(ctx, org, ok && citus, func(p *pgxpool.Pool) (err error) {
		tx, err = p.BeginTx(ctx, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	if ok {
		return &scopedTx{Tx: tx, org: org, citus: citus}, nil
	}
	return tx, nil
}

// scopedTx is a transaction whose first statement is sent behind the
// org's set_config, in one batch; every later one runs as sent.
type scopedTx struct {
	pgx.Tx
	org   uuid.UUID
	citus bool // SET LOCAL instead of set_config (db/citus.go)
	set   bool
}

// ensure sets the org on its own, for what cannot carry it (a COPY, a
// savepoint, a prepared statement).
func (t *scopedTx) ensure(ctx context.Context) error {
	if t.set {
		return nil
	}
	return t.SendBatch(ctx, &pgx.Batch{}).Close()
}

func (t *scopedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.set {
		return t.Tx.Exec(ctx, sql, args...)
	}
	return execOne(t.SendBatch(ctx, one(sql, args)))
}

func (t *scopedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.set {
		return t.Tx.Query(ctx, sql, args...)
	}
	return queryOne(t.SendBatch(ctx, one(sql, args)))
}

func (t *scopedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.set {
		return t.Tx.QueryRow(ctx, sql, args...)
	}
	return RowOfQuery(t.Query(ctx, sql, args...))
}

func (t *scopedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.set {
		return t.Tx.SendBatch(ctx, b)
	}
	t.set = true
	return afterSetting(t.Tx.SendBatch(ctx, withOrg(b, t.org, t.citus)))
}

func (t *scopedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.ensure(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, columns, src)
}

func (t *scopedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.ensure(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Prepare(ctx, name, sql)
}

// Begin starts a savepoint, once the org is set.
func (t *scopedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.ensure(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

// CopyFrom copies rows in one statement; with an org, inside a
// transaction of its own that sets it.
func (s Scoped) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if _, ok := OrgOf(ctx); !ok {
		return s.Pool.CopyFrom(ctx, table, columns, src)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s, func(tx pgx.Tx) error {
		var err error
		n, err = tx.CopyFrom(ctx, table, columns, src)
		return err
	})
	return n, err
}

// one is a batch of one statement.
func one(sql string, args []any) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return b
}

// withOrg is b behind the statement that sets org (OrgQueue).
func withOrg(b *pgx.Batch, org uuid.UUID, citus bool) *pgx.Batch {
	nb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	OrgQueue(nb, org, citus)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	return nb
}

// afterSetting reads the setting's result off br, leaving the batch's own.
func afterSetting(br pgx.BatchResults) pgx.BatchResults {
	if _, err := br.Exec(); err != nil {
		br.Close()
		return failedBatch{err}
	}
	return br
}

// execOne reads the result of br's one statement and closes it.
func execOne(br pgx.BatchResults) (pgconn.CommandTag, error) {
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// queryOne returns the rows of br's one statement: closing them closes br.
func queryOne(br pgx.BatchResults) (pgx.Rows, error) {
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &BatchRows{Rows: rows, br: br}, nil
}

// RowOfQuery is QueryRow's answer from Query's (rows, err).
func RowOfQuery(rows pgx.Rows, err error) pgx.Row {
	if err != nil {
		return errRow{err}
	}
	return RowOf(rows)
}

// BatchRows are the rows of a batch's last statement: closing them closes
// the batch, which gives the connection back.
type BatchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

// NewBatchRows ties rows to the batch they came from.
func NewBatchRows(rows pgx.Rows, br pgx.BatchResults) *BatchRows {
	return &BatchRows{Rows: rows, br: br}
}

// Close closes the rows and the batch.
func (r *BatchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

// Err is the rows' error, or the batch's once closed.
func (r *BatchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

// ErrRow is a pgx.Row that fails with err.
func ErrRow(err error) pgx.Row { return errRow{err} }

// RowOf reads the first row of rows, as pgx's QueryRow does.
func RowOf(rows pgx.Rows) pgx.Row { return rowOf{rows} }

type rowOf struct{ rows pgx.Rows }

func (r rowOf) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// failedBatch answers every call with the error that ended the batch.
type failedBatch struct{ err error }

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return errRow(f) }
func (f failedBatch) Close() error                     { return f.err }
func (f failedBatch) Tx() pgx.Tx                       { return nil }
