package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// With the memory tablespace there (setup makes it), a test's database
// and an empty one live in it, and TEST_TABLESPACE=default puts neither
// there; without it, in the default tablespace.
func TestDatabasesLiveInTheMemoryTablespaceWhenThereIsOne(t *testing.T) {
	ctx := context.Background()
	admin, err := adminConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	want := memoryTablespace(ctx, admin)
	if want == "" {
		want = "pg_default"
	}
	where := func(name string) string {
		var ts string
		if err := admin.QueryRow(ctx, `SELECT t.spcname FROM pg_database d JOIN pg_tablespace t ON t.oid = d.dattablespace
			WHERE d.datname = $1`, name).Scan(&ts); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	if got := where(Postgres(t).Name); got != want {
		t.Errorf("a test's database is in tablespace %s, want %s", got, want)
	}
	if got := where(EmptyPostgres(t).Name); got != want {
		t.Errorf("an empty database is in tablespace %s, want %s", got, want)
	}
	if want == "pg_default" {
		return
	}
	t.Setenv("TEST_TABLESPACE", "default")
	if ts := memoryTablespace(ctx, admin); ts != "" {
		t.Errorf("with TEST_TABLESPACE=default the databases go to %s", ts)
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

// A killed binary's databases (their owner's backend gone) are swept; a
// database whose owner is connected, and one named otherwise, are not.
func TestSweepDropsOnlyTheDatabasesOfGoneOwners(t *testing.T) {
	if IsCluster() {
		t.Skip("the sweep is off in cluster mode")
	}
	ctx := context.Background()
	admin, err := adminConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) }) // after the drops below
	owner, err := adminConn(ctx)                            // stands for a running binary's slot
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	tag, err := ownerTag(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	suffix := randomHex(3)
	orphan := testDBPrefix + "1_0_" + suffix // no backend started at the epoch
	alive := testDBPrefix + tag + "_" + suffix
	other := testDBPrefix + "legacy" + suffix
	for _, n := range []string{orphan, alive, other} {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{n}.Sanitize()+" TEMPLATE template0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := dropDatabase(context.Background(), admin, n); err != nil {
				t.Errorf("drop %s: %v", n, err)
			}
		})
	}
	if err := sweep(ctx); err != nil {
		t.Fatal(err)
	}
	exists := func(n string) bool {
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", n).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if exists(orphan) {
		t.Errorf("%s, whose owner is gone, was not swept", orphan)
	}
	if !exists(alive) || !exists(other) {
		t.Errorf("the sweep dropped a database it does not own: %s %v, %s %v", alive, exists(alive), other, exists(other))
	}
	owner.Close(ctx)
	// Its owner gone, the other database goes at the next sweep (a
	// backend's row leaves pg_stat_activity once it has exited).
	deadline := time.Now().Add(10 * time.Second)
	for exists(alive) && time.Now().Before(deadline) {
		if err := sweep(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if exists(alive) {
		t.Errorf("%s outlived its owner", alive)
	}
}
