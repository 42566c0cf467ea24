package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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
