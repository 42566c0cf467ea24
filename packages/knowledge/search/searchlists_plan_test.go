package search_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// The lexical statement computes the lists asked for (@lists): the one not
// asked for must cost nothing. In each run's actual plan, the other list's
// reads are never executed, or planned away, while its own are run; the
// vector list is not in this statement at all.
func TestRankingStatementRunsOnlyTheListsAsked(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	ag := testfactory.Agent(ctx, t, db.Pool, nil)
	c := domain.Caller{OrgID: ag.OrgID, AgentID: ag.ID}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'vacuum note ' || i, 'dead rows and vacuum, entry ' || i, $2 FROM generate_series(1, 50) i`,
		c.OrgID, c.AgentID); err != nil {
		t.Fatal(err)
	}
	s := search.New(data.New(db.Pool), search.Options{})
	if _, err := maint(knowledge.New(db.Pool, knowledge.Options{})).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := domain.ValidateSearch(c, domain.SearchInput{Query: "why are dead rows not vacuumed"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	vec := pgvector.NewVector(make([]float32, 768))
	plan := func(lists int) string {
		t.Helper()
		p := pgbatch.New(db.Pool)
		if err := sqlc.New(p).SearchConfig(ctx, sqlc.SearchConfigParams{EfSearch: "40"}); err != nil {
			t.Fatal(err)
		}
		rows, err := p.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+search.SearchCandidatesSQL,
			s.CandidateArgs(c, a, 40, 50, lists, &vec))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			out = append(out, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, "\n")
	}
	for _, tc := range []struct {
		lists    int
		run, not []string
	}{
		{domain.ListFullText, []string{"knowledge_postings"}, []string{"knowledge_vector_"}},
		{domain.ListTitle, []string{"knowledge_postings"}, []string{"knowledge_vector_"}},
		{domain.ListsLexical, []string{"knowledge_postings"}, []string{"knowledge_vector_"}},
	} {
		p := plan(tc.lists)
		for _, w := range tc.run {
			if !ran(p, w) {
				t.Errorf("lists=%d: %s did not run:\n%s", tc.lists, w, p)
			}
		}
		for _, w := range tc.not {
			if ran(p, w) {
				t.Errorf("lists=%d: %s ran, though not asked for:\n%s", tc.lists, w, p)
			}
		}
	}
}
