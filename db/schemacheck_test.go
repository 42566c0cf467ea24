package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// An unmigrated or too old database is refused with the command that fixes
// it; a migrated one passes.
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	latest, name := db.LatestVersion()
	if latest < 17 || !strings.HasPrefix(name, "000") {
		t.Fatalf("latest migration %d %q", latest, name)
	}

	empty := testenv.EmptyPostgres(t)
	err := db.CheckSchema(ctx, empty.Pool)
	if !errors.Is(err, db.ErrSchema) || !strings.Contains(err.Error(), "not migrated") || !strings.Contains(err.Error(), "go tool task migrate") || !strings.Contains(err.Error(), "ctl migrate up") {
		t.Errorf("empty database: %v", err)
	}

	d := testenv.Postgres(t)
	if err := db.CheckSchema(ctx, d.Pool); err != nil {
		t.Fatalf("migrated database: %v", err)
	}
	if _, err := d.Pool.Exec(ctx, "DELETE FROM goose_db_version WHERE version_id = $1", latest); err != nil {
		t.Fatal(err)
	}
	err = db.CheckSchema(ctx, d.Pool)
	if !errors.Is(err, db.ErrSchema) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "go tool task migrate") {
		t.Errorf("one migration behind: %v", err)
	}
}
