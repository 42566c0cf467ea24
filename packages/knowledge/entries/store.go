package entries

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// ErrTokenTaken: the insert met an entry with the same client token.
var ErrTokenTaken = errors.New("client token already used")

// Store stores a new entry for the caller (store_knowledge).
//
// Everything is validated before any I/O. Then one transaction takes a unit
// of the org's quota, inserts the entry (source 'agent', author = the
// caller) and the task edge if asked; any failure rolls all of it back, so a
// failed store consumes nothing. After commit the entry is handed to the
// Enqueuer. With a ClientToken the call is idempotent (see idempotence.go).
func (s *Entries) Store(ctx context.Context, c domain.Caller, in domain.StoreInput) (_ *domain.StoreResult, err error) {
	defer data.WrapOp(&err, "knowledge.Store")
	a, err := domain.ValidateStore(c, in, s.opts.Now())
	if err != nil {
		return nil, err
	}
	if a.ClientToken != nil && s.opts.Redis != nil {
		return s.storeIdempotent(ctx, c, a)
	}
	return s.store(ctx, c, a)
}

// store does the database part of Store. With a client token it first looks
// for the entry that token made (Redis may have lost or never had the key),
// and the insert's ON CONFLICT catches a concurrent twin.
func (s *Entries) store(ctx context.Context, c domain.Caller, a *domain.StoreArgs) (*domain.StoreResult, error) {
	if a.ClientToken != nil {
		res, err := s.replayFromDB(ctx, c, a)
		if err == nil || !errors.Is(err, pgx.ErrNoRows) {
			return res, err
		}
	}
	var (
		res *domain.StoreResult
		gen int32
	)
	// The duplicate check runs meanwhile on another connection: it reads
	// only committed entries, so it never sees the one being stored, and
	// the store waits for it only as long as the insert takes or the
	// check's budgets, whichever is longer. By default the check by
	// meaning uses only a vector already at hand: without one, it is owed
	// to the worker, recorded in the insert's transaction, and the store
	// never waits for the provider. With ifSimilar: report or skip the
	// store waits for the whole check first (the provider within the
	// embed budget); with skip, a close enough entry is the answer, and
	// nothing is stored (no quota unit, no insert).
	words := simkeys.WordsOf(c.OrgID, a.Title, a.Body)
	similar, owed := s.similarAsync(ctx, c.OrgID, a.Title, a.Body, words, a.WaitSimilar)
	if a.WaitSimilar {
		out := similar(uuid.Nil)
		if best, ok := out.best(); ok && a.IfSimilar == domain.IfSimilarSkip && best.Score >= SkipThreshold {
			res, err := s.skipped(ctx, c, best.ID, out)
			if err == nil || !errors.Is(err, pgx.ErrNoRows) {
				return res, err
			}
			// Forgotten since the check: store after all.
		}
		similar, owed = func(uuid.UUID) similarOutcome { return out }, out.owed
	}
	// On a cluster, on the org's worker: the transaction takes row locks
	// only (the quota's row), which are the shard's wherever it runs.
	err := pgx.BeginFunc(data.OnOrgWorker(ctx), s.pool, func(tx pgx.Tx) error {
		var err error
		res, gen, err = insertEntryTx(ctx, tx, c, a, words.Keys, owed)
		return err
	})
	if errors.Is(err, ErrTokenTaken) {
		return s.replayFromDB(ctx, c, a)
	}
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	out := similar(res.ID)
	res.Similar = slices.DeleteFunc(out.list, func(x domain.Similar) bool { return x.ID == res.ID })
	res.SimilarCheck = out.check
	res.SimilarPending = owed
	if out.owed && !owed {
		// The vector at hand was there, its statement failed: owed after all.
		res.SimilarPending = s.oweSimilar(ctx, c.OrgID, res.ID, res.CreatedAt)
	}
	if s.reuseVector(ctx, c.OrgID, res.ID, gen, out) {
		res.EmbeddingStatus = "ready"
		return res, nil // nothing left for the worker (but a check owed: its sweep)
	}
	s.Enqueue(ctx, domain.EmbeddingJob{OrgID: c.OrgID, EntryID: res.ID, Generation: gen})
	return res, nil
}

// oweSimilar records, after the store's commit, that the check by meaning
// of entry id is owed to the worker, and says whether it could (a failure
// is logged: the answer then says nothing is pending).
func (s *Entries) oweSimilar(ctx context.Context, org, id uuid.UUID, at time.Time) bool {
	err := s.q.InsertSimilarCheck(ctx, sqlc.InsertSimilarCheckParams{OrgID: org, EntryID: id, RequestedAt: at})
	if err != nil {
		s.log().Warn("knowledge: recording the duplicate check owed to the worker failed", "org", org, "entry", id, "err", err)
		return false
	}
	return true
}

