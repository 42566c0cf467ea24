package db

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// TxRetry is how RetryTx runs again a transaction Postgres aborted as a
// deadlock or serialisation failure (LostRace). Both bounds are explicit:
// a lost race is retried inside the product, a bounded number of times,
// and the caller's context still ends the wait.
type TxRetry struct {
	// Attempts is the most runs in all (1: no retry).
	Attempts int
	// Backoff is the wait before the second run, twice as long before each
	// next (at most MaxBackoff, unless 0), with jitter (half to one and a half
	// times) so that two victims do not meet again. 0: run again at once.
	Backoff, MaxBackoff time.Duration
	// OnRetry, if set, is told of each lost race that will be retried
	// (for a log line), before the wait.
	OnRetry func(attempt int, err error)
}

// Beginner starts a transaction: a pool, a db.Scoped, a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// RetryTx runs f in a transaction of b (pgx.BeginFunc), again as o says
// when the transaction lost a race, and returns f's last error as is: a
// race lost on the last attempt, or a wait cut short by ctx, returns the
// race's error.
func RetryTx(ctx context.Context, b Beginner, o TxRetry, f func(pgx.Tx) error) error {
	wait := o.Backoff
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, b, f)
		if err == nil || !LostRace(err) || attempt >= o.Attempts {
			return err
		}
		if o.OnRetry != nil {
			o.OnRetry(attempt, err)
		}
		if wait <= 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait/2 + rand.N(wait)):
		}
		if wait *= 2; o.MaxBackoff > 0 && wait > o.MaxBackoff {
			wait = o.MaxBackoff
		}
	}
}
