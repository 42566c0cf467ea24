package entries

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Supersede marks oldID as superseded by newID (supersede_knowledge).
//
// Rules, in the order they are checked: oldId = newId is refused; both ids
// must exist in the caller's org (else not_found naming the field); the
// caller must have created old or new (else forbidden: cross-author
// supersession needs the future knowledge:write_others scope); an old entry
// already superseded by newId is answered idempotently, by another entry is
// a conflict naming the current head; a live document's own entry is a
// conflict (liveDocument); a cycle is refused. Then old points at
// new (superseded_by) and at head(new) (head_id), every entry whose cached
// head was old moves to head(new) in one UPDATE, and the direct edge is
// recorded in knowledge_supersessions.
//
// The cycle check needs no walk: an entry can only be superseded while it is
// a head (head_id NULL), so every chain ends at exactly one head and the
// cache names it; linking old under new closes a loop iff head(new) = old.
//
// Concurrency. The check and the writes are only right if nothing changes
// the chains involved between them. Correctness rests on row locks: every
// supersession locks old and new FOR UPDATE (in id order) and then head(new);
// anything that could change new's head must update new's row, and anything
// that could make old some entry's head must lock old; the foreign keys on
// superseded_by and head_id add key-share locks on the rows they point to.
// Two supersessions that would together make a cycle or a stale head
// (T1: A by B with head(B) = H; T2: H by C with head(C) = A) therefore
// deadlock instead, Postgres aborts one, and it is retried against the
// committed state (data.RetryTx), where the check sees
// the other's result.
//
// Supersessions are additionally serialised per org with a
// transaction-scoped advisory lock taken first. It is not what keeps the
// data right (supersede_race_internal_test.go shows the scenario tests pass
// without it); it turns those deadlocks, each costing deadlock_timeout (1 s)
// and an attempt, into a short wait. Supersessions are rare next to stores
// and searches (which never take it), each holds it for milliseconds, and
// other orgs never wait. TestSupersedeSerialisedPerOrg pins the lock.
func (s *Entries) Supersede(ctx context.Context, c domain.Caller, oldID, newID uuid.UUID) (_ *domain.SupersedeResult, err error) {
	defer data.WrapOp(&err, "knowledge.Supersede")
	if err := domain.CheckCaller(c, true); err != nil {
		return nil, err
	}
	switch {
	case oldID == uuid.Nil:
		return nil, errs.InvalidArgument("oldId", "is required")
	case newID == uuid.Nil:
		return nil, errs.InvalidArgument("newId", "is required")
	case oldID == newID:
		return nil, errs.InvalidArgument("newId", "must differ from oldId: an entry cannot supersede itself")
	}
	var res *domain.SupersedeResult
	err = s.data.RetryTx(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = supersedeTx(ctx, sqlc.New(tx), c, oldID, newID, testHookAfterChecks)
		return err
	})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	return res, nil
}

// testHookAfterChecks, when set (only by internal tests, before any
// Supersede runs), is called inside the transaction after every check has
// passed and before the head of new is locked and anything is written, so a
// test can hold one supersession there while another runs.
var testHookAfterChecks func(c domain.Caller, oldID, newID uuid.UUID)

