package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// tenantTables are the tables with an org_id: every one must have its
// policy (a new table that forgets it fails TestEveryTenantTableHasAPolicy).
func tenantTables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname FROM pg_class c
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestEveryTenantTableHasAPolicy: row-level security is on for every table
// with an org, with a policy on app.org_id.
func TestEveryTenantTableHasAPolicy(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	tables := tenantTables(t, d.Pool)
	if len(tables) < 15 {
		t.Fatalf("found %d tenant tables: %v", len(tables), tables)
	}
	for _, tbl := range tables {
		var on bool
		var quals string
		err := d.Pool.QueryRow(ctx, `
			SELECT c.relrowsecurity, coalesce(string_agg(p.qual || ' / ' || p.with_check, '; '), '')
			FROM pg_class c LEFT JOIN pg_policies p ON p.schemaname = 'public' AND p.tablename = c.relname
			WHERE c.oid = ('public.' || $1)::regclass GROUP BY c.relrowsecurity`, tbl).Scan(&on, &quals)
		if err != nil {
			t.Fatal(err)
		}
		if !on || strings.Count(quals, "app_org_id()") != 2 {
			t.Errorf("%s: row security %v, policies %q", tbl, on, quals)
		}
	}
}

// TestApplicationRoleSeesOneOrg: the application's role sees no tenant row
// without app.org_id, only its org's with it, cannot write another org's
// rows, and cannot switch row security off.
func TestApplicationRoleSeesOneOrg(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	a, b := seed(t, d.Pool, "a"), seed(t, d.Pool, "b")
	if _, err := d.Pool.Exec(ctx, "INSERT INTO org_quotas (org_id, resource, limit_value) VALUES ($1, 'knowledge_stored', 10), ($2, 'knowledge_stored', 10)", a.org, b.org); err != nil {
		t.Fatal(err)
	}
	app := d.AppPool(t)

	for _, tbl := range tenantTables(t, d.Pool) {
		var n int
		if err := app.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&n); err != nil {
			t.Fatalf("%s: %v", tbl, err)
		}
		if n != 0 {
			t.Errorf("%s: the application's role sees %d rows without app.org_id", tbl, n)
		}
	}

	scoped := db.Scope(app)
	actx := db.WithOrg(ctx, a.org)
	for _, tbl := range []string{"knowledge", "agents", "tasks", "org_quotas"} {
		var orgs []uuid.UUID
		rows, err := scoped.Query(actx, "SELECT DISTINCT org_id FROM "+tbl)
		if err == nil {
			orgs, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		}
		if err != nil || len(orgs) != 1 || orgs[0] != a.org {
			t.Errorf("%s as org a: orgs %v, %v", tbl, orgs, err)
		}
	}
	// The setting lasts one transaction: the next statement on the same
	// connection without it sees nothing again.
	conn, err := app.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT set_config('app.org_id', $1, true)", a.org.String()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&n); err != nil || n != 0 {
		t.Errorf("after the setting's transaction: %d rows, %v", n, err)
	}

	// Writing a row of another org is refused, whatever the statement says.
	_, err = scoped.Exec(actx, "INSERT INTO tasks (org_id, title) VALUES ($1, 'x')", b.org)
	if pgCode(err) != "42501" {
		t.Errorf("insert into org b as org a: %v, want 42501", err)
	}
	tag, err := scoped.Exec(actx, "UPDATE knowledge SET title = 'hijacked' WHERE id = $1", b.entry)
	if err != nil || tag.RowsAffected() != 0 {
		t.Errorf("update of org b's entry as org a: %v rows, %v", tag.RowsAffected(), err)
	}
	tag, err = scoped.Exec(actx, "DELETE FROM knowledge WHERE org_id = $1", b.org)
	if err != nil || tag.RowsAffected() != 0 {
		t.Errorf("delete of org b's entries as org a: %v rows, %v", tag.RowsAffected(), err)
	}

	// No way around the policies for this role.
	var super, bypass bool
	if err := app.QueryRow(ctx, "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user").Scan(&super, &bypass); err != nil || super || bypass {
		t.Errorf("application role: superuser %v, bypassrls %v, %v", super, bypass, err)
	}
	if _, err := conn.Exec(ctx, "SET row_security = off"); err != nil {
		t.Fatal(err)
	}
	err = conn.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&n)
	if pgCode(err) != "42501" {
		t.Errorf("row_security off as the application's role: %v, want 42501 (query would be affected by row-level security)", err)
	}
	if _, err := conn.Exec(ctx, "RESET row_security"); err != nil {
		t.Fatal(err)
	}
}

