package knowledge_test

import (
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// The lexical lists rank only the LexicalPool newest matches (queries/search.sql,
// docs/knowledge.md "Search"): an old entry that would rank first by words
// drops out of both lexical lists once LexicalPool newer entries match, and
// is back at rank 1 as soon as it is among the newest.
func TestSearchLexicalPoolIsTheNewestMatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	best := b.store(t, b.alice, "widget", "widget widget widget: everything about the widget", "widgets")
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET created_at = now() - interval '1 hour' WHERE id = $1`, best); err != nil {
		t.Fatal(err)
	}
	// LexicalPool newer entries that match both lists, each worse than best.
	if _, err := b.pool.Exec(b.ctx, `
		INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'note ' || i || ' on a widget part', 'a part of a widget, number ' || i, $2
		FROM generate_series(1, $3::int) i`, b.org, b.alice.AgentID, knowledge.LexicalPool); err != nil {
		t.Fatal(err)
	}
	in := knowledge.SearchInput{Query: "widget", Limit: 50}
	r := b.search(t, b.bob, in)
	if len(r.Hits) == 0 {
		t.Fatal("no hits")
	}
	if h := has(r.Hits, best); h != nil {
		t.Fatalf("the old entry is outside both pools and has no vector, yet it is a hit: %+v", h)
	}
	for _, h := range r.Hits {
		if h.FullTextRank == 0 && h.TitleRank == 0 {
			t.Fatalf("a hit with no lexical rank and no vector: %+v", h)
		}
	}

	// Now the newest: inside both pools, first in both lists.
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET created_at = now() + interval '1 minute' WHERE id = $1`, best); err != nil {
		t.Fatal(err)
	}
	r = b.search(t, b.bob, in)
	if len(r.Hits) == 0 || r.Hits[0].ID != best || r.Hits[0].FullTextRank != 1 || r.Hits[0].TitleRank != 1 {
		t.Fatalf("want the best entry first at rank 1 of both lexical lists, got %+v", r.Hits[:min(len(r.Hits), 2)])
	}
}
