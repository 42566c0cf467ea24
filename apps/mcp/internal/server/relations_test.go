package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

func TestRelationsThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org, other := b.org("acme"), b.org("other")
	a := b.session(b.agent(org, "a", allScopes, 0))
	reader := b.session(b.agent(org, "reader", []string{tenancy.ScopeKnowledgeRead}, 0))
	stranger := b.session(b.agent(other, "s", allScopes, 0))
	runbook := b.store(a, map[string]any{"title": "Runbook: restart the queue", "body": "drain, restart, check lag"})
	incident := b.store(a, map[string]any{"title": "Incident 42", "body": "the queue stalled at 03:00"})
	theirs := b.store(stranger, map[string]any{"title": "Their entry", "body": "x"})

	l := ok[knowledge.RelationChange](t, call(t, a, kt.ToolLink, map[string]any{
		"fromId": runbook.ID, "toId": incident.ID, "type": "FIXES", "note": "verified on staging"}))
	if l.Inverse != "FIXED_BY" || l.Existed || l.Note != "verified on staging" {
		t.Fatalf("link: %+v", l)
	}
	if again := ok[knowledge.RelationChange](t, call(t, a, kt.ToolLink, map[string]any{
		"fromId": incident.ID, "toId": runbook.ID, "type": "FIXED_BY"})); !again.Existed || again.ID != l.ID {
		t.Fatalf("link from the other end: %+v", again)
	}
	rels := ok[knowledge.RelationsResult](t, call(t, reader, kt.ToolRelations, map[string]any{"id": incident.ID}))
	if len(rels.Relations) != 1 || rels.Relations[0].Type != "FIXED_BY" || rels.Relations[0].Direction != "in" ||
		rels.Relations[0].OtherID != runbook.ID || rels.Relations[0].OtherTitle != "Runbook: restart the queue" {
		t.Fatalf("list_relations: %+v", rels)
	}
	// The entry's answer carries the summary.
	e := ok[knowledge.Entry](t, call(t, reader, kt.ToolGet, map[string]any{"id": runbook.ID}))
	if e.Relations == nil || e.Relations.Open != 1 || e.Relations.ByType[0].Type != "FIXES" || len(e.Relations.First) != 1 {
		t.Fatalf("get_knowledge relations: %+v", e.Relations)
	}

	// Refusals name the argument and the rule.
	expect := func(name string, res *mcp.CallToolResult, code, field, contains string) {
		t.Helper()
		er := toolErr(t, res)
		if er.Code != code || er.Field != field || !strings.Contains(er.Message, contains) {
			t.Errorf("%s: got %+v, want %s on %s containing %q", name, er, code, field, contains)
		}
	}
	expect("unknown type", call(t, a, kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "BLOCKS"}),
		"invalid_argument", "type", "DEPENDS_ON")
	expect("not a name once normalised", call(t, a, kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "fixes!"}),
		"invalid_argument", "type", "UPPER_SNAKE_CASE")
	expect("read only", call(t, a, kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "SUPERSEDES"}),
		"invalid_argument", "type", "supersede_knowledge")
	expect("self", call(t, a, kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": runbook.ID, "type": "RELATES_TO"}),
		"invalid_argument", "toId", "differ")
	expect("bad uuid", call(t, a, kt.ToolLink, map[string]any{"fromId": "x", "toId": runbook.ID, "type": "RELATES_TO"}),
		"invalid_argument", "fromId", "UUID")
	expect("direction", call(t, a, kt.ToolRelations, map[string]any{"id": runbook.ID, "direction": "up"}),
		"invalid_argument", "direction", "out, in, both")
	expect("limit", call(t, a, kt.ToolRelations, map[string]any{"id": runbook.ID, "limit": 101}),
		"invalid_argument", "limit", "1 to 100")

	// Another org's id is exactly a missing id, for every tool.
	missing := uuid.New()
	same := func(name string, theirs, none *mcp.CallToolResult) {
		t.Helper()
		et, en := toolErr(t, theirs), toolErr(t, none)
		if et != en || et.Code != "not_found" {
			t.Errorf("%s: another org's id %+v, a missing id %+v", name, et, en)
		}
	}
	same("link", call(t, a, kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": theirs.ID, "type": "RELATES_TO"}),
		call(t, a, kt.ToolLink, map[string]any{"fromId": runbook.ID, "toId": missing, "type": "RELATES_TO"}))
	same("unlink", call(t, a, kt.ToolUnlink, map[string]any{"fromId": theirs.ID, "toId": runbook.ID, "type": "RELATES_TO"}),
		call(t, a, kt.ToolUnlink, map[string]any{"fromId": missing, "toId": runbook.ID, "type": "RELATES_TO"}))
	same("list", call(t, a, kt.ToolRelations, map[string]any{"id": theirs.ID}),
		call(t, a, kt.ToolRelations, map[string]any{"id": missing}))
	same("list, theirs", call(t, stranger, kt.ToolRelations, map[string]any{"id": runbook.ID}),
		call(t, stranger, kt.ToolRelations, map[string]any{"id": missing}))

	// Search with hops, over HTTP: the runbook shares no word with the query.
	res := ok[knowledge.SearchResult](t, call(t, reader, kt.ToolSearch, map[string]any{"query": "stalled", "hops": 2, "relationTypes": []string{"FIXED_BY"}}))
	if len(res.Hits) != 2 || res.Hits[1].ID != runbook.ID || res.Hits[1].Via == nil || res.Hits[1].Via.Type != "FIXED_BY" || res.Hits[1].Via.Hops != 1 {
		t.Fatalf("search with hops: %+v", res.Hits)
	}
	// Unlink closes and keeps the history.
	u := ok[knowledge.RelationChange](t, call(t, a, kt.ToolUnlink, map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "FIXES"}))
	if u.ValidTo == nil || u.AlreadyClosed {
		t.Fatalf("unlink: %+v", u)
	}
	if rels := ok[knowledge.RelationsResult](t, call(t, reader, kt.ToolRelations, map[string]any{"id": incident.ID})); len(rels.Relations) != 0 {
		t.Fatalf("closed relation listed: %+v", rels)
	}
	if rels := ok[knowledge.RelationsResult](t, call(t, reader, kt.ToolRelations, map[string]any{"id": incident.ID, "includeClosed": true})); len(rels.Relations) != 1 || rels.Relations[0].ValidTo == nil {
		t.Fatalf("includeClosed: %+v", rels)
	}

	// Scopes: a read token cannot link, over HTTP a 403 the client shows as an error.
	if _, err := reader.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolLink,
		Arguments: map[string]any{"fromId": runbook.ID, "toId": incident.ID, "type": "RELATES_TO"}}); err == nil || !strings.Contains(err.Error(), "knowledge:write") {
		t.Errorf("link with a read token: %v", err)
	}
}

