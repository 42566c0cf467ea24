package db

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The database roles (docs/operators.md, "Roles"):
//
//   - the owner: whoever runs the migrations (OWNER_DATABASE_URL); owns
//     every table, is exempt from row-level security, and is the role of
//     the worker, whose upkeep (VACUUM, ANALYZE, index builds) PostgreSQL
//     15 allows only a table's owner;
//   - the application (knowledge_app): the MCP server. Not a superuser, no
//     BYPASSRLS, so every tenant table shows it one org per transaction;
//     reads and writes the tenant tables, may only INSERT and SELECT audit
//     records, and may make audit days but never drop them;
//   - the operator (knowledge_operator): ctl's commands, which cross orgs on
//     purpose (purge, export, import, stats of every org) and run the audit
//     retention. BYPASSRLS; reads the audit trail, never writes, updates or
//     deletes a record: the retention drops whole days through
//     audit_drop_partitions_before, the only way a record leaves.
//
// The names are configurable (DB_APP_ROLE, DB_OPERATOR_ROLE); EnsureRoles
// makes the roles that are missing and (re)grants their privileges after
// every migration, since grants name roles and migrations cannot.

// Roles names the application's and the operator's roles.
type Roles struct {
	App      string
	Operator string
}

// Default role names.
const (
	DefaultAppRole      = "knowledge_app"
	DefaultOperatorRole = "knowledge_operator"
)

// DefaultRoles are the default names.
func DefaultRoles() Roles { return Roles{App: DefaultAppRole, Operator: DefaultOperatorRole} }

var roleName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Check says which name breaks the rule.
func (r Roles) Check() error {
	for _, n := range []struct{ field, v string }{{"app", r.App}, {"operator", r.Operator}} {
		if !roleName.MatchString(n.v) {
			return fmt.Errorf("%s role %q: must be a lower-case identifier of at most 63 characters (letters, digits, _)", n.field, n.v)
		}
	}
	if r.App == r.Operator {
		return fmt.Errorf("app and operator roles must differ (both %q)", r.App)
	}
	return nil
}

// EnsureRoles makes the application's and the operator's roles when they
// do not exist (LOGIN, no password: set one with ALTER ROLE where the
// server asks for passwords), refuses roles whose attributes break the
// model (an application role that is a superuser or bypasses RLS, an
// operator that is a superuser or does not bypass RLS), and grants each
// its privileges on the schema pool's database holds. Idempotent; run as
// the schema's owner right after the migrations (ctl migrate up, tests'
// template).
func EnsureRoles(ctx context.Context, pool *pgxpool.Pool, r Roles) error {
	if err := r.Check(); err != nil {
		return err
	}
	if err := ensureRole(ctx, pool, r.App, false); err != nil {
		return err
	}
	if err := ensureRole(ctx, pool, r.Operator, true); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return grant(ctx, tx, pool, r) })
}

// grant (re)grants each role its privileges, in one transaction.
func grant(ctx context.Context, tx pgx.Tx, pool *pgxpool.Pool, r Roles) error {
	// One grant run at a time: GRANT on the same objects from two
	// sessions can fail with "tuple concurrently updated".
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('knowledge_grants'))"); err != nil {
		return err
	}
	// On a Citus coordinator a grant is DDL on every shard: one
	// connection a worker, so grants on distributed and reference
	// tables can follow each other in one transaction (db/citus.go).
	if citus, err := IsCitus(ctx, pool); err != nil {
		return err
	} else if citus {
		if _, err := tx.Exec(ctx, "SET LOCAL citus.multi_shard_modify_mode TO sequential"); err != nil {
			return err
		}
	}
	app, op := pgx.Identifier{r.App}.Sanitize(), pgx.Identifier{r.Operator}.Sanitize()
	stmts := fixedGrants(app, op)
	// Every other table (the audit days excepted: they are reached
	// only through audit_events, whose grants apply to them), read and
	// written row by row; never TRUNCATE.
	tables, err := names(ctx, tx, `
		SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
		  AND NOT c.relispartition
		  AND c.relname NOT IN ('goose_db_version', 'audit_events', 'audit_keys', 'knowledge_secrets')
		ORDER BY 1`)
	if err != nil {
		return err
	}
	for _, t := range tables {
		stmts = append(stmts, "GRANT SELECT, INSERT, UPDATE, DELETE ON "+pgx.Identifier{t}.Sanitize()+" TO "+app+", "+op)
	}
	// The audit days that exist: nothing directly, whatever an
	// earlier grant said.
	days, err := names(ctx, tx, `
		SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'public.audit_events'::regclass ORDER BY 1`)
	if err != nil {
		return err
	}
	for _, d := range days {
		stmts = append(stmts, "REVOKE ALL ON "+pgx.Identifier{d}.Sanitize()+" FROM "+app+", "+op)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("grants (%s): %w", s, err)
		}
	}
	return nil
}

