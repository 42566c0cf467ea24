package server_test

import (
	"strings"
	"testing"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// maxTokens over MCP: a search answer trimmed to its budget says so; a
// budget out of range is refused naming maxTokens.
func TestMaxTokensThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	a := b.agent(org, "a", allScopes, 0)
	cs := b.session(a)
	for i := range 8 {
		b.store(cs, map[string]any{"title": "Worker restart " + strings.Repeat("i", i+1), "body": strings.Repeat("restart the worker after every deploy; ", 20)})
	}
	full := ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "restart worker"}))
	if len(full.Hits) != 8 || full.Truncated {
		t.Fatalf("no budget: %d hits, truncated %v", len(full.Hits), full.Truncated)
	}
	res := call(t, cs, kt.ToolSearch, map[string]any{"query": "restart worker", "maxTokens": 300})
	got := ok[knowledge.SearchResult](t, res)
	if !got.Truncated || got.OmittedHits == 0 || len(got.Hits)+got.OmittedHits != 8 || got.Hits[0].ID != full.Hits[0].ID {
		t.Errorf("budget 300: %d hits, omitted %d, truncated %v", len(got.Hits), got.OmittedHits, got.Truncated)
	}
	if n := len(text(res)) / knowledge.BytesPerToken; n > 300 {
		t.Errorf("budget 300: the answer is about %d tokens", n)
	}
	page := ok[knowledge.ListResult](t, call(t, cs, kt.ToolList, map[string]any{"maxTokens": 200}))
	if !page.Truncated || len(page.Hits) == 0 || page.NextCursor == "" {
		t.Errorf("list budget 200: %d hits, truncated %v, cursor %q", len(page.Hits), page.Truncated, page.NextCursor)
	}
	for _, tool := range []string{kt.ToolSearch, kt.ToolList} {
		e := toolErr(t, call(t, cs, tool, map[string]any{"query": "q", "maxTokens": 10}))
		if tool == kt.ToolList {
			e = toolErr(t, call(t, cs, tool, map[string]any{"maxTokens": 10}))
		}
		if e.Code != "invalid_argument" || e.Field != "maxTokens" {
			t.Errorf("%s maxTokens 10: %+v", tool, e)
		}
	}
}
