package server_test

import (
	"strings"
	"testing"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Relation types are normalised as tags are, wherever a tool reads one:
// link_knowledge "fixes" is FIXES (and answers so), unlink_knowledge and
// list_relations' types take "fixed by", search's relationTypes
// "fixed-by"; a name no normalisation makes valid is refused naming the
// argument and the rule.
func TestRelationTypesAreNormalisedLikeTags(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	a := b.session(b.agent(org, "a", allScopes, 0))
	runbook := b.store(a, map[string]any{"title": "Runbook: restart the queue", "body": "drain, restart, check lag"})
	incident := b.store(a, map[string]any{"title": "Incident 42", "body": "the queue stalled at 03:00"})

	l := ok[knowledge.RelationChange](t, call(t, a, kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": " fixes "}))
	if l.Type != "FIXES" || l.Inverse != "FIXED_BY" || l.Existed {
		t.Fatalf("link fixes: %+v, want a new FIXES / FIXED_BY relation", l)
	}
	if again := ok[knowledge.RelationChange](t, call(t, a, kt.ToolLink, map[string]any{"fromId": incident.ID, "toId": runbook.ID, "type": "Fixed-By"})); !again.Existed || again.ID != l.ID || again.Type != "FIXED_BY" {
		t.Fatalf("link Fixed-By from the other end: %+v, want the same relation, existed", again)
	}
	rels := ok[knowledge.RelationsResult](t, call(t, a, kt.ToolRelations, map[string]any{"id": incident.ID, "types": []string{"fixed by"}}))
	if len(rels.Relations) != 1 || rels.Relations[0].Type != "FIXED_BY" || rels.Relations[0].OtherID != runbook.ID {
		t.Fatalf("list_relations types [fixed by]: %+v", rels.Relations)
	}
	if none := ok[knowledge.RelationsResult](t, call(t, a, kt.ToolRelations, map[string]any{"id": incident.ID, "types": []string{"depends on"}})); len(none.Relations) != 0 {
		t.Fatalf("list_relations types [depends on]: %+v", none.Relations)
	}
	res := ok[knowledge.SearchResult](t, call(t, a, kt.ToolSearch, map[string]any{"query": "stalled", "hops": 1, "relationTypes": []string{"fixed-by"}}))
	if len(res.Hits) != 2 || res.Hits[1].ID != runbook.ID || res.Hits[1].Via == nil || res.Hits[1].Via.Type != "FIXED_BY" {
		t.Fatalf("search hops over fixed-by: %+v", res.Hits)
	}
	u := ok[knowledge.RelationChange](t, call(t, a, kt.ToolUnlink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "fixes"}))
	if u.ValidTo == nil || u.AlreadyClosed || u.Type != "FIXES" {
		t.Fatalf("unlink fixes: %+v", u)
	}

	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "fixes!"}, "type"},
		{kt.ToolUnlink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "_"}, "type"},
		{kt.ToolRelations, map[string]any{"id": incident.ID, "types": []string{"FIXES", "fixé"}}, "types[1]"},
		{kt.ToolSearch, map[string]any{"query": "q", "hops": 1, "relationTypes": []string{"2fix"}}, "relationTypes[0]"},
	} {
		e := toolErr(t, call(t, a, c.tool, c.args))
		if e.Code != "invalid_argument" || e.Field != c.field || !strings.Contains(e.Message, "UPPER_SNAKE_CASE") || !strings.Contains(e.Message, "even after normalisation") {
			t.Errorf("%s %v: %+v, want invalid_argument on %s: not UPPER_SNAKE_CASE even after normalisation", c.tool, c.args, e, c.field)
		}
	}
}
