package knowledge

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestBuildMemory: an HNSW build gets the memory its graph needs, within
// the floor, the server's own setting and the deployment's ceiling, and
// says when the ceiling leaves the graph without room.
func TestBuildMemory(t *testing.T) {
	const mb, gb = int64(1) << 20, int64(1) << 30
	v768 := VectorSpace{Model: "m", Dims: 768}
	// The estimate against pgvector 0.8.0 itself: with 1 GB a build of 768
	// dimensions had written its graph out before its 300,000th element
	// (its progress on the 1M-row benchmark fell to a sixth), and pgvector's
	// own accounting (hnswbuild.c) puts 3,700-3,800 bytes in an element.
	if g := graphBytes(v768, 280_000); g < gb*95/100 || g > gb*105/100 {
		t.Errorf("graphBytes(768 dims, 280,000) = %d MB, want about 1,024 MB", g/mb)
	}
	if g := graphBytes(v768, 300_000); g < gb {
		t.Errorf("graphBytes(768 dims, 300,000) = %d MB: says 1 GB held them, and it did not", g/mb)
	}
	// halfvec past 2,000 dimensions: two bytes a dimension.
	if a, b := graphBytes(VectorSpace{Dims: 3072}, 1000), graphBytes(VectorSpace{Dims: 1536}, 1000); a != b {
		t.Errorf("3,072 dimensions as halfvec take %d bytes, 1,536 as vector %d: want the same", a, b)
	}
	for _, c := range []struct {
		name               string
		n, server, ceiling int64
		wantMin, wantMax   int64
		wantCapped         bool
	}{
		{"small: the floor", 1000, 64 * mb, 4 * gb, 64 * mb, 64 * mb, false},
		{"1M entries of 768 dims fit the default", 1_000_000, 64 * mb, DefaultVectorIndexMemory, 4 * gb * 9 / 10, 4 * gb, false},
		{"100k org", 100_000, 64 * mb, 4 * gb, 380 * mb, 450 * mb, false},
		{"the server gives more", 1000, 8 * gb, 4 * gb, 8 * gb, 8 * gb, false},
		{"over the ceiling", 1_000_000, 64 * mb, 1 * gb, 1 * gb, 1 * gb, true},
		{"over the ceiling, the server gives enough", 1_000_000, 6 * gb, 1 * gb, 6 * gb, 6 * gb, false},
	} {
		mem, capped := buildMemory(v768, c.n, c.server, c.ceiling)
		if mem < c.wantMin || mem > c.wantMax || capped != c.wantCapped {
			t.Errorf("%s: %d MB (capped %v), want %d-%d MB (capped %v)", c.name, mem/mb, capped, c.wantMin/mb, c.wantMax/mb, c.wantCapped)
		}
	}
}

// TestVectorIndexBuildFallsBackWithoutParallelWorkers: a parallel build
// that finds no room for its shared memory segment (a container's 64 MB
// /dev/shm) is built again without parallel workers, after the invalid
// index the failed CONCURRENTLY build left is dropped. Making the server
// really run out would fill this machine's /dev/shm, which is its RAM: the
// first build is failed here instead, after it left an invalid index as a
// real failure does.
func TestVectorIndexBuildFallsBackWithoutParallelWorkers(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	var logs testenv.Buffer
	svc := New(db.Pool, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	sp := SpaceOf(svc.opts.Embedder)
	var dbName string
	if err := db.Pool.QueryRow(ctx, "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	var calls []string // max_parallel_maintenance_workers at each build of this test's database
	real := runBuild
	runBuild = func(ctx context.Context, conn *pgx.Conn, ddl string) error {
		if conn.Config().Database != dbName || !strings.Contains(ddl, sp.IndexName()) {
			return real(ctx, conn, ddl) // another test's build
		}
		var workers string
		if err := conn.QueryRow(ctx, "SELECT current_setting('max_parallel_maintenance_workers')").Scan(&workers); err != nil {
			return err
		}
		calls = append(calls, workers)
		if err := real(ctx, conn, ddl); err != nil {
			return err
		}
		if len(calls) > 1 {
			return nil
		}
		if _, err := conn.Exec(ctx, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1::regclass", sp.IndexName()); err != nil {
			return err
		}
		return &pgconn.PgError{Severity: "ERROR", Code: "53100",
			Message: `could not resize shared memory segment "/PostgreSQL.1234" to 4194304000 bytes: No space left on device`}
	}
	t.Cleanup(func() { runBuild = real })

	built, err := svc.EnsureVectorIndex(ctx)
	if err != nil || !built {
		t.Fatalf("EnsureVectorIndex: built %v, err %v", built, err)
	}
	if len(calls) != 2 || calls[1] != "0" {
		t.Fatalf("builds saw max_parallel_maintenance_workers %v, want a second build with 0", calls)
	}
	var valid bool
	if err := db.Pool.QueryRow(ctx, "SELECT indisvalid FROM pg_index WHERE indexrelid = $1::regclass", sp.IndexName()).Scan(&valid); err != nil || !valid {
		t.Fatalf("the index after the fallback: valid %v, err %v", valid, err)
	}
	if !strings.Contains(logs.String(), "building without parallel workers") {
		t.Errorf("no warning of the fallback in the log:\n%s", logs.String())
	}
	// Any other failure is an error, not a second build.
	if sharedMemoryShort(errors.New("shared memory")) || sharedMemoryShort(&pgconn.PgError{Code: "53100", Message: "could not extend file"}) {
		t.Error("sharedMemoryShort matches failures that are not the shared memory segment")
	}
}
