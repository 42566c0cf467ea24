package entries

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Correct stores a replacement for oldID and supersedes oldID with it, in
// one transaction (supersede_knowledge with replacement): one quota unit,
// and on any failure (oldID missing, already superseded by another entry,
// quota, a bad task) nothing is stored. The replacement's rules are
// Store's, its errors name "replacement.<argument>". With a client token a
// retry answers the first result (Stored.Replayed, AlreadySuperseded).
func (s *Entries) Correct(ctx context.Context, c domain.Caller, oldID uuid.UUID, replacement domain.StoreInput) (_ *domain.CorrectResult, err error) {
	defer data.WrapOp(&err, "knowledge.Correct")
	if err := domain.CheckCaller(c, true); err != nil {
		return nil, err
	}
	if oldID == uuid.Nil {
		return nil, errs.InvalidArgument("oldId", "is required")
	}
	a, err := domain.ValidateStore(c, replacement, s.opts.Now())
	if err != nil {
		return nil, InReplacement(err)
	}
	if a.IfSimilar != "" || a.WaitSimilar {
		// No duplicate check: the replacement replaces oldId by definition.
		return nil, InReplacement(errs.InvalidArgument("ifSimilar", "is not taken by a replacement (it replaces oldId whatever else looks like it)"))
	}
	if a.ClientToken != nil {
		prev, err := s.replayFromDB(ctx, c, a)
		if err == nil {
			return s.correctReplay(ctx, c, oldID, prev)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, InReplacement(err)
		}
	}
	var (
		res *domain.CorrectResult
		gen int32
	)
	err = s.data.RetryTx(ctx, func(tx pgx.Tx) error {
		// The org's supersession lock first, before the quota row the
		// insert takes: the lock order of every writer of an entry
		// (docs/operators.md, "Lock order"); purge and forget take the
		// quota row last, under this lock. supersedeTx takes it again
		// (advisory locks stack in a transaction).
		if err := sqlc.New(tx).LockOrgSupersessions(ctx, c.OrgID.String()); err != nil {
			return err
		}
		st, g, err := insertEntryTx(ctx, tx, c, a, simkeys.WordsOf(c.OrgID, a.Title, a.Body).Keys, false)
		if err != nil {
			return err
		}
		sup, err := supersedeTx(ctx, sqlc.New(tx), c, oldID, st.ID, nil)
		if err != nil {
			return err
		}
		res, gen = &domain.CorrectResult{SupersedeResult: *sup, Stored: st}, g
		return nil
	})
	if errors.Is(err, ErrTokenTaken) { // a concurrent twin committed first
		prev, err := s.replayFromDB(ctx, c, a)
		if err != nil {
			return nil, InReplacement(err)
		}
		return s.correctReplay(ctx, c, oldID, prev)
	}
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	s.Enqueue(ctx, domain.EmbeddingJob{OrgID: c.OrgID, EntryID: res.Stored.ID, Generation: gen})
	return res, nil
}

// correctReplay answers a retried correction: the entry the client token
// made, and the supersession as it stands (AlreadySuperseded when the
// first call made it, as it did in the same transaction).
func (s *Entries) correctReplay(ctx context.Context, c domain.Caller, oldID uuid.UUID, prev *domain.StoreResult) (*domain.CorrectResult, error) {
	sup, err := s.Supersede(ctx, c, oldID, prev.ID)
	if err != nil {
		return nil, err
	}
	return &domain.CorrectResult{SupersedeResult: *sup, Stored: prev}, nil
}

// InReplacement prefixes the argument an error names with "replacement.",
// the path of the replacement's fields in supersede_knowledge (the client
// token is an argument of the call itself).
func InReplacement(err error) error {
	var e *errs.Error
	if errors.As(err, &e) && e.Field != "" && e.Field != "clientToken" {
		c := *e
		c.Field = "replacement." + e.Field
		return &c
	}
	return err
}
