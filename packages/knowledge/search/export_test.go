package search

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// SearchCandidatesSQL is the lexical statement, for the tests of its plans
// (searchlists_plan_test.go).
var SearchCandidatesSQL = searchCandidatesSQL

// CandidateRow is a row of either ranking statement.
type CandidateRow = candidateRow

// ListEntriesAs reads a page of List on conn as List does (listEntries),
// for the tests of its plans (fields_plan_test.go).
func ListEntriesAs(ctx context.Context, conn *pgx.Conn, p sqlc.ListEntriesParams, byIDs bool, ids []uuid.UUID) ([]sqlc.ListEntriesRow, error) {
	return listEntries(ctx, conn, p, byIDs, ids)
}

// CandidateArgs are the ranking statements' arguments (candidateArgs).
func (s *Searcher) CandidateArgs(c domain.Caller, a *domain.SearchArgs, depth int, tableDocs int64, lists int, vec *pgvector.Vector) pgx.NamedArgs {
	return s.candidateArgs(c, a, depth, tableDocs, lists, vec)
}

// Candidates runs the ranking statement of lists as a search does
// (candidates), on conn, or on s's pool (the org's worker on a cluster)
// when conn is nil.
func (s *Searcher) Candidates(ctx context.Context, conn pgbatch.Sender, c domain.Caller, a *domain.SearchArgs, depth int, tableDocs int64, lists int, vec *pgvector.Vector) ([]CandidateRow, error) {
	if conn == nil {
		conn = s.pool
	}
	return s.candidates(ctx, conn, c, a, depth, tableDocs, lists, vec)
}

// RunVectorStatement runs the vector list's statement (sql/search_vector.sql)
// on conn exactly as a search does (after SearchConfig, with its scans
// pinned), 40 candidates deep, the table counted as tableDocs indexed
// entries, superseded entries too when superseded: for the tests of its
// plans (vectorplan_test.go). It answers the ids in rank order.
func (s *Searcher) RunVectorStatement(ctx context.Context, conn *pgx.Conn, c domain.Caller, vec pgvector.Vector, efSearch int, tableDocs int64, superseded bool) ([]uuid.UUID, error) {
	return s.RunFilteredVectorStatement(ctx, conn, c, vec, efSearch, tableDocs, superseded, nil, domain.MatchSet{})
}

// RunFilteredVectorStatement is RunVectorStatement with a metadata filter
// and the set searchMatches would give it: the matches it read
// (ByIDs), or a bound on those the statement reads itself (MetadataMax:
// a filter known to be selective; 0: a common one's, tested while the
// lists walk).
func (s *Searcher) RunFilteredVectorStatement(ctx context.Context, conn *pgx.Conn, c domain.Caller, vec pgvector.Vector, efSearch int, tableDocs int64,
	superseded bool, metadata map[string]any, within domain.MatchSet) ([]uuid.UUID, error) {
	a, err := domain.ValidateSearch(c, domain.SearchInput{Query: "vector", EfSearch: new(efSearch), IncludeSuperseded: superseded,
		Filters: domain.Filters{Metadata: metadata}}, time.Now())
	if err != nil {
		return nil, err
	}
	a.Within = within
	cands, err := s.candidates(ctx, conn, c, a, 40, tableDocs, domain.ListVector, &vec)
	ids := make([]uuid.UUID, len(cands))
	for i, r := range cands {
		ids[i] = r.ID
	}
	return ids, err
}

// EmbedQuery is embedQuery: a query's vector from the caches or the
// provider (queryvec.go), for the tests of the provider's calls.
func (s *Searcher) EmbedQuery(ctx context.Context, query string) ([]float32, error) {
	return s.embedQuery(ctx, query)
}
