package testenv

import (
	"context"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

func TestPostgresIsMigratedAndIsolated(t *testing.T) {
	t.Parallel()
	a, b := Postgres(t), Postgres(t)
	if a.Name == b.Name {
		t.Fatalf("two tests got the same database %s", a.Name)
	}
	ctx := context.Background()
	testfactory.Org(ctx, t, a.Pool, nil)
	var n int
	if err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM orgs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database b sees %d orgs written to a", n)
	}
	var ext string
	if err := a.Pool.QueryRow(ctx, "SELECT extversion FROM pg_extension WHERE extname = 'vector'").Scan(&ext); err != nil {
		t.Fatalf("vector extension missing: %v", err)
	}
}

func TestRedisLeasesAreDistinctAndEmpty(t *testing.T) {
	t.Parallel()
	a, b := LeaseRedis(t), LeaseRedis(t)
	if a.DB == b.DB {
		t.Fatalf("two leases share db %d", a.DB)
	}
	ctx := context.Background()
	if err := a.Client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Client.Exists(ctx, "k").Result(); n != 0 {
		t.Fatalf("db %d sees a key of db %d", b.DB, a.DB)
	}
}

func TestMain(m *testing.M) { Main(m) }