// skipped is the answer of a store with ifSimilar: skip that found entry
// id of the org close enough: that entry, skipped, with the check's
// listings. pgx.ErrNoRows: the entry is gone (forgotten meanwhile).
func (s *Entries) skipped(ctx context.Context, c domain.Caller, id uuid.UUID, out similarOutcome) (*domain.StoreResult, error) {
	e, err := s.q.GetEntry(ctx, sqlc.GetEntryParams{OrgID: c.OrgID, ID: id})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
		return nil, data.MapErr(err, "")
	}
	return &domain.StoreResult{
		ID: e.ID, Title: e.Title, Tags: domain.NonNil(e.Tags), Confidence: int(e.Confidence), ExpiresAt: e.ExpiresAt,
		EmbeddingStatus: e.EmbeddingStatus, CreatedAt: e.CreatedAt,
		Similar: out.list, SimilarCheck: out.check, Skipped: true,
		Source: domain.StrOf(e.Source), Kind: e.Kind, Metadata: domain.DecodeMetadata(e.Metadata),
	}, nil
}

// reuseVector writes the vector the duplicate check made for a new entry
// as the entry's own, when it is exactly what the embeddings worker would
// write: the Search's own model (the worker's), the entry one chunk, and
// the entry still pending at the generation it was stored with (the same
// conditional write as the worker's, queries/embeddings.sql). Only for an
// embedder behind a provider: an in-process one embeds in microseconds in
// the worker, less than this write costs the store. It says whether the
// entry is ready now; if not, the store enqueues it as before.
func (s *Entries) reuseVector(ctx context.Context, org, id uuid.UUID, gen int32, out similarOutcome) bool {
	if out.vec == nil || !out.whole {
		return false
	}
	if _, ok := s.opts.Search.Embedder().(embed.InProcess); ok {
		return false
	}
	model := s.opts.Search.Embedder().Model()
	v := pgvector.NewVector(out.vec)
	_, err := s.q.MarkEmbeddingReady(ctx, sqlc.MarkEmbeddingReadyParams{
		Embedding: &v, Model: &model, OrgID: org, ID: id, Generation: gen,
	})
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			s.log().Warn("knowledge: writing the duplicate check's vector failed; the worker embeds the entry", "org", org, "entry", id, "err", err)
		}
		return false
	}
	return true
}

