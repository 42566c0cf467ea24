package entries

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// LinkTask links an entry to a task of the caller's org (task runners).
// Linking twice is idempotent: the existing link is returned. An entry or a
// task of another org is not found. The caller's agent is recorded when it
// has one (task runners may call with AgentID = uuid.Nil).
func (s *Entries) LinkTask(ctx context.Context, c domain.Caller, knowledgeID uuid.UUID, ref domain.TaskRef) (_ *domain.TaskLink, err error) {
	defer data.WrapOp(&err, "knowledge.LinkTask")
	if err := domain.CheckCaller(c, false); err != nil {
		return nil, err
	}
	if knowledgeID == uuid.Nil {
		return nil, errs.InvalidArgument("knowledgeId", "is required")
	}
	if err := ref.Check(); err != nil {
		return nil, err
	}
	var agent *uuid.UUID
	if c.AgentID != uuid.Nil {
		agent = &c.AgentID
	}
	l, err := s.q.InsertTaskLink(ctx, sqlc.InsertTaskLinkParams{
		OrgID: c.OrgID, TaskID: ref.TaskID, KnowledgeID: knowledgeID, Kind: string(ref.Kind), AgentID: agent,
	})
	if errors.Is(err, pgx.ErrNoRows) { // already linked
		g, err := s.q.GetTaskLink(ctx, sqlc.GetTaskLinkParams{
			OrgID: c.OrgID, TaskID: ref.TaskID, KnowledgeID: knowledgeID, Kind: string(ref.Kind),
		})
		if err != nil {
			return nil, data.MapErr(err, "")
		}
		return &domain.TaskLink{TaskID: g.TaskID, KnowledgeID: g.KnowledgeID, Kind: domain.LinkKind(g.Kind), CreatedAt: g.CreatedAt}, nil
	}
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	return &domain.TaskLink{TaskID: l.TaskID, KnowledgeID: l.KnowledgeID, Kind: domain.LinkKind(l.Kind), CreatedAt: l.CreatedAt}, nil
}

// TaskKnowledge lists the entries linked to a task; kind "" means all kinds.
// A task of another org is not found (field "taskId"); a task without links
// gives an empty list. Superseded entries are listed too, naming their head,
// so a task runner can follow to the current knowledge.
func (s *Entries) TaskKnowledge(ctx context.Context, c domain.Caller, taskID uuid.UUID, kind domain.LinkKind) (_ []domain.TaskEntry, err error) {
	defer data.WrapOp(&err, "knowledge.TaskKnowledge")
	if err := domain.CheckCaller(c, false); err != nil {
		return nil, err
	}
	if taskID == uuid.Nil {
		return nil, errs.InvalidArgument("taskId", "is required")
	}
	var k *string
	switch kind {
	case "":
	case domain.LinkReferences, domain.LinkProduced:
		ks := string(kind)
		k = &ks
	default:
		return nil, errs.InvalidArgument("kind", "must be one of: references, produced, or empty for all (got %q)", string(kind))
	}
	ok, err := s.q.TaskExists(ctx, sqlc.TaskExistsParams{OrgID: c.OrgID, ID: taskID})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if !ok {
		return nil, &errs.Error{Code: errs.CodeNotFound, Field: "taskId", Message: "no such task in this org"}
	}
	rows, err := s.q.ListTaskKnowledge(ctx, sqlc.ListTaskKnowledgeParams{OrgID: c.OrgID, TaskID: taskID, Kind: k})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	out := make([]domain.TaskEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, domain.TaskEntry{
			Link: domain.TaskLink{TaskID: r.TaskID, KnowledgeID: r.KnowledgeID, Kind: domain.LinkKind(r.Kind), CreatedAt: r.LinkedAt},
			ID:   r.KnowledgeID, Title: r.Title, Tags: domain.NonNil(r.Tags), Confidence: int(r.Confidence),
			EmbeddingStatus: r.EmbeddingStatus, Superseded: r.HeadID != nil, HeadID: r.HeadID, CreatedAt: r.CreatedAt,
		})
	}
	return out, nil
}
