package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateHint is what every app tells an operator whose database is not
// migrated (or not far enough).
const MigrateHint = "run `go tool task migrate` (or `go run ./apps/ctl migrate up`, which connects as the schema owner, OWNER_DATABASE_URL)"

// ErrSchema is wrapped by CheckSchema's errors: the database's schema is
// missing or older than this build's migrations.
var ErrSchema = errors.New("database schema")

// LatestVersion is the version of the newest migration this build embeds.
func LatestVersion() (int64, string) {
	var latest int64
	var name string
	entries, _ := fs.ReadDir(Migrations(), ".")
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		if v > latest {
			latest, name = v, strings.TrimSuffix(e.Name(), ".sql")
		}
	}
	return latest, name
}

// CheckSchema says, before an app uses the database, whether its schema is
// the one this build was made for. An unmigrated or too old database would
// otherwise surface as raw SQL errors on the first call (`relation "orgs"
// does not exist`, `function knowledge_embedding_spaces() does not exist`)
// instead of the command that fixes it. A newer schema than this build's
// passes: migrations are additive, and during a rolling deploy the new
// build migrates while old replicas still serve.
//
// It reads goose's own table, which is not part of the schema sqlc knows
// (goose creates it outside the migrations), hence plain SQL here.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	latest, name := LatestVersion()
	var applied int64
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version`).Scan(&applied)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return fmt.Errorf("%w: the database is not migrated (no migration applied): %s", ErrSchema, MigrateHint)
	}
	if err != nil {
		return fmt.Errorf("%w: reading the applied migrations: %v", ErrSchema, err)
	}
	if applied == 0 {
		return fmt.Errorf("%w: the database is not migrated (no migration applied): %s", ErrSchema, MigrateHint)
	}
	if applied < latest {
		return fmt.Errorf("%w: the database is migrated up to %05d, this build needs %s: %s", ErrSchema, applied, name, MigrateHint)
	}
	return nil
}
