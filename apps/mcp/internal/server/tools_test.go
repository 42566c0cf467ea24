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

func TestStoreSearchReadSupersedeThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	a := b.agent(org, "a", allScopes, 0)
	cs := b.session(a)
	task := b.task(org)

	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	first := b.store(cs, map[string]any{
		"title":      "Postgres advisory locks in migrations",
		"body":       "goose takes a session advisory lock, so two deploys never migrate at once.",
		"tags":       []string{"Postgres", "migrations"},
		"confidence": 90,
		"expiresAt":  exp.Format(time.RFC3339),
		"taskRef":    map[string]any{"taskId": task, "kind": "produced"},
	})
	if first.EmbeddingStatus != knowledge.EmbeddingPending || first.Confidence != 90 || first.TaskLink == nil ||
		first.TaskLink.TaskID != task || first.TaskLink.Kind != knowledge.LinkProduced || first.ExpiresAt == nil || !first.ExpiresAt.Equal(exp) {
		t.Errorf("store result %+v", first)
	}
	if len(first.Tags) != 2 || first.Tags[0] != "postgres" {
		t.Errorf("tags not normalised: %v", first.Tags)
	}

	res := call(t, cs, kt.ToolSearch, map[string]any{"query": "advisory lock", "tags": []string{"POSTGRES"}})
	hits := ok[knowledge.SearchResult](t, res)
	if len(hits.Hits) != 1 || hits.Hits[0].ID != first.ID {
		t.Fatalf("search: %+v", hits)
	}
	// The calibrated score: at most plain RRF of the hit's ranks (full
	// evidence in every list that found it), at least the default gate.
	h := hits.Hits[0]
	if rrf := knowledge.RRFScore(h.VectorRank, h.FullTextRank, h.TitleRank); h.Score < knowledge.DefaultMinScore || h.Score > rrf+1e-9 {
		t.Errorf("score %v outside [%v, RRF %v]: %+v", h.Score, knowledge.DefaultMinScore, rrf, h)
	}
	// The raw evidence reaches the agent: the words list found the entry
	// (still queued for the indexer: scored on the fly).
	if h.FullTextRank == 0 || h.Signals.BM25 == nil || *h.Signals.BM25 <= 0 || !strings.Contains(text(res), `"signals":{`) {
		t.Errorf("signals missing: %+v in %s", h, text(res))
	}
	empty := ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "nothing matches this zzqx"}))
	if empty.Hits == nil || len(empty.Hits) != 0 {
		t.Errorf("no-hit search: %+v", empty)
	}

	second := b.store(cs, map[string]any{"title": "Postgres advisory locks, corrected", "body": "goose v3 uses a session lock by default; see the provider options."})
	sup := ok[knowledge.SupersedeResult](t, call(t, cs, kt.ToolSupersede, map[string]any{"oldId": first.ID, "newId": second.ID}))
	if sup.OldID != first.ID || sup.NewID != second.ID || sup.HeadID != second.ID {
		t.Errorf("supersede: %+v", sup)
	}
	again := ok[knowledge.SupersedeResult](t, call(t, cs, kt.ToolSupersede, map[string]any{"oldId": first.ID, "newId": second.ID}))
	if !again.AlreadySuperseded {
		t.Errorf("repeat supersede: %+v", again)
	}
	def := ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "advisory locks"}))
	for _, h := range def.Hits {
		if h.ID == first.ID {
			t.Errorf("superseded entry returned by default")
		}
	}
	incl := ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "advisory locks", "includeSuperseded": true, "limit": 5}))
	found := false
	for _, h := range incl.Hits {
		if h.ID == first.ID {
			found = true
			if !h.Superseded || h.HeadID == nil || *h.HeadID != second.ID {
				t.Errorf("superseded hit %+v", h)
			}
		}
	}
	if !found {
		t.Errorf("includeSuperseded did not return the old entry: %+v", incl)
	}

	// The entry resource.
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://" + first.ID.String()})
	if err != nil {
		t.Fatal(err)
	}
	var e knowledge.Entry
	if len(rr.Contents) != 1 || rr.Contents[0].MIMEType != "application/json" || json.Unmarshal([]byte(rr.Contents[0].Text), &e) != nil {
		t.Fatalf("resource contents %+v", rr.Contents)
	}
	if e.ID != first.ID || !strings.Contains(e.Body, "session advisory lock") || e.CreatedByAgentID == nil || *e.CreatedByAgentID != a.id ||
		e.Origin != "agent" || e.SupersededBy == nil || *e.SupersededBy != second.ID || len(e.TaskLinks) != 1 {
		t.Errorf("entry %+v", e)
	}

	// The task resource.
	rr, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://tasks/" + task.String()})
	if err != nil {
		t.Fatal(err)
	}
	var tr kt.TaskKnowledgeResult
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.TaskID != task || len(tr.Entries) != 1 || tr.Entries[0].ID != first.ID || tr.Entries[0].URI != "knowledge://"+first.ID.String() ||
		tr.Entries[0].Link.Kind != knowledge.LinkProduced {
		t.Errorf("task knowledge %+v", tr)
	}
	// A task with no links lists nothing (not an error).
	rr, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://tasks/" + b.task(org).String()})
	if err != nil || !strings.Contains(rr.Contents[0].Text, `"entries":[]`) {
		t.Errorf("empty task: %v %+v", err, rr)
	}
}

