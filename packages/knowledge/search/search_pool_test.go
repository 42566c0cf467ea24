package search_test

import (
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Ranking considers every entry of the org that holds a query word, not the
// newest matches: an old entry that is the best match by words ranks first
// in both lexical lists however many newer, weaker matches there are (the
// issue-9 regression: a newest-1,000 pool threw the best old matches away).
func TestSearchBestOldEntryBeatsManyNewerMatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	best := b.store(t, b.alice, "widget", "widget widget widget: everything about the widget", "widgets")
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET created_at = now() - interval '1 hour' WHERE id = $1`, best); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, `
		INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'note ' || i || ' on a widget part and other parts of the machine',
		       'a part of a widget, number ' || i || ', with a long description of unrelated matters and more words', $2
		FROM generate_series(1, $3::int) i`, b.org, b.alice.AgentID, knowledge.PerTermPostings+200); err != nil {
		t.Fatal(err)
	}
	b.indexAll(t)
	r := b.search(t, b.bob, knowledge.SearchInput{Query: "widget", Limit: new(5)})
	if len(r.Hits) == 0 || r.Hits[0].ID != best || r.Hits[0].FullTextRank != 1 || r.Hits[0].TitleRank != 1 {
		t.Fatalf("want the best entry first at rank 1 of both lexical lists, got %+v", r.Hits[:min(len(r.Hits), 2)])
	}
}