// TestAuditRecordsCannotBeErasedByTheApplication: the application's role
// appends and reads audit records (of its org) and can make days, but
// cannot update, delete or truncate a record, reach a day's partition
// directly, or drop a day; the operator reads every org's records and runs
// the retention, which drops whole days, and cannot delete a record either.
func TestAuditRecordsCannotBeErasedByTheApplication(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	a := seed(t, d.Pool, "a")
	app, op := db.Scope(d.AppPool(t)), d.OperatorPool(t)
	actx := db.WithOrg(ctx, a.org)
	old := time.Now().Add(-40 * 24 * time.Hour)
	if _, err := app.Exec(actx, "SELECT audit_ensure_partitions($1, $1)", old); err != nil {
		t.Fatalf("the application making a day: %v", err)
	}
	for _, at := range []time.Time{time.Now(), old} {
		if _, err := app.Exec(actx, "INSERT INTO audit_events (org_id, at, kind, name, outcome, duration_us) VALUES ($1, $2, 'tool', 'get_knowledge', 'ok', 1)", a.org, at); err != nil {
			t.Fatalf("append as the application: %v", err)
		}
	}
	var day string
	if err := d.Pool.QueryRow(ctx, "SELECT tableoid::regclass::text FROM audit_events WHERE at < now() - interval '1 day'").Scan(&day); err != nil {
		t.Fatal(err)
	}
	for name, stmt := range map[string]string{
		"update":          "UPDATE audit_events SET outcome = 'x'",
		"delete":          "DELETE FROM audit_events",
		"truncate":        "TRUNCATE audit_events",
		"delete a day":    "DELETE FROM " + day,
		"truncate a day":  "TRUNCATE " + day,
		"drop a day":      "DROP TABLE " + day,
		"retention":       "SELECT audit_drop_partitions_before(now())",
		"detach a day":    "ALTER TABLE audit_events DETACH PARTITION " + day,
		"disable trigger": "ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only",
	} {
		if _, err := app.Exec(actx, stmt); pgCode(err) != "42501" {
			t.Errorf("%s as the application: %v, want 42501 (insufficient privilege)", name, err)
		}
	}
	for name, stmt := range map[string]string{
		"delete":         "DELETE FROM audit_events",
		"truncate":       "TRUNCATE audit_events",
		"delete a day":   "DELETE FROM " + day,
		"truncate a day": "TRUNCATE " + day,
	} {
		if _, err := op.Exec(ctx, stmt); pgCode(err) != "42501" {
			t.Errorf("%s as the operator: %v, want 42501", name, err)
		}
	}
	var n int
	if err := op.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n); err != nil || n != 2 {
		t.Fatalf("the operator reads %d records, %v; want 2", n, err)
	}
	var dropped int64
	if err := op.QueryRow(ctx, "SELECT audit_drop_partitions_before(now() - interval '30 days')").Scan(&dropped); err != nil || dropped != 1 {
		t.Fatalf("retention as the operator dropped %d, %v; want 1", dropped, err)
	}
	if err := op.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d records after the retention, %v; want today's", n, err)
	}
}

// TestEnsureRolesRefusesUnsafeRoles: EnsureRoles is idempotent and refuses
// an application role that bypasses row-level security and an operator
// that does not.
func TestEnsureRolesRefusesUnsafeRoles(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	if err := db.EnsureRoles(ctx, d.Pool, db.DefaultRoles()); err != nil {
		t.Fatalf("second run: %v", err)
	}
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	bypass, plain := "t_bypass_"+suffix, "t_plain_"+suffix
	for _, r := range []string{"CREATE ROLE " + bypass + " BYPASSRLS", "CREATE ROLE " + plain} {
		if _, err := d.Pool.Exec(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range []string{bypass, plain} {
			d.Pool.Exec(context.Background(), "DROP OWNED BY "+r)
			d.Pool.Exec(context.Background(), "DROP ROLE "+r)
		}
	})
	err := db.EnsureRoles(ctx, d.Pool, db.Roles{App: bypass, Operator: db.DefaultOperatorRole})
	if err == nil || !strings.Contains(err.Error(), "NOBYPASSRLS") {
		t.Errorf("application role with BYPASSRLS: %v", err)
	}
	err = db.EnsureRoles(ctx, d.Pool, db.Roles{App: db.DefaultAppRole, Operator: plain})
	if err == nil || !strings.Contains(err.Error(), "BYPASSRLS") {
		t.Errorf("operator role without BYPASSRLS: %v", err)
	}
	if err := (db.Roles{App: "Bad-Name", Operator: "x"}).Check(); err == nil || !strings.Contains(err.Error(), "app role") {
		t.Errorf("bad name: %v", err)
	}
}

