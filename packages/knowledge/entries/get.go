package entries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/tombstone"
)

// Get reads one whole entry of the caller's org (the knowledge://{id}
// resource): the entry, its supersession (direct successor, cached head,
// the entries it directly replaced) and its task links. An id of another org
// is not found, exactly like a missing one.
func (s *Entries) Get(ctx context.Context, c domain.Caller, id uuid.UUID) (_ *domain.Entry, err error) {
	defer data.WrapOp(&err, "knowledge.Get")
	if err := domain.CheckCaller(c, false); err != nil {
		return nil, err
	}
	if id == uuid.Nil {
		return nil, errs.InvalidArgument("id", "is required")
	}
	row, err := s.q.GetEntry(ctx, sqlc.GetEntryParams{OrgID: c.OrgID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) && c.AgentID != uuid.Nil {
		// Its author, or whoever forgot it, reads a forgotten entry as its
		// tombstone; to anyone else it does not exist.
		t, terr := tombstone.For(ctx, s.q, c, id)
		if terr == nil {
			return &domain.Entry{ID: id, State: domain.StateForgotten, Forgotten: t}, nil
		}
		if !errors.Is(terr, pgx.ErrNoRows) {
			err = terr
		}
	}
	if err != nil {
		return nil, data.MapErr(err, "id")
	}
	links, err := s.entryLinks(ctx, c.OrgID, id)
	if err != nil {
		return nil, err
	}
	chain, err := s.q.EntryChain(ctx, sqlc.EntryChainParams{OrgID: c.OrgID, ID: id})
	if err != nil {
		return nil, data.MapErr(err, "id")
	}
	e := &domain.Entry{
		ID: row.ID, State: domain.StateOf(row.SupersededBy, row.ExpiresAt, s.opts.Now()), Title: row.Title, Body: row.Body, Tags: domain.NonNil(row.Tags), Confidence: int(row.Confidence),
		Origin: row.Origin, Source: domain.StrOf(row.Source), Kind: row.Kind, Metadata: domain.DecodeMetadata(row.Metadata),
		CreatedByAgentID: row.CreatedByAgentID, ExpiresAt: row.ExpiresAt,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
		EmbeddingStatus: row.EmbeddingStatus, EmbeddedAt: row.EmbeddedAt,
		SupersededBy: row.SupersededBy, HeadID: row.HeadID, SupersededAt: row.SupersededAt,
		Supersedes: row.Supersedes, TaskLinks: links, Chain: make([]domain.ChainLink, 0, len(chain)),
	}
	for _, l := range chain {
		e.Chain = append(e.Chain, domain.ChainLink{Direction: l.Direction, OldID: l.OldID, NewID: l.NewID, ByAgentID: l.AgentID, At: l.CreatedAt})
	}
	if e.Relations, err = s.opts.Relations.Summary(ctx, c, id); err != nil {
		return nil, err
	}
	if e.Document, e.Section, err = s.opts.Search.DocumentOf(ctx, c.OrgID, id); err != nil {
		return nil, err
	}
	if row.EmbeddingModel != nil {
		e.EmbeddingModel = *row.EmbeddingModel
	}
	if row.EmbeddingError != nil {
		e.EmbeddingError = *row.EmbeddingError
	}
	if e.Similar, err = entrySimilar(row.SimilarState, row.SimilarCheckedAt, row.SimilarFound); err != nil {
		return nil, err
	}
	return e, nil
}

// entrySimilar is an entry's duplicate check finished after its store
// (GetEntry's columns; finish.go), nil when it has none.
func entrySimilar(state *string, at *time.Time, found []byte) (*domain.EntrySimilar, error) {
	if state == nil {
		return nil, nil
	}
	out := &domain.EntrySimilar{Check: *state, CheckedAt: at, Entries: []domain.Similar{}}
	if len(found) > 0 {
		if err := json.Unmarshal(found, &out.Entries); err != nil {
			return nil, fmt.Errorf("similar entries: %w", err)
		}
		for i := range out.Entries {
			out.Entries[i].Score = roundScore(out.Entries[i].Score) // stored as real
		}
	}
	return out, nil
}

func (s *Entries) entryLinks(ctx context.Context, org, id uuid.UUID) ([]domain.TaskLink, error) {
	rows, err := s.q.ListEntryTaskLinks(ctx, sqlc.ListEntryTaskLinksParams{OrgID: org, KnowledgeID: id})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	links := make([]domain.TaskLink, 0, len(rows))
	for _, l := range rows {
		links = append(links, domain.TaskLink{TaskID: l.TaskID, KnowledgeID: l.KnowledgeID, Kind: domain.LinkKind(l.Kind), CreatedAt: l.CreatedAt})
	}
	return links, nil
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// GetBySource reads the live entry (a head, not expired, not forgotten)
// of the caller's org whose source is exactly source: the live document
// of that source if there is one (its sections carry the source too),
// else the newest such entry. not_found when none is, naming source.
func (s *Entries) GetBySource(ctx context.Context, c domain.Caller, source string) (_ *domain.Entry, err error) {
	defer data.WrapOp(&err, "knowledge.GetBySource")
	if err := domain.CheckCaller(c, false); err != nil {
		return nil, err
	}
	if source == "" {
		return nil, errs.InvalidArgument("source", "is required")
	}
	if err := domain.CheckSource("source", source); err != nil {
		return nil, err
	}
	id, err := s.q.EntryBySource(ctx, sqlc.EntryBySourceParams{OrgID: c.OrgID, Source: source})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &errs.Error{Code: errs.CodeNotFound, Field: "source", Message: "no live entry of your organisation has this source"}
	}
	if err != nil {
		return nil, data.MapErr(err, "source")
	}
	return s.Get(ctx, c, id)
}
