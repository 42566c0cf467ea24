package search

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
)

// WarmConn readies a new database connection for search, for
// db.AfterConnect: the first search on a connection used to cost 10-30 ms
// more than the next ones (the text search dictionary loaded into the
// backend, the ranking statements parsed and their generic plans built),
// and a fanned-out search meets two new connections at once. It runs both
// ranking statements (lexical and vector) once, for no org (uuid.Nil owns
// nothing), so their plans are cached in the connection's prepared
// statements and the deployment's dictionary is loaded. A failure (tables
// not migrated yet, a statement cancelled) is logged, never returned: a
// cold connection still works.
func (s *Searcher) WarmConn(ctx context.Context, conn *pgx.Conn) (err error) {
	defer data.WrapOp(&err, "knowledge.WarmConn")
	vec := pgvector.NewVector(make([]float32, s.opts.Embedder.Dimensions()))
	a := &domain.SearchArgs{Query: "warm up", EfSearch: domain.DefaultEfSearch}
	for _, lists := range []int{domain.ListsLexical, domain.ListVector} {
		if _, err := s.candidates(ctx, conn, domain.Caller{OrgID: uuid.Nil}, a, 1, 1, lists, &vec); err != nil {
			s.log().Warn("knowledge: warming a database connection failed; its first search plans itself", "err", err)
			return nil
		}
	}
	return nil
}