// TestSimilarKeyLookupIsBoundToTheOrg: the duplicate check's key look-up
// (a SECURITY DEFINER function, so it can use its GIN index under
// row-level security) answers the org the transaction is set to, and
// nothing when asked for another.
func TestSimilarKeyLookupIsBoundToTheOrg(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	a, b := seed(t, d.Pool, "a"), seed(t, d.Pool, "b")
	if _, err := d.Pool.Exec(ctx, "UPDATE knowledge SET similar_keys = '{42}' WHERE id IN ($1, $2)", a.entry, b.entry); err != nil {
		t.Fatal(err)
	}
	app := db.Scope(d.AppPool(t))
	hits := func(as, org uuid.UUID) []uuid.UUID {
		t.Helper()
		rows, err := app.Query(db.WithOrg(ctx, as), "SELECT id FROM knowledge_similar_key_hits($1, '{42}', 10)", org)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := hits(a.org, a.org); len(got) != 1 || got[0] != a.entry {
		t.Errorf("org a's look-up as org a: %v, want [%v]", got, a.entry)
	}
	if got := hits(a.org, b.org); len(got) != 0 {
		t.Errorf("org b's look-up as org a: %v, want nothing", got)
	}
}

var errRolledBack = errors.New("rolled back")

// TestScopedTransactionRunsAsItsOrg: a transaction begun through Scoped
// runs every statement as the context's org, whatever its first one is (a
// read, a write, a batch, a savepoint), and the setting ends with it.
func TestScopedTransactionRunsAsItsOrg(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	a, b := seed(t, d.Pool, "a"), seed(t, d.Pool, "b")
	app := db.Scope(d.AppPool(t))
	actx := db.WithOrg(ctx, a.org)
	count := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) int {
		t.Helper()
		var n int
		if err := q.QueryRow(actx, "SELECT count(*) FROM knowledge").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for name, first := range map[string]func(tx pgx.Tx) error{
		"read": func(tx pgx.Tx) error { _, err := tx.Exec(actx, "SELECT 1 FROM knowledge"); return err },
		"write": func(tx pgx.Tx) error {
			_, err := tx.Exec(actx, "INSERT INTO tasks (org_id, title) VALUES ($1, 'x')", a.org)
			return err
		},
		"batch": func(tx pgx.Tx) error {
			bt := &pgx.Batch{}
			bt.Queue("SELECT count(*) FROM knowledge")
			return tx.SendBatch(actx, bt).Close()
		},
		"savepoint": func(tx pgx.Tx) error {
			sp, err := tx.Begin(actx)
			if err == nil {
				err = sp.Commit(actx)
			}
			return err
		},
	} {
		err := pgx.BeginFunc(actx, app, func(tx pgx.Tx) error {
			if err := first(tx); err != nil {
				return err
			}
			if n := count(tx); n != 1 {
				t.Errorf("%s first: the transaction sees %d entries, want org a's 1", name, n)
			}
			_, err := tx.Exec(actx, "INSERT INTO tasks (org_id, title) VALUES ($1, 'y')", b.org)
			if pgCode(err) != "42501" {
				t.Errorf("%s first: writing org b's row: %v, want 42501", name, err)
			}
			return errRolledBack // the refused write aborted the transaction
		})
		if !errors.Is(err, errRolledBack) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// The pool's connections come back without the setting.
	if n := count(d.AppPool(t)); n != 0 {
		t.Errorf("a new statement without the org sees %d entries", n)
	}
}