// fixedGrants are the grants on the objects the migrations name, to the
// application (app) and the operator (op), both sanitized identifiers.
func fixedGrants(app, op string) []string {
	return []string{
		"GRANT USAGE ON SCHEMA public TO " + app + ", " + op,
		"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO " + app + ", " + op,
		// The migrations' record: read by the apps' start-up check.
		"GRANT SELECT ON goose_db_version TO " + app + ", " + op,
		"REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON goose_db_version FROM " + app + ", " + op,
		// The audit trail: append and read for the application, read
		// for the operator; days are made and dropped by functions.
		"REVOKE ALL ON audit_events FROM " + app + ", " + op,
		"GRANT SELECT, INSERT ON audit_events TO " + app,
		"GRANT SELECT ON audit_events TO " + op,
		"GRANT EXECUTE ON FUNCTION audit_ensure_partitions(timestamptz, timestamptz) TO " + app + ", " + op,
		"REVOKE EXECUTE ON FUNCTION audit_drop_partitions_before(timestamptz) FROM " + app,
		"GRANT EXECUTE ON FUNCTION audit_drop_partitions_before(timestamptz) TO " + op,
		// Keys made by the migrations: read only.
		"REVOKE ALL ON audit_keys, knowledge_secrets FROM " + app + ", " + op,
		"GRANT SELECT ON audit_keys, knowledge_secrets TO " + app + ", " + op,
	}
}

// names runs a catalog query of one text column and returns its rows.
func names(ctx context.Context, tx pgx.Tx, sql string) ([]string, error) {
	rows, err := tx.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ensureRole makes role (LOGIN, bypassing RLS when operator) if missing and
// checks its attributes either way.
func ensureRole(ctx context.Context, pool *pgxpool.Pool, role string, operator bool) error {
	check := func() (bool, error) {
		var super, bypass bool
		err := pool.QueryRow(ctx, "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = $1", role).Scan(&super, &bypass)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		id := pgx.Identifier{role}.Sanitize()
		switch {
		case super:
			return true, fmt.Errorf("role %s is a superuser: the application and operator roles must not be (ALTER ROLE %s NOSUPERUSER)", role, id)
		case operator && !bypass:
			return true, fmt.Errorf("operator role %s must bypass row-level security to cross orgs (ALTER ROLE %s BYPASSRLS)", role, id)
		case !operator && bypass:
			return true, fmt.Errorf("application role %s must not bypass row-level security (ALTER ROLE %s NOBYPASSRLS)", role, id)
		}
		return true, nil
	}
	exists, err := check()
	if exists || err != nil {
		return err
	}
	attrs := "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS"
	if operator {
		attrs = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE BYPASSRLS"
	}
	_, err = pool.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" "+attrs)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505"):
		// Made meanwhile by another session (roles are per server).
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return fmt.Errorf("role %s does not exist and this role may not create it (%s): create it as a superuser with CREATE ROLE %s %s",
			role, pgErr.Message, pgx.Identifier{role}.Sanitize(), attrs)
	case err != nil:
		return fmt.Errorf("create role %s: %w", role, err)
	}
	_, err = check()
	return err
}