// insertEntryTx is the store inside a transaction: a unit of the org's
// quota, the entry (with its duplicate-check keys, wordsOf), its task edge,
// and, when owed, the check by meaning the worker owes it (finish.go).
// ErrTokenTaken: the client token already made an entry (the caller rolls
// back and replays).
func insertEntryTx(ctx context.Context, tx pgx.Tx, c domain.Caller, a *domain.StoreArgs, keys []int64, owed bool) (*domain.StoreResult, int32, error) {
	if err := tenancy.ConsumeQuota(ctx, tx, c.OrgID, tenancy.ResourceKnowledgeStored); err != nil {
		return nil, 0, err
	}
	q := sqlc.New(tx)
	agent := c.AgentID
	row, err := q.InsertEntry(ctx, sqlc.InsertEntryParams{
		OrgID: c.OrgID, Title: a.Title, Body: a.Body, Tags: a.Tags,
		Confidence: int16(a.Confidence), AgentID: &agent, ExpiresAt: a.ExpiresAt,
		ClientToken: a.ClientToken, SimilarKeys: keys,
		Source: domain.StrOrNil(a.Source), Kind: a.EntryKind(), Metadata: a.MetadataJSON(),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, ErrTokenTaken // rolled back: the quota unit goes back too
	}
	if err != nil {
		return nil, 0, err
	}
	res := &domain.StoreResult{
		ID: row.ID, Title: a.Title, Tags: a.Tags, Confidence: a.Confidence,
		ExpiresAt: a.ExpiresAt, EmbeddingStatus: row.EmbeddingStatus, CreatedAt: row.CreatedAt,
		Similar: []domain.Similar{}, SimilarCheck: SimilarCheckNone, // Store runs the check
		Source: a.Source, Kind: a.EntryKind(), Metadata: domain.DecodeMetadata(a.Metadata),
	}
	if a.TaskRef != nil {
		l, err := q.InsertTaskLink(ctx, sqlc.InsertTaskLinkParams{
			OrgID: c.OrgID, TaskID: a.TaskRef.TaskID, KnowledgeID: row.ID,
			Kind: a.TaskRef.Kind, AgentID: &agent,
		})
		if err != nil {
			return nil, 0, err
		}
		res.TaskLink = &domain.TaskLink{TaskID: l.TaskID, KnowledgeID: l.KnowledgeID, Kind: domain.LinkKind(l.Kind), CreatedAt: l.CreatedAt}
	}
	if owed {
		if err := q.InsertSimilarCheck(ctx, sqlc.InsertSimilarCheckParams{OrgID: c.OrgID, EntryID: row.ID, RequestedAt: row.CreatedAt}); err != nil {
			return nil, 0, err
		}
	}
	return res, row.EmbeddingGeneration, nil
}

// replayFromDB answers a repeated client token from Postgres: the entry the
// token made, if its arguments are the same. pgx.ErrNoRows: no such entry.
func (s *Entries) replayFromDB(ctx context.Context, c domain.Caller, a *domain.StoreArgs) (*domain.StoreResult, error) {
	agent := c.AgentID
	row, err := s.q.GetEntryByClientToken(ctx, sqlc.GetEntryByClientTokenParams{
		OrgID: c.OrgID, AgentID: &agent, ClientToken: a.ClientToken,
	})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, s.forgottenToken(ctx, c, a)
		}
		return nil, data.MapErr(err, "")
	}
	same := row.Title == a.Title && row.Body == a.Body && slices.Equal(row.Tags, a.Tags) &&
		int(row.Confidence) == a.Confidence && sameTime(row.ExpiresAt, a.ExpiresAt) &&
		domain.StrOf(row.Source) == a.Source && row.Kind == a.EntryKind() && domain.SameMetadata(row.Metadata, a.Metadata)
	res := &domain.StoreResult{
		ID: row.ID, Title: row.Title, Tags: row.Tags, Confidence: int(row.Confidence),
		ExpiresAt: row.ExpiresAt, EmbeddingStatus: row.EmbeddingStatus, CreatedAt: row.CreatedAt, Replayed: true,
		Similar: []domain.Similar{}, SimilarCheck: SimilarCheckNone, // not recomputed for a replay answered from the database
		Source: domain.StrOf(row.Source), Kind: row.Kind, Metadata: domain.DecodeMetadata(row.Metadata),
	}
	if same && a.TaskRef != nil {
		l, err := s.q.GetTaskLink(ctx, sqlc.GetTaskLinkParams{
			OrgID: c.OrgID, TaskID: a.TaskRef.TaskID, KnowledgeID: row.ID, Kind: a.TaskRef.Kind,
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			same = false
		case err != nil:
			return nil, data.MapErr(err, "")
		default:
			res.TaskLink = &domain.TaskLink{TaskID: l.TaskID, KnowledgeID: l.KnowledgeID, Kind: domain.LinkKind(l.Kind), CreatedAt: l.CreatedAt}
		}
	}
	if !same {
		return nil, tokenReused(row.ID)
	}
	return res, nil
}

// forgottenToken is replayFromDB's answer when the token made no entry
// that exists: pgx.ErrNoRows (store it), unless the entry it made was
// forgotten. A retry of that store must not bring the forgotten text back
// under a new id: it is refused, naming neither the id nor the title.
// (A purge leaves no tombstone: a retry after a purge stores anew.)
func (s *Entries) forgottenToken(ctx context.Context, c domain.Caller, a *domain.StoreArgs) error {
	agent := c.AgentID
	_, err := s.q.TombstoneByClientToken(ctx, sqlc.TombstoneByClientTokenParams{
		OrgID: c.OrgID, AgentID: &agent, ClientToken: a.ClientToken,
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return err
	case err != nil:
		return data.MapErr(err, "")
	}
	return &errs.Error{Code: errs.CodeInvalidArgument, Field: "clientToken",
		Message: "made an entry that has since been forgotten; it is not stored again under this clientToken (use a new clientToken to store it anew)"}
}

func tokenReused(id uuid.UUID) *errs.Error {
	msg := "was already used with different arguments; use a new clientToken for a new entry"
	if id != uuid.Nil {
		msg = "was already used with different arguments (it made entry " + id.String() + "); use a new clientToken for a new entry"
	}
	return &errs.Error{Code: errs.CodeInvalidArgument, Field: "clientToken", Message: msg}
}
