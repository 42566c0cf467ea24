// Package pgbatch sends statements to PostgreSQL in pgx batches: a
// Pipeline holds back a caller's Execs and sends them with its next Query,
// one round trip and one implicit transaction, and a Named statement is
// made positional once instead of on every call.
package pgbatch

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/db"
)

// Pipeline is a sqlc.DBTX that holds back every Exec and sends them with the
// next Query as one pgx batch. A batch is one network round trip and, in the
// extended protocol, ends with a single Sync, so its statements run in one
// implicit transaction: a set_config(..., true) sent by Exec applies to the
// statement of the next Query and ends with it. This keeps both statements
// in sqlc (a multi-statement string cannot carry parameters) without a
// BEGIN and a COMMIT round trip. Exec answers an empty tag: errors surface
// on Query.
type Pipeline struct {
	pool  Sender // a pool, or one connection
	batch *pgx.Batch
}

// Sender is what *pgxpool.Pool and *pgx.Conn have in common here.
type Sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// New returns a Pipeline sending on pool (a pool, or one connection).
func New(pool Sender) *Pipeline { return &Pipeline{pool: pool} }

// Exec queues the statement for the next Query.
func (p *Pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.batch == nil {
		p.batch = &pgx.Batch{}
	}
	p.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// Query sends the queued statements and this one as one batch, and returns
// this one's rows; closing them closes the batch.
func (p *Pipeline) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	batch := p.batch
	p.batch = &pgx.Batch{}
	if batch == nil {
		batch = &pgx.Batch{}
	}
	held := batch.Len()
	batch.Queue(sql, args...)
	br := p.pool.SendBatch(ctx, batch)
	for range held {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return db.NewBatchRows(rows, br), nil
}

// QueryRow is Query's first row.
func (p *Pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return db.RowOfQuery(p.Query(ctx, sql, args...))
}
