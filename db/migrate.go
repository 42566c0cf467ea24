package db

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the migration files, rooted at the directory that holds them.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory exists
	}
	return sub
}

// MigrationStatus is one migration and whether it has been applied.
type MigrationStatus struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	// AppliedAt is RFC 3339, empty when not applied.
	AppliedAt string `json:"appliedAt,omitempty"`
}

func provider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations())
	if err != nil {
		sqlDB.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, sqlDB, nil
}

// Migrate applies every pending migration. It is safe to call concurrently
// from several processes: goose serialises them with a session lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	p, sqlDB, err := provider(pool)
	if err != nil {
		return nil, err
	}
	defer sqlDB.Close()
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
	}
	if len(results) > 0 {
		renew(pool)
	}
	out := make([]MigrationStatus, 0, len(results))
	for _, r := range results {
		out = append(out, MigrationStatus{Version: r.Source.Version, Name: baseName(r.Source.Path), Applied: true})
	}
	return out, nil
}

// MigrateTo applies the pending migrations up to and including version,
// and MigrateDownTo rolls back the applied ones above version: for tests of
// a migration against data written before it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	p, sqlDB, err := provider(pool)
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	results, err := p.UpTo(ctx, version)
	if err != nil {
		return fmt.Errorf("migrate up to %d: %w", version, err)
	}
	if len(results) > 0 {
		renew(pool)
	}
	return nil
}

// MigrateDownTo: see MigrateTo.
func MigrateDownTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	p, sqlDB, err := provider(pool)
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	results, err := p.DownTo(ctx, version)
	if err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	if len(results) > 0 {
		renew(pool)
	}
	return nil
}

// renew closes pool's connections once migrations changed the schema
// (those in use when they are released): a connection knows the types it
// registered when it was made (Open registers pgvector's once the
// extension exists), so one made before the migration that created the
// extension could not send a vector afterwards.
func renew(pool *pgxpool.Pool) { pool.Reset() }

// Status lists every known migration and whether it is applied.
func Status(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	p, sqlDB, err := provider(pool)
	if err != nil {
		return nil, err
	}
	defer sqlDB.Close()
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		m := MigrationStatus{Version: s.Source.Version, Name: baseName(s.Source.Path), Applied: s.State == goose.StateApplied}
		if m.Applied && !s.AppliedAt.IsZero() {
			m.AppliedAt = s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
		out = append(out, m)
	}
	return out, nil
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
