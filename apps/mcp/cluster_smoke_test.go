package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// The cluster smoke's round trip over MCP (go tool task test:cluster:smoke,
// run by CI): two orgs whose rows live on different Citus workers call one
// MCP server, deployed as in production (knowledge_app on the coordinator,
// the Redis Cluster), beside the embeddings worker. Each org stores an
// entry, finds it by search, never sees the other org's (its id is
// not_found to the other org), forgets it, and finds it no more. A
// statement that stops routing to the org's worker, or a route that loses
// the org on the way, fails here.
func TestClusterMCPRoundTrip(t *testing.T) {
	if !testenv.IsCluster() {
		t.Skip("runs in cluster mode (go tool task test:cluster:smoke)")
	}
	rurl := testenv.RedisClusterURL()
	if rurl == "" {
		t.Fatal("TEST_REDIS_CLUSTER_URL is unset: run it with go tool task test:cluster:smoke")
	}
	d := testenv.Postgres(t)
	toks, ports := tokensOnTwoWorkers(t, d)
	srv := startRun(t, map[string]string{"MCP_ADDR": "127.0.0.1:0", "DATABASE_URL": d.AppURL(), "REDIS_URL": rurl})
	rcfg, err := knowledge.ParseRedisURL(rurl)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rcfg, d.Pool)
	run := uuid.NewString()[:8]

	var cs [2]*faultClient
	var ids [2]string
	for i, tok := range toks {
		cs[i] = &faultClient{t: t, cs: mcpSession(t, srv.base, tok.Text), run: run}
		var r struct {
			ID string `json:"id"`
		}
		cs[i].call(kt.ToolStore, map[string]any{
			"title": fmt.Sprintf("Round trip %s org %d", run, i),
			"body":  fmt.Sprintf("Stored by org %d of run %s on the worker at port %d.", i, run, ports[i]),
		}, &r)
		if r.ID == "" {
			t.Fatalf("org %d: the store answered no id", i)
		}
		ids[i] = r.ID
	}
	for i := range toks {
		other := ids[1-i]
		waitFound(t, cs[i], i, run, ids[i], other)
		if res := rawCall(t, cs[i].cs, kt.ToolGet, map[string]any{"id": other}); !res.IsError || !strings.Contains(resultText(res), "not_found") {
			t.Errorf("org %d: get_knowledge of the other org's entry %s answered %s, want not_found", i, other, resultText(res))
		}
	}
	for i := range toks {
		var r struct {
			ID string `json:"id"`
		}
		cs[i].call(kt.ToolForget, map[string]any{"id": ids[i], "reason": "cluster smoke"}, &r)
		if r.ID != ids[i] {
			t.Errorf("org %d: forget answered the tombstone of %q, want %s", i, r.ID, ids[i])
		}
		if hits := searchHits(cs[i], run); len(hits) != 0 {
			t.Errorf("org %d: search after the forget still finds %v", i, hits)
		}
	}
	t.Logf("org %s (worker %d) and org %s (worker %d): stored, found, isolated, forgotten over MCP",
		toks[0].OrgID, ports[0], toks[1].OrgID, ports[1])
}

// tokensOnTwoWorkers makes orgs with a token each until two have their
// shards on different workers, and gives them with their workers' ports.
func tokensOnTwoWorkers(t *testing.T, d *testenv.Database) ([2]testfactory.TokenRow, [2]int) {
	t.Helper()
	ctx := context.Background()
	var toks [2]testfactory.TokenRow
	var ports [2]int
	for n := 0; n < 40 && ports[1] == 0; n++ {
		tok := testfactory.Token(ctx, t, d.Pool, &testfactory.TokenOpts{Scopes: []string{
			tenancy.ScopeKnowledgeRead, tenancy.ScopeKnowledgeWrite, tenancy.ScopeKnowledgeDelete}})
		var port int
		if err := d.Pool.QueryRow(ctx, `SELECT nodeport FROM pg_dist_shard_placement
			WHERE shardid = get_shard_id_for_distribution_column('knowledge', $1::uuid)`, tok.OrgID).Scan(&port); err != nil {
			t.Fatal(err)
		}
		switch {
		case ports[0] == 0:
			toks[0], ports[0] = tok, port
		case port != ports[0]:
			toks[1], ports[1] = tok, port
		}
	}
	if ports[1] == 0 {
		t.Fatal("no two orgs on two workers in 40 tries")
	}
	return toks, ports
}

// waitFound searches org i's run until its entry is found (the lexical
// index is written by the worker, so within 30 s), and checks the other
// org's entry is never among the hits.
func waitFound(t *testing.T, c *faultClient, i int, run, want, other string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		hits := searchHits(c, run)
		for _, h := range hits {
			if h == other {
				t.Fatalf("org %d: search found the other org's entry %s", i, other)
			}
		}
		for _, h := range hits {
			if h == want {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("org %d: search has not found its entry %s in 30 s (hits %v)", i, want, hits)
		}
	}
}

// searchHits are the ids of the hits of a search for the run.
func searchHits(c *faultClient, run string) []string {
	var r struct {
		Hits []struct {
			ID string `json:"id"`
		} `json:"hits"`
	}
	c.call(kt.ToolSearch, map[string]any{"query": "round trip " + run}, &r)
	out := make([]string, 0, len(r.Hits))
	for _, h := range r.Hits {
		out = append(out, h.ID)
	}
	return out
}

// rawCall calls tool and gives its result as it is, tool errors included.
func rawCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// resultText is a result's structured content, or its text when it has none.
func resultText(res *mcp.CallToolResult) string {
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	var s []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, " ")
}
