package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// forget_knowledge end to end over Streamable HTTP: the scopes, the
// author rule, the tombstone that only its author and forgetter read (tool
// and resource alike), and an id that no one else can tell from a missing
// one.
func TestForgetOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	rw := []string{tenancy.ScopeKnowledgeRead, tenancy.ScopeKnowledgeWrite}
	alice := b.session(b.agent(org, "alice", append(rw, tenancy.ScopeKnowledgeDelete), 0))
	bob := b.session(b.agent(org, "bob", rw, 0))
	moderator := b.session(b.agent(org, "mod", allScopes, 0))
	stranger := b.session(b.agent(b.org("other"), "eve", allScopes, 0))

	mine := ok[knowledge.StoreResult](t, call(t, alice, kt.ToolStore, map[string]any{"title": "api key", "body": "the key is sk-live-abc123"}))
	bobs := ok[knowledge.StoreResult](t, call(t, bob, kt.ToolStore, map[string]any{"title": "bob's note", "body": "written by bob"}))

	_, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolForget, Arguments: map[string]any{"id": bobs.ID, "reason": "r"}})
	if err == nil || !strings.Contains(err.Error(), "forget_knowledge needs the knowledge:delete scope") {
		t.Errorf("forget without the scope: %v", err)
	}
	e := toolErr(t, call(t, alice, kt.ToolForget, map[string]any{"id": bobs.ID, "reason": "not mine"}))
	if e.Code != "forbidden" || e.Field != "id" || !strings.Contains(e.Message, tenancy.ScopeKnowledgeDeleteOthers) {
		t.Errorf("forget of another's entry: %+v", e)
	}
	for _, args := range []map[string]any{{"id": mine.ID}, {"id": mine.ID, "reason": ""}, {"id": "nope", "reason": "r"}, {"id": mine.ID, "reason": strings.Repeat("x", 501)}} {
		if e := toolErr(t, call(t, alice, kt.ToolForget, args)); e.Code != "invalid_argument" || (e.Field != "reason" && e.Field != "id") {
			t.Errorf("%v: %+v", args, e)
		}
	}
	if e := toolErr(t, call(t, stranger, kt.ToolForget, map[string]any{"id": mine.ID, "reason": "r"})); e.Code != "not_found" {
		t.Errorf("another org's forget: %+v", e)
	}

	res := ok[knowledge.ForgetResult](t, call(t, alice, kt.ToolForget, map[string]any{"id": mine.ID, "reason": "leaked key"}))
	if res.ID != mine.ID || res.State != "forgotten" || res.AlreadyForgotten || res.Reason != "leaked key" {
		t.Fatalf("forget: %+v", res)
	}
	if again := ok[knowledge.ForgetResult](t, call(t, alice, kt.ToolForget, map[string]any{"id": mine.ID, "reason": "again"})); !again.AlreadyForgotten {
		t.Errorf("forget twice: %+v", again)
	}
	if res := ok[knowledge.ForgetResult](t, call(t, moderator, kt.ToolForget, map[string]any{"id": bobs.ID, "reason": "moderation"})); res.ForgottenByAgentID == uuid.Nil {
		t.Errorf("forget with delete_others: %+v", res)
	}

	// The author reads the tombstone, by tool and by resource alike.
	got := ok[map[string]any](t, call(t, alice, kt.ToolGet, map[string]any{"id": mine.ID}))
	if got["state"] != "forgotten" || got["reason"] != "leaked key" || got["body"] != nil {
		t.Errorf("the author's get_knowledge: %v", got)
	}
	rr, err := alice.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://" + mine.ID.String()})
	if err != nil {
		t.Fatal(err)
	}
	// A tenant's answer: never "public" (the protocol's default), which
	// lets any intermediary serve it to anyone.
	if rr.CacheScope != "private" || rr.TTLMs != 0 {
		t.Errorf("resource read cache hints: scope %q, ttl %d", rr.CacheScope, rr.TTLMs)
	}
	if tl, err := alice.ListTools(context.Background(), nil); err != nil || tl.CacheScope != "private" {
		t.Errorf("tools/list (filtered by the token's scopes) cache scope %q (%v)", tl.CacheScope, err)
	}
	var viaResource map[string]any
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &viaResource); err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, got), mustJSON(t, viaResource); a != b {
		t.Errorf("get_knowledge %s, resource %s", a, b)
	}
	// Everyone else: not found, as for an id that never existed.
	for _, cs := range []*mcp.ClientSession{bob, stranger} {
		if e := toolErr(t, call(t, cs, kt.ToolGet, map[string]any{"id": mine.ID})); e.Code != "not_found" {
			t.Errorf("get of a forgotten entry by another agent: %+v", e)
		}
	}
	hits := ok[knowledge.SearchResult](t, call(t, moderator, kt.ToolSearch, map[string]any{"query": "api key sk-live-abc123", "minScore": 0}))
	for _, h := range hits.Hits {
		if h.ID == mine.ID {
			t.Error("search finds a forgotten entry")
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The new tools over stdio (the transport a local agent runs the server
// with): list, forget, get and an asOf search with the Go SDK client.
func TestNewToolsOverStdio(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a := b.agent(b.org("acme"), "local", allScopes, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- b.srv.ServeStdio(ctx, a.token, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	first := ok[knowledge.StoreResult](t, call(t, cs, kt.ToolStore, map[string]any{"title": "first", "body": "kept"}))
	gone := ok[knowledge.StoreResult](t, call(t, cs, kt.ToolStore, map[string]any{"title": "second", "body": "forgotten"}))
	if res := ok[knowledge.ForgetResult](t, call(t, cs, kt.ToolForget, map[string]any{"id": gone.ID, "reason": "wrong"})); res.State != "forgotten" {
		t.Fatalf("forget: %+v", res)
	}
	page := ok[knowledge.ListResult](t, call(t, cs, kt.ToolList, map[string]any{}))
	if len(page.Hits) != 1 || page.Hits[0].ID != first.ID {
		t.Fatalf("list: %+v", page)
	}
	if got := ok[map[string]any](t, call(t, cs, kt.ToolGet, map[string]any{"id": gone.ID})); got["state"] != "forgotten" {
		t.Fatalf("get: %v", got)
	}
	if res := ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "first", "asOf": "2000-01-01T00:00:00Z"})); len(res.Hits) != 0 {
		t.Errorf("asOf before anything was stored: %+v", res.Hits)
	}
	if res := ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "first", "asOf": time.Now().UTC().Format(time.RFC3339Nano)})); len(res.Hits) != 1 {
		t.Errorf("asOf now: %+v", res.Hits)
	}
	for _, asOf := range []string{"2999-01-01T00:00:00Z", "yesterday"} {
		for tool, args := range map[string]map[string]any{kt.ToolSearch: {"query": "first", "asOf": asOf}, kt.ToolList: {"asOf": asOf}} {
			if e := toolErr(t, call(t, cs, tool, args)); e.Code != "invalid_argument" || e.Field != "asOf" {
				t.Errorf("%s asOf %s: %+v", tool, asOf, e)
			}
		}
	}
	// A second copy is answered with the first as similar.
	dup := ok[knowledge.StoreResult](t, call(t, cs, kt.ToolStore, map[string]any{"title": "first", "body": "kept"}))
	if len(dup.Similar) != 1 || dup.Similar[0].ID != first.ID || dup.Similar[0].Score != 1 {
		t.Errorf("store of a copy: similar %+v", dup.Similar)
	}
	cancel()
	<-served
}
