package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestConstraintErrorsNameTheSchemasConstraints pins the error mapping to
// the schema: every constraint name MapErr keys on exists, so renaming one
// in a migration fails here instead of turning a clear error (no such task)
// into an opaque failure.
func TestConstraintErrorsNameTheSchemasConstraints(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	for name := range constraintErrors {
		var n int
		if err := db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_constraint WHERE conname = $1 AND connamespace = 'public'::regnamespace", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("constraint %s: %d in the schema, want 1", name, n)
		}
	}
}

// A database that cannot be reached is unavailable (retryable), whichever
// call meets it first; an error the vocabulary does not know is internal
// and names the operation; a deadline stays the caller's to word.
func TestBoundaryClassifiesErrors(t *testing.T) {
	t.Parallel()
	_, connErr := pgx.Connect(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if connErr == nil {
		t.Fatal("connected to port 1")
	}
	for _, tc := range []struct {
		name string
		err  error
		code errs.Code
	}{
		{"connect refused", connErr, errs.CodeUnavailable},
		{"connection dropped", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), errs.CodeUnavailable},
		{"a Citus worker unreachable", &pgconn.PgError{Code: "08006", Message: "connection to the remote node 127.0.0.1:5442 failed"}, errs.CodeUnavailable},
		{"shutting down", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, errs.CodeUnavailable},
		{"starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, errs.CodeUnavailable},
		{"an unknown server error", &pgconn.PgError{Code: "XX000", Message: "internal"}, errs.CodeInternal},
		{"a bug", errors.New("assignment to entry in nil map"), errs.CodeInternal},
		{"deadline", context.DeadlineExceeded, errs.CodeInternal},
		{"no rows", pgx.ErrNoRows, errs.CodeNotFound},
	} {
		err := tc.err
		WrapOp(&err, "knowledge.Test")
		if errs.CodeOf(err) != tc.code || errs.OpOf(err) != "knowledge.Test" || !errors.Is(err, tc.err) {
			t.Errorf("%s: code %q op %q (is cause: %v), want %q", tc.name, errs.CodeOf(err), errs.OpOf(err), errors.Is(err, tc.err), tc.code)
		}
		var e *errs.Error
		if errors.As(err, &e); e.Retryable != (tc.code == errs.CodeUnavailable) {
			t.Errorf("%s: retryable %v", tc.name, e.Retryable)
		}
	}
}

// A unique violation says what already exists: the key when Postgres names
// it, the rule when row-level security left the detail empty, never a
// message that ends on a colon.
func TestDuplicateNamesTheKeyOrTheRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *pgconn.PgError
		want string
	}{
		{&pgconn.PgError{Code: "23505", ConstraintName: "knowledge_client_token_key", Detail: "Key (client_token)=(x) already exists."},
			"already exists: Key (client_token)=(x) already exists."},
		{&pgconn.PgError{Code: "23505", ConstraintName: "knowledge_client_token_key"},
			"already exists (unique rule knowledge_client_token_key)"},
		{&pgconn.PgError{Code: "23505"}, "already exists"},
	} {
		err := MapErr(tc.err, "")
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.CodeConflict || e.Message != tc.want {
			t.Errorf("%+v: %v, want %q", tc.err, err, tc.want)
		}
	}
}
