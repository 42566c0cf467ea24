package tenancy

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB runs statements: a *pgxpool.Pool, a *pgx.Conn, a pgx.Tx or a
// db.Scoped satisfies it. The package's functions that take one read or
// write inside the caller's snapshot or transaction (an export, knowledge's
// Stats), so that what they see agrees with the caller's own statements.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
