package tenancy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// A database that cannot be reached, or that dropped the connection, is
// unavailable and retryable, as in knowledge: the caller (the MCP server's
// token check, ctl) can retry later, and it is not logged as a bug.
func TestLostDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wantUnavailable := func(what string, err error) {
		t.Helper()
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.CodeUnavailable || !e.Retryable || errs.OpOf(err) != "tenancy.ListOrgs" {
			t.Errorf("%s: %v (code %q, op %q), want unavailable, retryable, op tenancy.ListOrgs", what, err, errs.CodeOf(err), errs.OpOf(err))
		}
	}

	// Nothing listens on port 1.
	closed, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer closed.Close()
	_, err = tenancy.New(closed).ListOrgs(ctx)
	wantUnavailable("a closed port", err)

	// The server ends the backend under the pool's one connection.
	d := testenv.Postgres(t)
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var pid int32
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var ended bool
	if err := d.Pool.QueryRow(ctx, "SELECT pg_terminate_backend($1::int, 10000)", pid).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate backend %d: %v (ended %v)", pid, err, ended)
	}
	svc := tenancy.New(pool)
	_, err = svc.ListOrgs(ctx)
	wantUnavailable("a terminated backend", err)
	// The retry is served, on a new connection.
	if _, err := svc.ListOrgs(ctx); err != nil {
		t.Errorf("after the backend ended: %v", err)
	}
}
