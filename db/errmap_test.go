package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// A Wording's constraint entry is found under the name a single node
// gives, a Citus shard's (the shard's id appended) and in the message a
// coordinator relayed without the name; the entry is copied, never
// written to.
func TestWordingFindsTheConstraint(t *testing.T) {
	t.Parallel()
	entry := &errs.Error{Code: errs.CodeNotFound, Field: "taskRef.taskId", Message: "no such task in this org"}
	w := Wording{
		Constraints: Constraints{"task_knowledge_task_fkey": entry},
		Missing: func(r Refusal) *errs.Error {
			return &errs.Error{Code: errs.CodeNotFound, Field: r.What, Message: "missing"}
		},
	}
	for _, tc := range []struct {
		name  string
		err   *pgconn.PgError
		entry bool
	}{
		{"single node", &pgconn.PgError{Code: "23503", ConstraintName: "task_knowledge_task_fkey"}, true},
		{"a shard's", &pgconn.PgError{Code: "23503", ConstraintName: "task_knowledge_task_fkey_102041"}, true},
		{"relayed", &pgconn.PgError{Code: "23503", Message: `insert or update on table "task_knowledge_102041" violates foreign key constraint "task_knowledge_task_fkey_102041"`}, true},
		{"another constraint", &pgconn.PgError{Code: "23503", ConstraintName: "task_knowledge_org_fkey"}, false},
		{"not a shard's id", &pgconn.PgError{Code: "23503", ConstraintName: "task_knowledge_task_fkey_x1"}, false},
		{"a trailing underscore", &pgconn.PgError{Code: "23503", ConstraintName: "task_knowledge_task_fkey_"}, false},
	} {
		err := w.Map(fmt.Errorf("insert: %w", tc.err), "field")
		var e *errs.Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %v is not an *errs.Error", tc.name, err)
		}
		if got := e.Message == entry.Message; got != tc.entry {
			t.Errorf("%s: %+v, want the entry: %v", tc.name, e, tc.entry)
		}
		if !tc.entry && (e.Field != "field" || e.Message != "missing") {
			t.Errorf("%s: %+v, want the Wording's Missing", tc.name, e)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: the cause is lost", tc.name)
		}
	}
	if entry.Err != nil {
		t.Errorf("the table's entry was written to: %+v", entry)
	}
}

// What no Wording answers passes through; a database that cannot serve
// the call now is unavailable and retryable whatever the Wording; the
// caller's own deadline and an error already in the vocabulary pass as
// they are.
func TestWordingLeavesTheRestToUnavailable(t *testing.T) {
	t.Parallel()
	domain := &errs.Error{Code: errs.CodeForbidden, Message: "no", Err: pgx.ErrNoRows}
	for _, tc := range []struct {
		name string
		err  error
		code errs.Code // "": passes through as is
	}{
		{"no rows, no NoRows", pgx.ErrNoRows, ""},
		{"a check, no Check", &pgconn.PgError{Code: "23514"}, ""},
		{"unknown", &pgconn.PgError{Code: "XX000"}, ""},
		{"serialisation", &pgconn.PgError{Code: "40001"}, errs.CodeUnavailable},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, errs.CodeUnavailable},
		{"shutting down", &pgconn.PgError{Code: "57P01"}, errs.CodeUnavailable},
		{"a worker unreachable", &pgconn.PgError{Code: "08006"}, errs.CodeUnavailable},
		{"connection dropped", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), errs.CodeUnavailable},
		{"deadline", context.DeadlineExceeded, ""},
		{"in the vocabulary", domain, ""},
	} {
		err := (&Wording{}).Map(tc.err, "")
		if tc.code == "" {
			if err != tc.err {
				t.Errorf("%s: %v, want it as is", tc.name, err)
			}
			continue
		}
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != tc.code || !e.Retryable || !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %s, retryable, with its cause", tc.name, err, tc.code)
		}
	}
}

// TestUnreachableIsTheConnectionsFault: a connection that could not be
// made, for whatever reason (nothing listening, the role refused), or a
// server shutting down, is the node's state and another node may serve
// the read; an error the server returned for the statement is not.
func TestUnreachableIsTheConnectionsFault(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, refused := pgx.Connect(ctx, "postgres://knowledge_app@127.0.0.1:1/knowledge?sslmode=disable&connect_timeout=2")
	_, noRole := pgx.Connect(ctx, "postgres://no_such_role_here@127.0.0.1:5432/knowledge?sslmode=disable")
	for _, c := range []struct {
		what string
		err  error
		want bool
	}{
		{"nothing listening", refused, true},
		{"the role refused", noRole, true},
		{"shutting down", &pgconn.PgError{Code: "57P01"}, true},
		{"no such table", &pgconn.PgError{Code: "42P01"}, false},
		{"a constraint", &pgconn.PgError{Code: "23505"}, false},
	} {
		if c.err == nil {
			t.Fatalf("%s: no error", c.what)
		}
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("%s (%v): Unreachable %v, want %v", c.what, c.err, got, c.want)
		}
	}
}
