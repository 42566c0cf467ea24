package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// Every search answer says whether it was reranked, and why not: over MCP,
// with a reranker (a fake of the Cohere API) and without one; rerank:
// false skips it; the rerank shows on /metrics.
func TestSearchAnswersSayReranked(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Documents []string `json:"documents"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		out := []map[string]any{}
		for i := range req.Documents {
			out = append(out, map[string]any{"index": i, "relevance_score": 0.9 - 0.1*float64(i)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": out})
	}))
	t.Cleanup(fake.Close)
	rr, err := rerank.New(rerank.Config{BaseURL: fake.URL, Model: "fake-reranker"})
	if err != nil {
		t.Fatal(err)
	}
	for _, configured := range []bool{true, false} {
		o := setupOpts{}
		if configured {
			o.reranker = rr
		}
		b := setup(t, o)
		org := b.org("acme")
		cs := b.session(b.agent(org, "a", allScopes, 0))
		b.store(cs, map[string]any{"title": "Rotating the signing key", "body": "The signing key rotates every quarter."})
		res := call(t, cs, kt.ToolSearch, map[string]any{"query": "signing key"})
		got := ok[knowledge.SearchResult](t, res)
		if !strings.Contains(text(res), `"reranked":`) {
			t.Errorf("configured %v: the answer does not say reranked: %s", configured, text(res))
		}
		if configured {
			if !got.Reranked || got.RerankReason != "" || len(got.Hits) != 1 || got.Hits[0].RerankRank != 1 || got.Hits[0].Signals.Rerank == nil {
				t.Errorf("reranker configured: %+v", got)
			}
			off := ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "signing key", "rerank": false}))
			if off.Reranked || off.RerankReason != knowledge.RerankNotRequested {
				t.Errorf("rerank false: reranked %v, reason %q", off.Reranked, off.RerankReason)
			}
			if calls.Load() != 1 {
				t.Errorf("the reranker was called %d times, want once", calls.Load())
			}
			_, metrics := get(t, b.url+"/metrics")
			if !strings.Contains(metrics, `knowledge_rerank_seconds_count{outcome="ok"} 1`) {
				t.Errorf("metrics do not count the rerank")
			}
		} else if got.Reranked || got.RerankReason != knowledge.RerankNotConfigured {
			t.Errorf("no reranker: reranked %v, reason %q", got.Reranked, got.RerankReason)
		}
	}
}
