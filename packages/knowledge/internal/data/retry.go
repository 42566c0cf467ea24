package data

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/db"
)

// A transaction Postgres aborted as a deadlock (SQLSTATE 40P01) or a
// serialisation failure (40001) is run again inside the product, not
// answered: up to txAttempts runs in all, waiting txBackoff, then twice as
// long each time (at most txBackoffMax), with jitter so two victims do not
// meet again. The one policy of every write that may lose such a race
// (relations, supersession chains, forget, purge, documents).
const (
	txAttempts   = 8
	txBackoff    = 20 * time.Millisecond
	txBackoffMax = time.Second
)

// RetryTx runs f in a transaction sent as the context's org, again after
// the back-off above when Postgres aborted it as a deadlock or
// serialisation failure (IsRetryableTx), and returns f's last error as is.
// f must be safe to run again: everything it wrote was rolled back.
func (d *DB) RetryTx(ctx context.Context, f func(pgx.Tx) error) error {
	return db.RetryTx(ctx, d.scoped, db.TxRetry{Attempts: txAttempts, Backoff: txBackoff, MaxBackoff: txBackoffMax,
		OnRetry: func(attempt int, err error) {
			d.logger().Warn("knowledge: transaction aborted by a transient conflict; retrying", "attempt", attempt, "err", err)
		}}, f)
}

// WithLogger makes d log with l (RetryTx's retries; the pool's workers
// that cannot be reached, unless another DB on it named a logger first)
// and returns d; it is
// called once, before d is used. Default: slog.Default().
func (d *DB) WithLogger(l *slog.Logger) *DB {
	d.log = l
	if l != nil {
		d.routes.log.CompareAndSwap(nil, l)
	}
	return d
}

func (d *DB) logger() *slog.Logger {
	if d.log == nil {
		return slog.Default()
	}
	return d.log
}
