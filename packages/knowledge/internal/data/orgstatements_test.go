package data

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/orgcall"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestAStoredStatementIsTheTextItsNameWasMadeFrom: the workers prepare
// the text stored under the name a call gives (migration 00047), so the
// table must refuse a text its name was not made from, and take the one
// it was, as the application's role.
func TestAStoredStatementIsTheTextItsNameWasMadeFrom(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	app := d.AppPool(t)
	ctx := context.Background()
	const text = "SELECT id FROM knowledge WHERE org_id = $1"
	name := orgcall.New("knowledge", text).Name()
	if !regexp.MustCompile(`^knowledge_[0-9a-f]{16}$`).MatchString(name) {
		t.Fatalf("name %q: want knowledge_ and 16 hex digits", name)
	}
	if orgcall.New("knowledge", text+" ").Name() == name {
		t.Fatal("two texts share a name")
	}
	const insert = `INSERT INTO knowledge_org_statements (name, sql) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`
	_, err := app.Exec(ctx, insert, name, "SELECT id FROM knowledge")
	var pe *pgconn.PgError
	// (A Citus coordinator relays the error without its constraint field.)
	if !errors.As(err, &pe) || pe.Code != "23514" || !strings.Contains(pe.Message, "knowledge_org_statements_hash") {
		t.Fatalf("another text under the name: %v, want the hash check's violation", err)
	}
	for range 2 { // the second, a process storing it again, is no error
		if _, err := app.Exec(ctx, insert, name, text); err != nil {
			t.Fatal(err)
		}
	}
	var got string
	if err := app.QueryRow(ctx, `SELECT sql FROM knowledge_org_statements WHERE name = $1`, name).Scan(&got); err != nil || got != text {
		t.Fatalf("stored %q, %v; want %q", got, err, text)
	}
}
