package server_test

import (
	"testing"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// The entry fields over MCP: store_knowledge takes source, kind and
// metadata; search_knowledge and list_knowledge filter on them (a
// read-only token suffices), search takes a mode; get_knowledge takes a
// source instead of an id; a bad field is an invalid_argument naming it.
func TestEntryFieldsThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	cs := b.session(b.agent(org, "writer", allScopes, 0))
	prod := b.store(cs, map[string]any{"title": "Billing failover runbook", "body": "fail the billing database over to the replica",
		"source": "https://wiki.example.com/billing/failover", "kind": "procedural", "metadata": map[string]any{"env": "prod", "tier": 1}})
	stage := b.store(cs, map[string]any{"title": "Billing failover drill", "body": "the billing database failed over in staging",
		"source": "jira:OPS-9", "kind": "episodic", "metadata": map[string]any{"env": "staging"}})
	if prod.Kind != knowledge.KindProcedural || prod.Source == "" || stage.Kind != knowledge.KindEpisodic {
		t.Fatalf("store answers: %+v %+v", prod, stage)
	}
	reader := b.session(b.agent(org, "reader", []string{tenancy.ScopeKnowledgeRead}, 0))
	for _, mode := range []string{"hybrid", "lexical", "semantic"} {
		res := ok[knowledge.SearchResult](t, call(t, reader, kt.ToolSearch, map[string]any{
			"query": "billing failover", "mode": mode, "metadata": map[string]any{"env": "prod"}, "minScore": 0}))
		for _, h := range res.Hits {
			if h.ID != prod.ID {
				t.Fatalf("mode %s: a hit outside the filter: %+v", mode, h)
			}
			if mode == "lexical" && h.VectorRank != 0 {
				t.Fatalf("lexical hit with a vector rank: %+v", h)
			}
		}
		if mode != "semantic" && (len(res.Hits) != 1 || res.Hits[0].Kind != knowledge.KindProcedural || res.Hits[0].Metadata["env"] != "prod") {
			t.Fatalf("mode %s: %+v", mode, res)
		}
	}
	l := ok[knowledge.ListResult](t, call(t, reader, kt.ToolList, map[string]any{"sourcePrefix": "https://wiki.example.com/"}))
	if len(l.Hits) != 1 || l.Hits[0].ID != prod.ID {
		t.Fatalf("list by prefix: %+v", l)
	}
	l = ok[knowledge.ListResult](t, call(t, reader, kt.ToolList, map[string]any{"kind": "episodic"}))
	if len(l.Hits) != 1 || l.Hits[0].ID != stage.ID {
		t.Fatalf("list by kind: %+v", l)
	}
	e := ok[knowledge.Entry](t, call(t, reader, kt.ToolGet, map[string]any{"source": "jira:OPS-9"}))
	if e.ID != stage.ID || e.Origin != knowledge.OriginAgent || e.Source != "jira:OPS-9" {
		t.Fatalf("get by source: %+v", e)
	}
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		code  string
		field string
	}{
		{kt.ToolGet, map[string]any{"source": "jira:OPS-404"}, "not_found", "source"},
		{kt.ToolGet, map[string]any{"source": "jira:OPS-9", "id": prod.ID}, "invalid_argument", "source"},
		{kt.ToolStore, map[string]any{"title": "t", "body": "b", "metadata": map[string]any{"Env": "prod"}}, "invalid_argument", "metadata.Env"},
		{kt.ToolStore, map[string]any{"title": "t", "body": "b", "metadata": map[string]any{"env": []string{"a"}}}, "invalid_argument", "metadata.env"},
		{kt.ToolStore, map[string]any{"title": "t", "body": "b", "kind": "gossip"}, "invalid_argument", "kind"},
		{kt.ToolSearch, map[string]any{"query": "q", "mode": "fuzzy"}, "invalid_argument", "mode"},
		{kt.ToolList, map[string]any{"metadata": map[string]any{"env": nil}}, "invalid_argument", "metadata.env"},
		{kt.ToolSupersede, map[string]any{"oldId": prod.ID, "replacement": map[string]any{"title": "t", "body": "b", "kind": "gossip"}}, "invalid_argument", "replacement.kind"},
	} {
		got := toolErr(t, call(t, cs, tc.tool, tc.args))
		if got.Code != tc.code || got.Field != tc.field {
			t.Errorf("%s %v: %+v, want %s naming %s", tc.tool, tc.args, got, tc.code, tc.field)
		}
	}
}
