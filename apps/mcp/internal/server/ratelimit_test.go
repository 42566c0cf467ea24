package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

func perMinute(n int) *int { return &n }

// Issue 10, point 9: limits per agent and per org, reads and writes apart,
// answered as a retryable rate_limited tool error with retryAfterMs, and
// counted.
func TestRateLimitsPerAgentAndPerOrg(t *testing.T) {
	t.Parallel()
	// No defaults: only the settings below limit anything. Each test agent
	// makes its first call after the settings it depends on are written,
	// so the settings cache (5 s) never holds an older answer.
	b := setup(t, setupOpts{rate: &ratelimit.Limits{}})
	ctx := context.Background()
	org := b.org("acme")
	set := func(l tenancy.RateLimit) {
		t.Helper()
		if _, err := b.tenancy.SetRateLimit(ctx, org, l); err != nil {
			t.Fatal(err)
		}
	}
	batch := b.agent(org, "batch", allScopes, 0)
	set(tenancy.RateLimit{Scope: tenancy.RateScopeAgent, AgentID: &batch.id, Kind: tenancy.RateWrite, PerMinute: perMinute(1)})

	bs := b.session(batch)
	b.store(bs, map[string]any{"title": "first", "body": "b"})
	e := toolErr(t, call(t, bs, kt.ToolStore, map[string]any{"title": "second", "body": "b"}))
	if e.Code != "rate_limited" || !e.Retryable || e.RetryAfterMs <= 0 || e.RetryAfterMs > 60_000 ||
		!strings.Contains(e.Message, "this agent's limit of 1 writes a minute") {
		t.Fatalf("over the agent's write limit: %+v", e)
	}
	// Reads have their own budget; other agents their own.
	ok[map[string]any](t, call(t, bs, kt.ToolSearch, map[string]any{"query": "first"}))
	other := b.session(b.agent(org, "interactive", allScopes, 0))
	for range 3 {
		b.store(other, map[string]any{"title": "t", "body": "b"})
	}

	// An org-wide limit counts every agent of the org together.
	set(tenancy.RateLimit{Scope: tenancy.RateScopeOrg, Kind: tenancy.RateWrite, PerMinute: perMinute(1)})
	late := b.session(b.agent(org, "late", allScopes, 0))
	b.store(late, map[string]any{"title": "t", "body": "b"})
	e = toolErr(t, call(t, late, kt.ToolStore, map[string]any{"title": "t", "body": "b"}))
	if e.Code != "rate_limited" || !strings.Contains(e.Message, "this org's (all its agents together) limit of 1 writes a minute") {
		t.Fatalf("over the org's write limit: %+v", e)
	}

	// A default for each agent of the org, for reads; resource reads count.
	set(tenancy.RateLimit{Scope: tenancy.RateScopeAgent, Kind: tenancy.RateRead, PerMinute: perMinute(1)})
	reader := b.session(b.agent(org, "reader", allScopes, 0))
	ok[map[string]any](t, call(t, reader, kt.ToolSearch, map[string]any{"query": "x"}))
	if e := toolErr(t, call(t, reader, kt.ToolSearch, map[string]any{"query": "x"})); e.Code != "rate_limited" {
		t.Fatalf("over each agent's read limit: %+v", e)
	}
	// An agent's own setting beats the org's setting for each agent.
	vip := b.agent(org, "vip", allScopes, 0)
	set(tenancy.RateLimit{Scope: tenancy.RateScopeAgent, AgentID: &vip.id, Kind: tenancy.RateRead})
	vs := b.session(vip)
	for range 3 {
		ok[map[string]any](t, call(t, vs, kt.ToolSearch, map[string]any{"query": "x"}))
	}
	if _, err := reader.ReadResource(ctx, &mcp.ReadResourceParams{URI: "knowledge://00000000-0000-4000-8000-000000000000"}); err == nil || !strings.Contains(err.Error(), "rate_limited") {
		t.Fatalf("resource read over the limit: %v", err)
	}

	_, metrics := get(t, b.url+"/metrics")
	for _, want := range []string{
		`mcp_rate_limited_total{kind="write",level="agent"} 1`,
		`mcp_rate_limited_total{kind="write",level="org"} 1`,
		`mcp_rate_limited_total{kind="read",level="agent"} 2`,
		`mcp_tool_calls_total{outcome="rate_limited",tool="store_knowledge"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var n int
	if err := b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d entries (%v), want the 5 allowed stores", n, err)
	}
}

// Issue 10, point 9: without Redis the limiter lets calls through, and
// says so in the metrics.
func TestRateLimiterFailsOpenWithoutRedis(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { dead.Close() })
	one := ratelimit.Limits{AgentWrites: perMinute(1), AgentReads: perMinute(1)}
	b := setup(t, setupOpts{rate: &one, limiterRedis: dead})
	cs := b.session(b.agent(b.org("acme"), "a", allScopes, 0))
	for range 3 {
		b.store(cs, map[string]any{"title": "t", "body": "b"})
	}
	_, metrics := get(t, b.url+"/metrics")
	if !strings.Contains(metrics, `mcp_rate_limit_fail_open_total{reason="redis"} 3`) {
		t.Errorf("metrics do not count the calls let through")
	}
}