func supersedeTx(ctx context.Context, q *sqlc.Queries, c domain.Caller, oldID, newID uuid.UUID, afterChecks func(domain.Caller, uuid.UUID, uuid.UUID)) (*domain.SupersedeResult, error) {
	if err := q.LockOrgSupersessions(ctx, c.OrgID.String()); err != nil {
		return nil, err
	}
	rows, err := q.LockEntries(ctx, sqlc.LockEntriesParams{OrgID: c.OrgID, Ids: []uuid.UUID{oldID, newID}})
	if err != nil {
		return nil, err
	}
	var old, nw *sqlc.LockEntriesRow
	for i := range rows {
		switch rows[i].ID {
		case oldID:
			old = &rows[i]
		case newID:
			nw = &rows[i]
		}
	}
	if old == nil {
		return nil, &errs.Error{Code: errs.CodeNotFound, Field: "oldId", Message: "no such entry in this org"}
	}
	if nw == nil {
		return nil, &errs.Error{Code: errs.CodeNotFound, Field: "newId", Message: "no such entry in this org"}
	}
	if !createdBy(old, c.AgentID) && !createdBy(nw, c.AgentID) {
		return nil, &errs.Error{Code: errs.CodeForbidden,
			Message: "the calling agent created neither oldId nor newId; superseding other agents' entries needs the knowledge:write_others scope, which cannot be issued yet"}
	}
	if old.SupersededBy != nil {
		if *old.SupersededBy == newID {
			return &domain.SupersedeResult{OldID: oldID, NewID: newID, HeadID: *old.HeadID, AlreadySuperseded: true}, nil
		}
		return nil, &errs.Error{Code: errs.CodeConflict, Field: "oldId", Message: fmt.Sprintf(
			"is already superseded by %s; the current head of its chain is %s (supersede that one instead)",
			*old.SupersededBy, *old.HeadID)}
	}
	if err := liveDocument(ctx, q, c.OrgID, oldID); err != nil {
		return nil, err
	}
	head := newID
	if nw.HeadID != nil {
		head = *nw.HeadID
	}
	if head == oldID {
		return nil, &errs.Error{Code: errs.CodeCycle, Field: "newId", Message: fmt.Sprintf(
			"would make a cycle: %s is itself already superseded, through its chain, by oldId %s", newID, oldID)}
	}
	if afterChecks != nil {
		afterChecks(c, oldID, newID)
	}
	if head != newID {
		if _, err := q.LockEntries(ctx, sqlc.LockEntriesParams{OrgID: c.OrgID, Ids: []uuid.UUID{head}}); err != nil {
			return nil, err
		}
	}
	n, err := q.MarkSuperseded(ctx, sqlc.MarkSupersededParams{OrgID: c.OrgID, OldID: oldID, NewID: &newID, HeadID: &head})
	if err != nil {
		return nil, err
	}
	if n != 1 { // impossible under the locks; refuse rather than half-write
		return nil, &errs.Error{Code: errs.CodeConflict, Field: "oldId", Retryable: true, Message: "changed concurrently; retry"}
	}
	// A document's current section leaves its document (sections follow
	// their document: docs/knowledge.md); a no-op for any other entry.
	if err := q.EndSupersededSection(ctx, sqlc.EndSupersededSectionParams{OrgID: c.OrgID, ID: oldID, AgentID: &c.AgentID}); err != nil {
		return nil, err
	}
	moved, err := q.MoveHeads(ctx, sqlc.MoveHeadsParams{OrgID: c.OrgID, OldHead: &oldID, NewHead: &head})
	if err != nil {
		return nil, err
	}
	if err := q.InsertSupersession(ctx, sqlc.InsertSupersessionParams{OrgID: c.OrgID, OldID: oldID, NewID: newID, AgentID: c.AgentID}); err != nil {
		return nil, err
	}
	return &domain.SupersedeResult{OldID: oldID, NewID: newID, HeadID: head, Moved: int(moved) + 1}, nil
}

func createdBy(r *sqlc.LockEntriesRow, agent uuid.UUID) bool {
	return r.CreatedByAgentID != nil && *r.CreatedByAgentID == agent
}

// liveDocument refuses a supersession of a live document's own entry: a
// document is replaced by a store_document of its source, which moves its
// sections along, or erased by a forget. Superseded by an entry of a call,
// it would stay its source's live document while superseded, its sections
// current beside a successor that knows nothing of them (sections follow
// their document: docs/knowledge.md). Its sections themselves may be
// superseded: each leaves its document as a changed one
// (EndSupersededSection). The caller holds the org's supersession lock,
// which every replacement and erasure of a document takes too.
func liveDocument(ctx context.Context, q *sqlc.Queries, org, id uuid.UUID) error {
	source, err := q.LiveDocumentOf(ctx, sqlc.LiveDocumentOfParams{OrgID: org, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	how := "it has no source, so it is never replaced: forget_knowledge erases it, store_document stores a new document"
	if source != nil {
		how = fmt.Sprintf("store_document with its source %q replaces it (its sections with it), forget_knowledge erases it", *source)
	}
	return &errs.Error{Code: errs.CodeConflict, Field: "oldId", Message: "is the entry of a live document, which supersede_knowledge and correct_knowledge do not replace: " + how}
}
