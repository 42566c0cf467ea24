package db

import (
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// The database's errors in the error vocabulary (packages/errs). This file
// is the one place that reads a Postgres error: a domain package (knowledge,
// tenancy) gives the words (a Wording: its constraints' errors, its answer
// per kind of refusal), and what no domain words differently, a database
// that cannot serve the call now, is answered here, the same for every
// domain: unavailable and retryable.

// Constraints maps the names of a domain's constraints (named by its
// migrations, not left to Postgres' defaults) to the errors their
// violations mean to its callers.
type Constraints map[string]*errs.Error

// constraintInMessage finds the constraint a message names, for an error
// relayed by a Citus coordinator, which leaves the worker's constraint
// field out.
var constraintInMessage = regexp.MustCompile(`constraint "([^"]+)"`)

// lookup is c's entry of the constraint pgErr names, also when it is a
// Citus shard's: relayed without its constraint field, and named as the
// distributed table's constraint with the shard's id appended
// (task_knowledge_task_fkey_102041).
func (c Constraints) lookup(pgErr *pgconn.PgError) (*errs.Error, bool) {
	if len(c) == 0 {
		return nil, false
	}
	name := pgErr.ConstraintName
	if m := constraintInMessage.FindStringSubmatch(pgErr.Message); name == "" && m != nil {
		name = m[1]
	}
	if e, ok := c[name]; ok {
		return e, true
	}
	i := strings.LastIndexByte(name, '_')
	if i < 0 || strings.Trim(name[i+1:], "0123456789") != "" || i == len(name)-1 {
		return nil, false
	}
	e, ok := c[name[:i]]
	return e, ok
}

// Refusal is what the database said when it refused a statement, for a
// Wording's answers.
type Refusal struct {
	// What is what the mapping call names (Wording.Map's what).
	What string
	// Constraint is the constraint broken, "" when none is named.
	Constraint string
	// Message and Detail are Postgres' ("value too long for type ...",
	// "Key (name)=(acme) already exists.").
	Message, Detail string
}

// Wording is how a domain words the database's refusals of its calls. A nil
// answer leaves its kind of refusal unmapped: it passes through, and the
// service boundary (errs.Wrap) makes it internal.
type Wording struct {
	// Constraints are checked first: a violation of a constraint named
	// there is its entry, whatever the kind.
	Constraints Constraints
	// NoRows: a row the call needs is not there (pgx.ErrNoRows).
	NoRows func(what string) *errs.Error
	// Duplicate: a unique violation (23505).
	Duplicate func(Refusal) *errs.Error
	// Missing: a foreign key to a row that is not there (23503).
	Missing func(Refusal) *errs.Error
	// Check: a CHECK constraint (23514).
	Check func(Refusal) *errs.Error
	// NotNull: a NULL where the schema wants a value (23502).
	NotNull func(Refusal) *errs.Error
	// Malformed: a value too long (22001), malformed for its type (22P02)
	// or not valid in the encoding (22021).
	Malformed func(Refusal) *errs.Error
}

// Map returns err in the vocabulary: an *errs.Error as is, a refusal as
// the Wording words it, a database that cannot serve the call now as
// Unavailable does; anything else as is. what names what the call looked
// up or wrote, for the Wording.
func (w *Wording) Map(err error, what string) error {
	if err == nil {
		return nil
	}
	var de *errs.Error
	if errors.As(err, &de) {
		return err
	}
	if w.NoRows != nil && errors.Is(err, pgx.ErrNoRows) {
		return withCause(w.NoRows(what), err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if e, ok := w.Constraints.lookup(pgErr); ok {
			return withCause(e, err)
		}
		var answer func(Refusal) *errs.Error
		switch pgErr.Code {
		case "23505":
			answer = w.Duplicate
		case "23503":
			answer = w.Missing
		case "23514":
			answer = w.Check
		case "23502":
			answer = w.NotNull
		case "22001", "22P02", "22021":
			answer = w.Malformed
		}
		if answer != nil {
			return withCause(answer(Refusal{What: what, Constraint: pgErr.ConstraintName, Message: pgErr.Message, Detail: pgErr.Detail}), err)
		}
	}
	return Unavailable(err)
}

// withCause is a copy of e (never write to a shared value: a Constraints
// entry) with err as its cause.
func withCause(e *errs.Error, err error) error {
	c := *e
	c.Err = err
	return &c
}

// Unavailable maps the errors of a database that cannot serve the call
// now to unavailable, retryable: it asked for a retry (a serialisation
// failure or deadlock, a lock or statement timeout, too many connections),
// is shutting down or starting up, cannot be reached or dropped the
// connection. Any other error is returned as is: an *errs.Error, another
// of the server's errors, and a context's cancellation or deadline, which
// only the edge that set it can word.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	var de *errs.Error
	if errors.As(err, &de) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03", "57014", "53300":
			return &errs.Error{Code: errs.CodeUnavailable, Message: "the database asked to retry: " + pgErr.Message, Retryable: true, Err: err}
		}
		if goingAway(pgErr) {
			return unavailable(err)
		}
		if strings.HasPrefix(pgErr.Code, "08") {
			// A connection exception the server reports: on a Citus
			// cluster, the coordinator could not reach the worker that
			// holds the org's shards (08006). That worker is down, not the
			// call wrong: the org's calls are unavailable until it is back,
			// and the other workers' orgs are served meanwhile.
			return unavailable(err)
		}
		return err
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return unavailable(err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the caller's: only the edge that set the deadline can word it
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The database cannot be reached or dropped the connection.
		return unavailable(err)
	}
	return err
}

// unavailable is Unavailable's answer for a database it cannot use now.
// The context check sits between its two uses because
// context.DeadlineExceeded is a net.Error too, and the caller's deadline is
// not the database's fault.
func unavailable(err error) *errs.Error {
	return &errs.Error{Code: errs.CodeUnavailable, Message: "the database is unavailable", Retryable: true, Err: err}
}

// LostRace reports a transaction Postgres aborted as a serialisation
// failure or a deadlock: running the whole transaction again can succeed
// (RetryTx).
func LostRace(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// NoPartition reports a row refused because no partition of its table
// takes it ("no partition of relation ... found for row": a CHECK
// violation that names no constraint), so the caller can make the
// partition and write the row again.
func NoPartition(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == ""
}

// SharedMemoryShort reports the server lacking the shared memory a
// parallel build asks for: "could not resize shared memory segment ... No
// space left on device" (disk_full, from /dev/shm) or its out_of_memory
// twin.
func SharedMemoryShort(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "53100" || pe.Code == "53200") && strings.Contains(pe.Message, "shared memory")
}

// Unreachable reports an error of a connection that could not be made or
// was lost (the server down, shutting down, not answering in time, or
// refusing the role), as
// against an error the server returned for the statement: on a read,
// nothing of it changed anything, and another node may serve it. Whose
// deadline a timeout was is the caller's to tell (its context).
func Unreachable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true // refused, not answering, or not letting this role in (pg_hba, a password)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return goingAway(pe)
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}

// goingAway reports the server shutting down or starting up (57P01-57P03).
func goingAway(pe *pgconn.PgError) bool {
	return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
}

// ShardUnanswered reports a read of every shard of a Citus cluster that
// a shard's worker did not answer: knowledge_embedding_spaces (migration
// 00027) raises it when run_command_on_shards reports a failed shard.
func ShardUnanswered(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "P0001" && strings.Contains(pe.Message, "a shard did not answer")
}

// TooManyClients reports the server refusing a connection because every
// slot is taken (too_many_connections): a test harness waits for one.
func TooManyClients(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53300"
}
