package knowledge

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// ListEntriesAs reads a page of List on conn as List does (listEntries),
// for the tests of its plans (fields_plan_test.go).
func ListEntriesAs(ctx context.Context, conn *pgx.Conn, p sqlc.ListEntriesParams, byIDs bool, ids []uuid.UUID) ([]sqlc.ListEntriesRow, error) {
	return listEntries(ctx, conn, p, byIDs, ids)
}

// RunVectorStatement runs the vector list's statement (sql/search_vector.sql)
// on conn exactly as a search does (after SearchConfig, with its scans
// pinned), 40 candidates deep, the table counted as tableDocs indexed
// entries: for the tests of its plans (vectorplan_test.go). It answers the
// ids in rank order.
func (s *Service) RunVectorStatement(ctx context.Context, conn *pgx.Conn, c domain.Caller, vec pgvector.Vector, efSearch int, tableDocs int64) ([]uuid.UUID, error) {
	a, err := domain.ValidateSearch(c, domain.SearchInput{Query: "vector", EfSearch: new(efSearch)}, time.Now())
	if err != nil {
		return nil, err
	}
	cands, err := s.candidates(ctx, conn, c, a, 40, tableDocs, domain.ListVector, &vec)
	ids := make([]uuid.UUID, len(cands))
	for i, r := range cands {
		ids[i] = r.ID
	}
	return ids, err
}

// OrgIndexDDL is the CREATE INDEX of the org's own HNSW index of the space,
// as Upkeep builds it.
func OrgIndexDDL(v VectorSpace, org uuid.UUID) string { return v.IndexDDL(v.OrgIndexName(org), &org) }

// maintOf is the maintenance of s's tables, with the default tuning.
func maintOf(s *Service) *Maintenance { return NewMaintenance(s, MaintenanceConfig{}) }
