package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// RetryTx runs a transaction again after a lost race (the server's
// serialisation failure), at most Attempts times in all, waits between the
// runs as the policy says unless the caller's context ends first, and
// leaves any other error to the caller at once.
func TestRetryTxRetriesLostRacesOnly(t *testing.T) {
	t.Parallel()
	pool := testenv.Postgres(t).Pool
	ctx := context.Background()
	// lose makes the server answer the transaction with a serialisation
	// failure (SQLSTATE 40001) while n > 0.
	lose := func(n *int) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			if *n <= 0 {
				_, err := tx.Exec(ctx, "SELECT 1")
				return err
			}
			*n--
			_, err := tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'lost' USING ERRCODE = '40001'; END $$")
			return err
		}
	}

	losses, retries := 2, 0
	err := db.RetryTx(ctx, pool, db.TxRetry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
		OnRetry: func(int, error) { retries++ }}, lose(&losses))
	if err != nil || losses != 0 || retries != 2 {
		t.Errorf("two races lost of three runs: %v, %d left to lose, %d retries; want nil, 0, 2", err, losses, retries)
	}

	losses = 5
	err = db.RetryTx(ctx, pool, db.TxRetry{Attempts: 3}, lose(&losses))
	if !db.LostRace(err) || losses != 2 {
		t.Errorf("every run loses: %v after %d runs, want the race's error after 3", err, 5-losses)
	}

	runs := 0
	refused := errors.New("refused")
	err = db.RetryTx(ctx, pool, db.TxRetry{Attempts: 3}, func(pgx.Tx) error { runs++; return refused })
	if err != refused || runs != 1 {
		t.Errorf("another error: %v after %d runs, want it as is after 1", err, runs)
	}

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	losses = 5
	start := time.Now()
	err = db.RetryTx(cctx, pool, db.TxRetry{Attempts: 3, Backoff: time.Minute, MaxBackoff: time.Minute}, lose(&losses))
	if !db.LostRace(err) || losses != 4 || time.Since(start) > 30*time.Second {
		t.Errorf("the caller's deadline during the wait: %v after %d runs in %v, want the race's error after 1 at once", err, 5-losses, time.Since(start))
	}
}
