package testenv

import (
	"context"
	"fmt"
	"time"

	"github.com/agentfleet/orchestrator/db"
	"github.com/jackc/pgx/v5"
)

// A test database is made only with a slot: a session advisory lock, one of
// a number fitted to the server's max_connections, held on an admin
// connection until the database is dropped. Every test binary on the
// machine, and every suite running beside another, draws from the same
// slots, so together they never open more connections than the server
// takes ("too many clients" would fail the tests past it); a test past
// the last slot waits for one. The lock goes with its connection, so a
// killed binary's slots come free at once.

// slotLockClass is the first key of the slots' advisory locks (the second
// is the slot's number).
const slotLockClass = 0x7e57

// connsPerSlot is about how many connections a test holds at its peak: its
// slot, the owner's pool, the application's, and an app's own pool in the
// apps' tests.
const connsPerSlot = 8

// slotWait bounds the wait for a slot: a machine running several suites at
// once keeps every slot busy for minutes.
const slotWait = 10 * time.Minute

// takeSlot connects to the server as its admin and waits for a free slot.
func takeSlot(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, slotWait)
	defer cancel()
	var conn *pgx.Conn
	for {
		var err error
		if conn, err = adminConn(ctx); err == nil {
			break
		}
		if !tooManyClients(err) || ctx.Err() != nil {
			return nil, err
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return nil, fmt.Errorf("testenv: no connection to PostgreSQL within %s: %w", slotWait, err)
		}
	}
	var maxConns, reserved int
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int`).Scan(&maxConns, &reserved); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	slots := max(1, (maxConns-reserved)/connsPerSlot)
	for {
		for n := 1; n <= slots; n++ {
			var ok bool
			if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", slotLockClass, n).Scan(&ok); err != nil {
				conn.Close(context.Background())
				return nil, err
			}
			if ok {
				return conn, nil
			}
		}
		if !sleep(ctx, 50*time.Millisecond) {
			conn.Close(context.Background())
			return nil, fmt.Errorf("testenv: no free test database slot within %s (%d slots for max_connections %d)", slotWait, slots, maxConns)
		}
	}
}

func tooManyClients(err error) bool { return db.TooManyClients(err) }

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
