package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

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
	m := New(data.New(db.Pool), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	sp := vecspace.Of(m.emb)
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

	built, err := m.EnsureVectorIndex(ctx)
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