func TestInvalidArgumentsNameTheArgumentAndRule(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	cs := b.session(b.agent(org, "a", allScopes, 0))
	long := func(n int) string { return strings.Repeat("é", n) }
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "t" + string(rune('a'+i))
		}
		return out
	}
	ok := map[string]any{"title": "t", "body": "b"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range ok {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	id := uuid.NewString()
	cases := []struct {
		tool  string
		args  any
		field string
		rule  string
	}{
		{kt.ToolStore, with("title", nil), "title", "required"},
		{kt.ToolStore, with("title", ""), "title", "required"},
		{kt.ToolStore, with("title", "   "), "title", "blank"},
		{kt.ToolStore, with("title", long(201)), "title", "at most 200 characters (got 201)"},
		{kt.ToolStore, with("title", 42), "title", "must be a string"},
		{kt.ToolStore, with("body", long(32001)), "body", "at most 32000 characters"},
		{kt.ToolStore, with("body", "a\x00b"), "body", "NUL"},
		{kt.ToolStore, with("tags", tags(17)), "tags", "at most 16"},
		{kt.ToolStore, with("tags", []string{"ok", "c++"}), "tags[1]", "kebab-case"},
		{kt.ToolStore, with("tags", []string{"ok", ""}), "tags[1]", "kebab-case"},
		{kt.ToolStore, with("tags", "postgres"), "tags", "array of strings"},
		{kt.ToolStore, with("confidence", 101), "confidence", "0 to 100 (got 101)"},
		{kt.ToolStore, with("confidence", -1), "confidence", "0 to 100"},
		{kt.ToolStore, with("confidence", 80.5), "confidence", "must be an integer"},
		{kt.ToolStore, with("expiresAt", "tomorrow"), "expiresAt", "RFC 3339"},
		{kt.ToolStore, with("expiresAt", time.Now().Add(-time.Minute).Format(time.RFC3339)), "expiresAt", "strictly in the future"},
		{kt.ToolStore, with("taskRef", map[string]any{"taskId": "nope", "kind": "produced"}), "taskRef.taskId", "UUID"},
		{kt.ToolStore, with("taskRef", map[string]any{"taskId": id, "kind": "likes"}), "taskRef.kind", "one of: references, produced"},
		{kt.ToolStore, with("taskRef", map[string]any{"taskId": id}), "taskRef.kind", "required"},
		{kt.ToolStore, with("taskRef", map[string]any{"taskId": id, "kind": "produced", "extra": 1}), "taskRef.extra", "not an argument"},
		{kt.ToolStore, with("clientToken", "123"), "clientToken", "UUID"},
		{kt.ToolStore, with("createdByAgentId", id), "createdByAgentId", "not an argument"},
		{kt.ToolSearch, map[string]any{}, "query", "required"},
		{kt.ToolSearch, map[string]any{"query": long(2001)}, "query", "at most 2000"},
		{kt.ToolSearch, map[string]any{"query": "q", "limit": 0}, "limit", "1 to 50"},
		{kt.ToolSearch, map[string]any{"query": "q", "limit": 51}, "limit", "1 to 50"},
		{kt.ToolSearch, map[string]any{"query": "q", "tags": tags(17)}, "tags", "at most 16"},
		{kt.ToolSearch, map[string]any{"query": "q", "minScore": 1.5}, "minScore", "0 to 1"},
		{kt.ToolSearch, map[string]any{"query": "q", "efSearch": 201}, "efSearch", "1 to 200"},
		{kt.ToolSearch, map[string]any{"query": "q", "includeExpired": "yes"}, "includeExpired", "true or false"},
		{kt.ToolSearch, map[string]any{"query": "q", "orgId": id}, "orgId", "not an argument"},
		{kt.ToolSupersede, map[string]any{"newId": id}, "oldId", "required"},
		{kt.ToolSupersede, map[string]any{"oldId": "x", "newId": id}, "oldId", "UUID"},
		{kt.ToolSupersede, map[string]any{"oldId": id, "newId": id}, "newId", "must differ from oldId"},
	}
	for _, c := range cases {
		e := toolErr(t, call(t, cs, c.tool, c.args))
		if e.Code != "invalid_argument" || e.Field != c.field || !strings.Contains(e.Message, c.rule) {
			t.Errorf("%s %v: got %+v, want invalid_argument on %s saying %q", c.tool, c.args, e, c.field, c.rule)
		}
	}
	// Nothing was stored by any of them.
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM knowledge").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d entries stored by refused calls (%v)", n, err)
	}
}

func TestDomainErrorCodesThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	alice := b.agent(org, "alice", allScopes, 0)
	bob := b.agent(org, "bob", allScopes, 0)
	as, bs := b.session(alice), b.session(bob)
	a1 := b.store(as, map[string]any{"title": "a1", "body": "one"})
	a2 := b.store(as, map[string]any{"title": "a2", "body": "two"})
	a3 := b.store(as, map[string]any{"title": "a3", "body": "three"})
	missing := uuid.NewString()

	expect := func(name string, res *mcp.CallToolResult, code, field, says string) {
		t.Helper()
		e := toolErr(t, res)
		if e.Code != code || (field != "" && e.Field != field) || !strings.Contains(e.Message, says) {
			t.Errorf("%s: got %+v, want %s on %q saying %q", name, e, code, field, says)
		}
	}
	expect("unknown task", call(t, as, kt.ToolStore, map[string]any{"title": "t", "body": "b", "taskRef": map[string]any{"taskId": missing, "kind": "references"}}),
		"not_found", "taskRef.taskId", "")
	expect("unknown old", call(t, as, kt.ToolSupersede, map[string]any{"oldId": missing, "newId": a1.ID}), "not_found", "oldId", "")
	expect("unknown new", call(t, as, kt.ToolSupersede, map[string]any{"oldId": a1.ID, "newId": missing}), "not_found", "newId", "")
	expect("other author", call(t, bs, kt.ToolSupersede, map[string]any{"oldId": a1.ID, "newId": a2.ID}), "forbidden", "", "knowledge:write_others")

	ok[knowledge.SupersedeResult](t, call(t, as, kt.ToolSupersede, map[string]any{"oldId": a1.ID, "newId": a2.ID}))
	ok[knowledge.SupersedeResult](t, call(t, as, kt.ToolSupersede, map[string]any{"oldId": a2.ID, "newId": a3.ID}))
	expect("cycle", call(t, as, kt.ToolSupersede, map[string]any{"oldId": a3.ID, "newId": a1.ID}), "cycle", "newId", "cycle")
	expect("already superseded", call(t, as, kt.ToolSupersede, map[string]any{"oldId": a1.ID, "newId": a3.ID}), "conflict", "oldId", "already superseded")

	// The head cache is visible through the resource.
	rr, err := as.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://" + a1.ID.String()})
	if err != nil {
		t.Fatal(err)
	}
	var e knowledge.Entry
	json.Unmarshal([]byte(rr.Contents[0].Text), &e)
	if e.HeadID == nil || *e.HeadID != a3.ID {
		t.Errorf("head of a1: %v, want %s", e.HeadID, a3.ID)
	}

	// get_knowledge answers what the resource answers (the chain included),
	// and refuses the same ids.
	got := call(t, as, kt.ToolGet, map[string]any{"id": a1.ID})
	if got.IsError || len(got.Content) != 1 {
		t.Fatalf("get_knowledge: %+v", got)
	}
	if text := got.Content[0].(*mcp.TextContent).Text; text != rr.Contents[0].Text {
		t.Errorf("get_knowledge and knowledge://{id} differ:\n%s\n%s", text, rr.Contents[0].Text)
	}
	if len(e.Chain) != 2 || e.Chain[0].Direction != "successor" {
		t.Errorf("a1's chain (a1 -> a2 -> a3): %+v", e.Chain)
	}
	// list_knowledge pages the same entries, newest first, with a cursor
	// that another org cannot use.
	page := ok[knowledge.ListResult](t, call(t, as, kt.ToolList, map[string]any{"limit": 2, "includeSuperseded": true}))
	if len(page.Hits) != 2 || page.NextCursor == "" {
		t.Fatalf("list page: %+v", page)
	}
	next := ok[knowledge.ListResult](t, call(t, as, kt.ToolList, map[string]any{"limit": 2, "includeSuperseded": true, "cursor": page.NextCursor}))
	if len(next.Hits) == 0 || next.Hits[0].ID == page.Hits[0].ID || !next.Hits[0].CreatedAt.Before(page.Hits[1].CreatedAt.Add(time.Nanosecond)) {
		t.Errorf("second page: %+v after %+v", next, page)
	}
	expect("list limit", call(t, as, kt.ToolList, map[string]any{"limit": 0}), "invalid_argument", "limit", "1 to 100")
	expect("list bad cursor", call(t, as, kt.ToolList, map[string]any{"cursor": "x" + page.NextCursor}), "invalid_argument", "cursor", "")
	expect("list bad time", call(t, as, kt.ToolList, map[string]any{"createdAfter": "yesterday"}), "invalid_argument", "createdAfter", "RFC 3339")
	// Correct in one call: supersede_knowledge with a replacement.
	tok := uuid.NewString()
	fix := map[string]any{"oldId": a3.ID, "replacement": map[string]any{"title": "a3, corrected", "body": "the right value"}, "clientToken": tok}
	cr := ok[knowledge.CorrectResult](t, call(t, as, kt.ToolSupersede, fix))
	if cr.Stored == nil || cr.HeadID != cr.Stored.ID || cr.OldID != a3.ID {
		t.Fatalf("correction: %+v", cr)
	}
	again := ok[knowledge.CorrectResult](t, call(t, as, kt.ToolSupersede, fix))
	if !again.Stored.Replayed || again.Stored.ID != cr.Stored.ID || !again.AlreadySuperseded {
		t.Errorf("retried correction: %+v", again)
	}
	expect("both", call(t, as, kt.ToolSupersede, map[string]any{"oldId": a1.ID, "newId": a2.ID, "replacement": map[string]any{"title": "t", "body": "b"}}),
		"invalid_argument", "replacement", "not both")
	expect("neither", call(t, as, kt.ToolSupersede, map[string]any{"oldId": a1.ID}), "invalid_argument", "newId", "replacement")
	expect("token without replacement", call(t, as, kt.ToolSupersede, map[string]any{"oldId": a1.ID, "newId": a2.ID, "clientToken": tok}),
		"invalid_argument", "clientToken", "replacement")
	expect("bad replacement", call(t, as, kt.ToolSupersede, map[string]any{"oldId": cr.Stored.ID, "replacement": map[string]any{"title": "", "body": "b"}}),
		"invalid_argument", "replacement.title", "")
	expect("get unknown", call(t, as, kt.ToolGet, map[string]any{"id": missing}), "not_found", "id", "")
	expect("get not a uuid", call(t, as, kt.ToolGet, map[string]any{"id": "x"}), "invalid_argument", "id", "UUID")

	// Resource errors.
	for uri, want := range map[string]string{
		"knowledge://" + missing:               "not found",
		"knowledge://tasks/" + missing:         "not found",
		"knowledge://not-a-uuid":               "invalid_argument: id",
		"knowledge://tasks/not-a-uuid":         "invalid_argument: taskId",
		"knowledge://" + a1.ID.String() + "/x": "",
	} {
		_, err := as.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
			t.Errorf("%s: got %v, want an error saying %q", uri, err, want)
		}
	}
}

func TestOrgIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	orgA, orgB := b.org("a"), b.org("b")
	as := b.session(b.agent(orgA, "a", allScopes, 0))
	bs := b.session(b.agent(orgB, "b", allScopes, 0))
	taskA := b.task(orgA)
	secret := b.store(as, map[string]any{"title": "Org A secret runbook", "body": "the launch codes are in vault path kv/a", "taskRef": map[string]any{"taskId": taskA, "kind": "produced"}})
	mine := b.store(bs, map[string]any{"title": "b's entry", "body": "b"})
	missing := uuid.New()

	// Search never returns another org's entries.
	res := ok[knowledge.SearchResult](t, call(t, bs, kt.ToolSearch, map[string]any{"query": "Org A secret runbook launch codes", "includeSuperseded": true, "includeExpired": true}))
	for _, h := range res.Hits {
		if h.ID == secret.ID {
			t.Fatal("org B found org A's entry")
		}
	}
	// Another org's id answers exactly like an id that does not exist.
	same := func(name string, theirs, none *mcp.CallToolResult) {
		t.Helper()
		et, en := toolErr(t, theirs), toolErr(t, none)
		en.Message = strings.ReplaceAll(en.Message, missing.String(), secret.ID.String())
		if et != en {
			t.Errorf("%s: another org's id %+v differs from a missing id %+v", name, et, en)
		}
		if strings.Contains(text(theirs), "Org A") {
			t.Errorf("%s leaks: %s", name, text(theirs))
		}
	}
	same("supersede old", call(t, bs, kt.ToolSupersede, map[string]any{"oldId": secret.ID, "newId": mine.ID}),
		call(t, bs, kt.ToolSupersede, map[string]any{"oldId": missing, "newId": mine.ID}))
	same("supersede new", call(t, bs, kt.ToolSupersede, map[string]any{"oldId": mine.ID, "newId": secret.ID}),
		call(t, bs, kt.ToolSupersede, map[string]any{"oldId": mine.ID, "newId": missing}))
	same("task ref", call(t, bs, kt.ToolStore, map[string]any{"title": "t", "body": "b", "taskRef": map[string]any{"taskId": taskA, "kind": "references"}}),
		call(t, bs, kt.ToolStore, map[string]any{"title": "t", "body": "b", "taskRef": map[string]any{"taskId": missing, "kind": "references"}}))

	for _, pair := range [][2]string{
		{"knowledge://" + secret.ID.String(), "knowledge://" + missing.String()},
		{"knowledge://tasks/" + taskA.String(), "knowledge://tasks/" + missing.String()},
	} {
		_, errTheirs := bs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: pair[0]})
		_, errNone := bs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: pair[1]})
		if errTheirs == nil || errNone == nil {
			t.Fatalf("read across orgs: %v / %v", errTheirs, errNone)
		}
		if strings.ReplaceAll(errTheirs.Error(), pair[0], "X") != strings.ReplaceAll(errNone.Error(), pair[1], "X") {
			t.Errorf("resource errors differ: %q vs %q", errTheirs, errNone)
		}
	}
}

func TestIdempotentReplayThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	a := b.agent(org, "a", allScopes, 0)
	cs := b.session(a)
	token := uuid.NewString()
	args := map[string]any{"title": "retry me", "body": "once", "clientToken": token}
	first := b.store(cs, args)
	second := b.store(b.session(b.token(a, allScopes, 0)), args) // another token of the same agent
	if first.Replayed || !second.Replayed || second.ID != first.ID {
		t.Errorf("first %+v, second %+v", first, second)
	}
	// The same client token from another agent is another key.
	other := b.store(b.session(b.agent(org, "other", allScopes, 0)), args)
	if other.ID == first.ID || other.Replayed {
		t.Errorf("other agent's store replayed: %+v", other)
	}
	var n int
	b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM knowledge").Scan(&n)
	if n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
}

func TestQuotaExhaustionThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	limit := int64(2)
	if _, err := b.tenancy.SetQuota(context.Background(), org, tenancy.ResourceKnowledgeStored, &limit); err != nil {
		t.Fatal(err)
	}
	cs := b.session(b.agent(org, "a", allScopes, 0))
	b.store(cs, map[string]any{"title": "1", "body": "b"})
	b.store(cs, map[string]any{"title": "2", "body": "b"})
	e := toolErr(t, call(t, cs, kt.ToolStore, map[string]any{"title": "3", "body": "b"}))
	if e.Code != "quota_exceeded" || e.Retryable || !strings.Contains(e.Message, "stored 2 entries of its knowledge_stored quota of 2") {
		t.Errorf("third store: %+v, want quota_exceeded saying the limit and the usage", e)
	}
	// Bad input does not consume quota either: raise the limit by one and
	// fail a store first.
	limit = 3
	b.tenancy.SetQuota(context.Background(), org, tenancy.ResourceKnowledgeStored, &limit)
	toolErr(t, call(t, cs, kt.ToolStore, map[string]any{"title": "3", "body": "b", "taskRef": map[string]any{"taskId": uuid.NewString(), "kind": "produced"}}))
	b.store(cs, map[string]any{"title": "3", "body": "b"})
	q, _ := b.tenancy.Quotas(context.Background(), org)
	if len(q) != 1 || q[0].Used != 3 {
		t.Errorf("quotas %+v", q)
	}
}
