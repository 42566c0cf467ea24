package erasure

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/tombstone"
)

// Forget erases one entry of the caller's org at once and leaves a
// tombstone. The row goes the way Purge erases it (title, body, tags and
// vector, its task links, its postings and its share of the org's index
// statistics, its store idempotence key), so a leaked secret is gone from
// the database, not hidden; chains are repaired as Purge repairs them (an
// entry that pointed at it points past it, or is a head again when it was
// the head); the org's knowledge_stored quota gets the entry's unit back
// (the quota counts what is stored, and a forgotten entry stores nothing).
//
// The entry's author may forget it; anyone else needs othersAllowed (the
// edge passes whether the token holds knowledge:delete_others). Forgetting
// a forgotten entry again answers the tombstone with AlreadyForgotten, to
// its author and to whoever forgot it; to anyone else a forgotten id is
// not found, like an id that never existed or belongs to another org.
func (e *Erasure) Forget(ctx context.Context, c domain.Caller, id uuid.UUID, reason string, othersAllowed bool) (_ *domain.ForgetResult, err error) {
	defer data.WrapOp(&err, "knowledge.Forget")
	if reason, err = checkForget(c, id, reason); err != nil {
		return nil, err
	}
	var res *domain.ForgetResult
	var gone []uuid.UUID
	err = e.data.RetryTx(ctx, func(tx pgx.Tx) error {
		var err error
		res, gone, err = e.forgetIn(ctx, tx, c, id, reason, othersAllowed)
		return err
	})
	if err != nil {
		return nil, data.MapErr(err, "id")
	}
	if !res.AlreadyForgotten {
		e.forgetStoreAnswers(ctx, c.OrgID, id, gone)
	}
	return res, nil
}

// checkForget checks Forget's arguments and returns the reason trimmed.
func checkForget(c domain.Caller, id uuid.UUID, reason string) (string, error) {
	if err := domain.CheckCaller(c, true); err != nil {
		return "", err
	}
	if id == uuid.Nil {
		return "", errs.InvalidArgument("id", "is required")
	}
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return "", errs.InvalidArgument("reason", "is required (say why the entry is forgotten; it is kept in the tombstone)")
	case !utf8.ValidString(reason):
		return "", errs.InvalidArgument("reason", "must be valid UTF-8")
	case utf8.RuneCountInString(reason) > domain.MaxForgetReason:
		return "", errs.InvalidArgument("reason", "must be at most %d characters", domain.MaxForgetReason)
	}
	return reason, nil
}

// forgetIn is Forget's transaction: it locks the entry (a document with
// its sections), answers its tombstone if it was forgotten already,
// checks that c may forget it, erases it as Purge does and leaves a
// tombstone for each erased entry. It returns the answer and the ids
// erased.
func (e *Erasure) forgetIn(ctx context.Context, tx pgx.Tx, c domain.Caller, id uuid.UUID, reason string, othersAllowed bool) (*domain.ForgetResult, []uuid.UUID, error) {
	q := sqlc.New(tx)
	// A document goes with its sections. Under the org's supersession
	// lock (lockForErase takes it again) no replacement adds any between
	// this read and the erasure.
	if err := q.LockOrgSupersessions(ctx, c.OrgID.String()); err != nil {
		return nil, nil, err
	}
	ids, err := q.DocumentSectionIDs(ctx, sqlc.DocumentSectionIDsParams{OrgID: c.OrgID, Ids: []uuid.UUID{id}})
	if err != nil {
		return nil, nil, err
	}
	rows, err := e.lockForErase(ctx, q, c.OrgID, append(ids, id), true)
	if err != nil {
		return nil, nil, err
	}
	if len(rows) == 0 {
		t, err := tombstone.For(ctx, q, c, id)
		if err != nil {
			return nil, nil, err
		}
		return &domain.ForgetResult{Tombstone: *t, AlreadyForgotten: true}, nil, nil
	}
	i := slices.IndexFunc(rows, func(r sqlc.PurgeLockEntriesRow) bool { return r.ID == id })
	if i < 0 {
		return nil, nil, pgx.ErrNoRows // the document is gone, its sections are not: cannot be under the lock
	}
	if a := rows[i].CreatedByAgentID; (a == nil || *a != c.AgentID) && !othersAllowed {
		return nil, nil, &errs.Error{Code: errs.CodeForbidden, Field: "id",
			Message: "the calling agent did not write this entry; forgetting other agents' entries needs the knowledge:delete_others scope"}
	}
	// A document's client tokens outlive it, marked forgotten: a retry of
	// its store is refused, not stored again (documents/documentwrite.go).
	if _, err := q.ForgetDocumentTokens(ctx, sqlc.ForgetDocumentTokensParams{OrgID: c.OrgID, Ids: []uuid.UUID{id}}); err != nil {
		return nil, nil, err
	}
	var rep domain.PurgeReport
	if err := e.eraseLocked(ctx, tx, c.OrgID, rows, true, &rep); err != nil {
		return nil, nil, err
	}
	t, err := writeTombstones(ctx, q, c, id, rows, reason, rep.OpenRelations)
	if err != nil {
		return nil, nil, err
	}
	return &domain.ForgetResult{Tombstone: t, Relinked: rep.Relinked, HeadsAgain: rep.HeadsAgain, TaskLinks: rep.TaskLinks,
		Sections: int64(len(rows) - 1)}, rep.IDs, nil
}

// writeTombstones leaves a tombstone for each erased entry (each section
// of a forgotten document reads as forgotten too) and returns id's.
func writeTombstones(ctx context.Context, q *sqlc.Queries, c domain.Caller, id uuid.UUID, rows []sqlc.PurgeLockEntriesRow, reason string, relations int64) (domain.Tombstone, error) {
	var t sqlc.KnowledgeTombstone
	for _, r := range rows {
		ts, err := q.InsertTombstone(ctx, sqlc.InsertTombstoneParams{
			OrgID: c.OrgID, ID: r.ID, CreatedByAgentID: r.CreatedByAgentID, CreatedAt: r.CreatedAt,
			ForgottenByAgentID: c.AgentID, Reason: reason, ClientToken: r.ClientToken, Relations: int32(relations),
		})
		if err != nil {
			return domain.Tombstone{}, err
		}
		if r.ID == id {
			t = ts
		}
	}
	return tombstone.Of(t), nil
}

// forgetStoreAnswers deletes every store answer recorded in Redis (kept
// 60 s) that names an erased entry (id and gone), as the entry it made or
// in its similar list (its title): the key of the store that made it and
// those of stores that listed it. The rows are gone whatever happens here,
// and a replay never answers an erased entry (replayable); a failure only
// leaves a record that expires within the minute.
func (e *Erasure) forgetStoreAnswers(ctx context.Context, org, id uuid.UUID, gone []uuid.UUID) {
	names := map[uuid.UUID]bool{id: true}
	for _, g := range gone {
		names[g] = true
	}
	if _, err := idem.ForgetNaming(ctx, e.redis, org, names); err != nil {
		e.log.Warn("knowledge: forget: deleting idempotence records naming the entry failed; they expire within 60 s", "org", org, "err", err)
	}
}