func TestRelationsOverStdio(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	writer := b.agent(org, "w", allScopes, 0)
	reader := b.agent(org, "r", []string{tenancy.ScopeKnowledgeRead}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func(token string) *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		go func() { _ = b.srv.ServeStdio(ctx, token, st) }()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	w, r := connect(writer.token), connect(reader.token)
	x := b.store(w, map[string]any{"title": "Decision: use X", "body": "we chose X"})
	y := b.store(w, map[string]any{"title": "Benchmark of X", "body": "X is fast"})
	ok[knowledge.RelationChange](t, call(t, w, kt.ToolLink, map[string]any{"fromId": x.ID, "toId": y.ID, "type": "DEPENDS_ON"}))
	rels := ok[knowledge.RelationsResult](t, call(t, r, kt.ToolRelations, map[string]any{"id": y.ID, "types": []string{"REQUIRED_BY"}}))
	if len(rels.Relations) != 1 || rels.Relations[0].OtherID != x.ID {
		t.Fatalf("stdio list_relations: %+v", rels)
	}
	// Search follows the relation to an entry that shares no word with the query.
	res := ok[knowledge.SearchResult](t, call(t, r, kt.ToolSearch, map[string]any{"query": "decision chose", "hops": 1}))
	if len(res.Hits) != 2 || res.Hits[0].ID != x.ID || res.Hits[1].ID != y.ID || res.Hits[1].Via == nil ||
		res.Hits[1].Via.Type != "DEPENDS_ON" || res.Hits[1].Via.FromID != x.ID || res.Hits[1].Score >= res.Hits[0].Score {
		t.Fatalf("search with hops over stdio: %+v", res.Hits)
	}
	if er := toolErr(t, call(t, r, kt.ToolSearch, map[string]any{"query": "decision", "hops": 3})); er.Code != "invalid_argument" || er.Field != "hops" {
		t.Errorf("hops 3: %+v", er)
	}
	if er := toolErr(t, call(t, r, kt.ToolSearch, map[string]any{"query": "decision", "hops": 1, "relationTypes": []string{"NOPE"}})); er.Code != "invalid_argument" || er.Field != "relationTypes[0]" {
		t.Errorf("unknown relation type: %+v", er)
	}
	e := toolErr(t, call(t, r, kt.ToolUnlink, map[string]any{"fromId": x.ID, "toId": y.ID, "type": "DEPENDS_ON"}))
	if e.Code != "forbidden" || e.RequiredScope != "knowledge:write" {
		t.Errorf("unlink with a read token over stdio: %+v", e)
	}
}

// TestRelationsAudited: link and unlink are recorded with both ends, and
// never with the note.
func TestRelationsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{audit: true})
	org := b.org("acme")
	cs := b.session(b.agent(org, "a", allScopes, time.Hour))
	x := b.store(cs, map[string]any{"title": "X", "body": "x"})
	y := b.store(cs, map[string]any{"title": "Y", "body": "y"})
	call(t, cs, kt.ToolLink, map[string]any{"fromId": x.ID, "toId": y.ID, "type": "RELATES_TO", "note": "secret-note-zebra"})
	call(t, cs, kt.ToolUnlink, map[string]any{"fromId": x.ID, "toId": y.ID, "type": "RELATES_TO"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range auditRows(t, b, org) {
		if strings.Contains(r.text, "zebra") {
			t.Errorf("audit record holds the note: %s", r.text)
		}
		if r.name != kt.ToolLink && r.name != kt.ToolUnlink {
			continue
		}
		if !slices.Contains(r.ids, x.ID) || !slices.Contains(r.ids, y.ID) || r.outcome != "ok" {
			t.Errorf("%s recorded %v (%s), want both ends", r.name, r.ids, r.outcome)
		}
		seen[r.name] = true
	}
	if !seen[kt.ToolLink] || !seen[kt.ToolUnlink] {
		t.Errorf("recorded: %v", seen)
	}
}
