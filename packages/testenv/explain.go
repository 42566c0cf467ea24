package testenv

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
)

// ExplainConn is a connection of its own on pool's database, closed with
// the test, on which auto_explain sends the plan of every statement as a
// notice, after the settings given (for example "SET
// auto_explain.log_analyze = on"); the notices gather in the slice
// returned. Plan tests run a statement on it as the product runs it
// (its arguments bound, a generic plan if they ask) and read the plan the
// server chose.
func ExplainConn(t testing.TB, pool *pgxpool.Pool, settings ...string) (*pgx.Conn, *[]string) {
	t.Helper()
	ctx := context.Background()
	cfg := pool.Config().ConnConfig.Copy()
	notices := &[]string{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { *notices = append(*notices, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, s := range append([]string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_level = notice"}, settings...) {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return conn, notices
}

// Plans gathers the plans auto_explain sends on an ExplainPool's
// connections, from any number of them at once.
type Plans struct {
	mu  sync.Mutex
	all []string
}

// All returns the plans gathered so far, oldest first.
func (p *Plans) All() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.all)
}

// ExplainPool is a pool on d as role (db.DefaultAppRole: under
// row-level security, as the MCP server runs), closed with the test, on
// whose connections auto_explain sends every statement's plan, nested ones
// too: code under test runs on it as on the product's pool, and the plans
// gather in the Plans returned. settings are "name=value" assignments made
// on the database (ALTER DATABASE ... SET, so that they bind a role that
// may not set them itself), for example "auto_explain.log_analyze=on" or
// "plan_cache_mode=force_generic_plan" (a statement in the plan a
// connection keeps for it once it has run five times); they apply to
// every connection made to d from then on.
func (d *Database) ExplainPool(t testing.TB, role string, settings ...string) (*pgxpool.Pool, *Plans) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all := append([]string{"session_preload_libraries=auto_explain", "auto_explain.log_min_duration=0",
		"auto_explain.log_level=notice", "auto_explain.log_nested_statements=on"}, settings...)
	for _, a := range all {
		name, value, ok := strings.Cut(a, "=")
		if !ok {
			t.Fatalf("testenv: explain setting %q is not name=value", a)
		}
		if _, err := d.Pool.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{d.Name}.Sanitize()+" SET "+name+" = '"+strings.ReplaceAll(value, "'", "''")+"'"); err != nil {
			t.Fatalf("testenv: explain setting %s: %v", a, err)
		}
	}
	plans := &Plans{}
	pool, err := db.Open(ctx, userURL(d.URL, role), db.OnNotice(func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "plan:") {
			plans.mu.Lock()
			plans.all = append(plans.all, n.Message)
			plans.mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatalf("testenv: explain pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, plans
}
