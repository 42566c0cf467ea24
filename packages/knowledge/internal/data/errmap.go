package data

import (
	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
)

// constraintErrors maps the schema's constraint names to domain errors. The
// names are given by 00003_ratelimits.sql (not left to Postgres' defaults),
// and TestConstraintErrorsNameTheSchemasConstraints pins each to the schema.
// db.Wording finds them on a Citus shard too (the shard's id appended, the
// name only in a message the coordinator relayed).
var constraintErrors = db.Constraints{
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

// errWording is how knowledge words the database's refusals; what MapErr's
// caller names is the field at fault.
var errWording = db.Wording{
	Constraints: constraintErrors,
	NoRows: func(field string) *errs.Error {
		return &errs.Error{Code: errs.CodeNotFound, Field: field, Message: "not found in this org"}
	},
	Duplicate: duplicate,
	Missing: func(r db.Refusal) *errs.Error {
		return &errs.Error{Code: errs.CodeNotFound, Field: r.What, Message: "refers to something not in this org"}
	},
	Check:     refusedByTheDatabase,
	Malformed: refusedByTheDatabase,
}

// duplicate words a unique violation no constraint entry maps: Postgres's
// detail names the key, but row-level security empties it when the row
// it collides with is not the caller's to see, so then the rule is named.
func duplicate(r db.Refusal) *errs.Error {
	msg := "already exists"
	switch {
	case r.Detail != "":
		msg += ": " + r.Detail
	case r.Constraint != "":
		msg += " (unique rule " + r.Constraint + ")"
	}
	return &errs.Error{Code: errs.CodeConflict, Message: msg}
}

func refusedByTheDatabase(r db.Refusal) *errs.Error {
	return &errs.Error{Code: errs.CodeInvalidArgument, Message: "refused by the database: " + r.Message}
}

// MapErr is the one place where driver and dependency errors become
// *errs.Error values. notFoundField names the argument a pgx.ErrNoRows is
// about. A database that cannot be reached, or asks for a retry, is
// unavailable (retryable: db.Unavailable). Errors it does not know pass
// through, and the service boundary (WrapOp) makes them internal: they are
// bugs, not input.
func MapErr(err error, notFoundField string) error {
	return errWording.Map(err, notFoundField)
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
func IsRetryableTx(err error) bool { return db.LostRace(err) }
