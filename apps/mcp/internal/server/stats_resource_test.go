package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// TestStatsResource: knowledge://stats answers the caller's org's
// statistics, the same numbers as ctl stats (Operations.Stats), never
// another org's, and needs knowledge:read.
func TestStatsResource(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	org := b.org("acme")
	a := b.agent(org, "scout", allScopes, time.Hour)
	other := b.agent(b.org("other"), "eve", allScopes, time.Hour)
	limit := int64(50)
	if _, err := b.tenancy.SetQuota(ctx, org, tenancy.ResourceKnowledgeStored, &limit); err != nil {
		t.Fatal(err)
	}
	per := 30
	if _, err := b.tenancy.SetRateLimit(ctx, org, tenancy.RateLimit{Scope: tenancy.RateScopeAgent, Kind: tenancy.RateWrite, PerMinute: &per}); err != nil {
		t.Fatal(err)
	}
	cs, os := b.session(a), b.session(other)
	for _, tags := range [][]string{{"ops", "db"}, {"ops"}} {
		b.store(cs, map[string]any{"title": "t", "body": "b", "tags": tags})
	}
	b.store(os, map[string]any{"title": "t", "body": "b", "tags": []string{"other-org-tag"}})

	read := func(cs *mcp.ClientSession) (*knowledge.OrgStats, error) {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: kt.StatsURI})
		if err != nil {
			return nil, err
		}
		var st knowledge.OrgStats
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &st); err != nil {
			t.Fatal(err)
		}
		return &st, nil
	}
	st, err := read(cs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.svc.Operations().Stats(ctx, org, 10)
	if err != nil {
		t.Fatal(err)
	}
	if st.OrgID != org || st.Entries != 2 || st.Heads != 2 || st.Embeddings.Pending != 2 || len(st.TopTags) != 2 || st.TopTags[0].Tag != "ops" ||
		st.TopTags[0].Entries != want.TopTags[0].Entries || st.AgentNames[a.id.String()] != "scout" || len(st.PerAgent) != 1 {
		t.Fatalf("stats %+v\nwant %+v", st, want)
	}
	if len(st.Quotas) != 1 || st.Quotas[0].Used != 2 || *st.Quotas[0].Limit != 50 || len(st.RateLimits) != 1 || *st.RateLimits[0].PerMinute != 30 {
		t.Fatalf("quota %+v, rate limits %+v", st.Quotas, st.RateLimits)
	}
	ost, err := read(os)
	if err != nil || ost.Entries != 1 || ost.TopTags[0].Tag != "other-org-tag" || len(ost.RateLimits) != 0 {
		t.Fatalf("the other org's stats: %+v %v", ost, err)
	}
	// Listed with the resources, and refused without knowledge:read.
	lr, err := cs.ListResources(ctx, nil)
	if err != nil || len(lr.Resources) != 1 || lr.Resources[0].URI != kt.StatsURI {
		t.Fatalf("resources/list: %+v %v", lr, err)
	}
	ws := b.session(b.token(a, []string{tenancy.ScopeKnowledgeWrite}, time.Hour))
	if _, err := read(ws); err == nil || !strings.Contains(err.Error(), "knowledge:read") {
		t.Fatalf("a write-only token read the stats: %v", err)
	}
}
