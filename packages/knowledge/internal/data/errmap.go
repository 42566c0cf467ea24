package data

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

// constraintErrors maps the schema's constraint names to domain errors. The
// names are given by 00003_ratelimits.sql (not left to Postgres' defaults),
// and TestConstraintErrorsNameTheSchemasConstraints pins each to the schema.
var constraintErrors = map[string]*errs.Error{
	"task_knowledge_task_fkey":  {Code: errs.CodeNotFound, Field: "taskRef.taskId", Message: "no such task in this org"},
	"task_knowledge_entry_fkey": {Code: errs.CodeNotFound, Field: "knowledgeId", Message: "no such entry in this org"},
	"knowledge_author_fkey": {Code: errs.CodeForbidden,
		Message: "the calling agent is not an agent of this org"},
	"task_knowledge_author_fkey": {Code: errs.CodeForbidden,
		Message: "the calling agent is not an agent of this org"},
	"knowledge_supersessions_agent_fkey": {Code: errs.CodeForbidden,
		Message: "the calling agent is not an agent of this org"},
	"knowledge_org_fkey":                   {Code: errs.CodeNotFound, Message: "the caller's org does not exist"},
	"org_quotas_org_fkey":                  {Code: errs.CodeNotFound, Message: "the caller's org does not exist"},
	"knowledge_relation_types_org_id_fkey": {Code: errs.CodeNotFound, Field: "org", Message: "no such org"},
	"knowledge_relations_author_fkey": {Code: errs.CodeForbidden,
		Message: "the calling agent is not an agent of this org"},
}

// constraintInMessage finds the constraint a message names, for an error
// relayed by a Citus coordinator, which leaves the worker's constraint
// field out.
var constraintInMessage = regexp.MustCompile(`constraint "([^"]+)"`)

// constraintError is constraintErrors' entry of the constraint pgErr
// names, also when it is a Citus shard's: relayed without its constraint
// field, and named as the distributed table's constraint with the shard's
// id appended (task_knowledge_task_fkey_102041).
func constraintError(pgErr *pgconn.PgError) (*errs.Error, bool) {
	name := pgErr.ConstraintName
	if m := constraintInMessage.FindStringSubmatch(pgErr.Message); name == "" && m != nil {
		name = m[1]
	}
	if e, ok := constraintErrors[name]; ok {
		return e, true
	}
	i := strings.LastIndexByte(name, '_')
	if i < 0 || strings.Trim(name[i+1:], "0123456789") != "" || i == len(name)-1 {
		return nil, false
	}
	e, ok := constraintErrors[name[:i]]
	return e, ok
}

// MapErr is the one place where driver and dependency errors become
// *errs.Error values. notFoundField names the argument a pgx.ErrNoRows is
// about. A database that cannot be reached, or asks for a retry, is
// unavailable (retryable). Errors it does not know pass through, and the
// service boundary (WrapOp) makes them internal: they are bugs, not input.
func MapErr(err error, notFoundField string) error {
	if err == nil {
		return nil
	}
	var de *errs.Error
	if errors.As(err, &de) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &errs.Error{Code: errs.CodeNotFound, Field: notFoundField, Message: "not found in this org", Err: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if e, ok := constraintError(pgErr); ok {
			c := *e
			c.Err = err
			return &c
		}
		switch pgErr.Code {
		case "23505":
			return &errs.Error{Code: errs.CodeConflict, Message: "already exists: " + pgErr.Detail, Err: err}
		case "23503":
			return &errs.Error{Code: errs.CodeNotFound, Field: notFoundField, Message: "refers to something not in this org", Err: err}
		case "23514", "22001", "22P02", "22021":
			return &errs.Error{Code: errs.CodeInvalidArgument, Message: "refused by the database: " + pgErr.Message, Err: err}
		case "40001", "40P01", "55P03", "57014", "53300":
			return &errs.Error{Code: errs.CodeUnavailable, Message: "the database asked to retry: " + pgErr.Message, Retryable: true, Err: err}
		case "57P01", "57P02", "57P03":
			// The server is shutting down or starting up.
			return dbUnavailable(err)
		}
		if strings.HasPrefix(pgErr.Code, "08") {
			// A connection exception the server reports: on a Citus
			// cluster, the coordinator could not reach the worker that
			// holds the org's shards (08006). That worker is down, not the
			// call wrong: the org's calls are unavailable until it is back,
			// and the other workers' orgs are served meanwhile.
			return dbUnavailable(err)
		}
		return err
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return dbUnavailable(err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the caller's: only the edge that set the deadline can word it
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The database cannot be reached or dropped the connection.
		return dbUnavailable(err)
	}
	return err
}

// dbUnavailable is MapErr's answer for a database it cannot use now. The
// context check sits between its two uses because context.DeadlineExceeded
// is a net.Error too, and the caller's deadline is not the database's fault.
func dbUnavailable(err error) *errs.Error {
	return &errs.Error{Code: errs.CodeUnavailable, Message: "the database is unavailable", Retryable: true, Err: err}
}

// WrapOp is deferred by every exported method of Service: a driver error
// no inner call mapped is mapped here, and the operation is recorded
// (errs.Wrap), so that an error the vocabulary does not know reaches the
// edge as internal, naming the operation that failed.
func WrapOp(errp *error, op string) {
	if *errp != nil {
		*errp = MapErr(*errp, "")
		errs.Wrap(errp, op)
	}
}

// IsRetryableTx reports a transaction failure that a retry of the whole
// transaction can fix (serialisation failure, deadlock).
func IsRetryableTx(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}
