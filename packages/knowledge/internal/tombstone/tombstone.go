// Package tombstone reads the tombstones a forget leaves
// (knowledge_tombstones). Get answers a forgotten id with its tombstone and
// a forget of a forgotten id answers the same, so the read sits here,
// below both the entries that read it and the erasure that writes it.
package tombstone

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// For reads id's tombstone for c: only the entry's author and the agent
// that forgot it see it; to anyone else it does not exist (pgx.ErrNoRows).
func For(ctx context.Context, q *sqlc.Queries, c domain.Caller, id uuid.UUID) (*domain.Tombstone, error) {
	t, err := q.GetTombstone(ctx, sqlc.GetTombstoneParams{OrgID: c.OrgID, ID: id})
	if err != nil {
		return nil, err
	}
	if t.ForgottenByAgentID != c.AgentID && (t.CreatedByAgentID == nil || *t.CreatedByAgentID != c.AgentID) {
		return nil, pgx.ErrNoRows
	}
	ts := Of(t)
	return &ts, nil
}

// Of is the tombstone row as the answers show it.
func Of(t sqlc.KnowledgeTombstone) domain.Tombstone {
	return domain.Tombstone{ID: t.ID, State: domain.StateForgotten, CreatedByAgentID: t.CreatedByAgentID, CreatedAt: t.CreatedAt,
		ForgottenByAgentID: t.ForgottenByAgentID, ForgottenAt: t.ForgottenAt, Reason: t.Reason, Relations: int(t.Relations)}
}
