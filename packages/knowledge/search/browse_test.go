package search_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Newest first, page by page, every entry once; entries stored while an
// agent pages neither shift nor repeat the pages after (keyset paging).
func TestListPagesNewestFirstStableUnderInserts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []uuid.UUID
	for i := range 45 {
		id := b.store(t, b.alice, "entry", strings.Repeat("body words ", 30+i))
		want = append([]uuid.UUID{id}, want...)
	}
	b.store(t, b.eve, "other org", "never listed for org A")
	first, err := b.svc.List(b.ctx, b.bob, knowledge.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Hits) != knowledge.DefaultListLimit || first.NextCursor == "" {
		t.Fatalf("first page: %d hits, cursor %q", len(first.Hits), first.NextCursor)
	}
	h := first.Hits[0]
	if h.ID != want[0] || h.CreatedByAgentID == nil || *h.CreatedByAgentID != b.alice.AgentID ||
		!strings.HasSuffix(h.Snippet, "…") || len([]rune(h.Snippet)) != knowledge.SnippetChars {
		t.Fatalf("first hit: %+v", h)
	}
	// Ten newer entries arrive before page two.
	for range 10 {
		b.store(t, b.alice, "newer", "stored while paging")
	}
	got := []uuid.UUID{}
	for _, x := range first.Hits {
		got = append(got, x.ID)
	}
	in := knowledge.ListInput{Cursor: first.NextCursor}
	got = append(got, b.listAll(t, b.bob, in)...)
	if !slices.Equal(got, want) {
		t.Fatalf("pages after concurrent inserts: %d ids, want the %d listed at the start, in order", len(got), len(want))
	}
	if n := len(b.listAll(t, b.bob, knowledge.ListInput{Limit: new(7)})); n != 55 {
		t.Fatalf("listing everything in pages of 7: %d entries, want 55", n)
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.mkTask(t, b.org)
	pg := b.store(t, b.alice, "pg", "postgres note", "postgres")
	pgBob := b.store(t, b.bob, "pg bob", "postgres by bob", "postgres", "ops")
	linked, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "linked", Body: "for the task",
		TaskRef: &knowledge.TaskRef{TaskID: task, Kind: knowledge.LinkProduced}})
	if err != nil {
		t.Fatal(err)
	}
	old := b.store(t, b.alice, "old", "replaced")
	newer := b.store(t, b.alice, "new", "replaces old")
	if _, err := b.svc.Supersede(b.ctx, b.alice, old, newer); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(time.Hour)
	exp, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "expiring", Body: "soon", ExpiresAt: &past})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, "UPDATE knowledge SET expires_at = now() - interval '1 minute' WHERE id = $1", exp.ID); err != nil {
		t.Fatal(err)
	}
	mid := time.Now()
	late := b.store(t, b.alice, "late", "after mid")

	bob := b.bob.AgentID
	for name, c := range map[string]struct {
		in   knowledge.ListInput
		want []uuid.UUID
	}{
		"default: heads, not expired": {knowledge.ListInput{}, []uuid.UUID{late, newer, linked.ID, pgBob, pg}},
		"tags (normalised, all held)": {knowledge.ListInput{Tags: []string{"Postgres", "OPS"}}, []uuid.UUID{pgBob}},
		"author":                      {knowledge.ListInput{AuthorAgentID: &bob}, []uuid.UUID{pgBob}},
		"task":                        {knowledge.ListInput{TaskID: &task}, []uuid.UUID{linked.ID}},
		"superseded too":              {knowledge.ListInput{IncludeSuperseded: true}, []uuid.UUID{late, newer, old, linked.ID, pgBob, pg}},
		"expired too":                 {knowledge.ListInput{IncludeExpired: true}, []uuid.UUID{late, exp.ID, newer, linked.ID, pgBob, pg}},
		"created after":               {knowledge.ListInput{CreatedAfter: &mid}, []uuid.UUID{late}},
		"created before":              {knowledge.ListInput{CreatedBefore: &mid}, []uuid.UUID{newer, linked.ID, pgBob, pg}},
	} {
		if got := b.listAll(t, b.bob, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

// A cursor is opaque and signed: altered, forged or another org's, it is
// refused naming the argument; bad limits and ranges too.
func TestListRefusesForeignAndForgedCursors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.store(t, b.alice, "a", "b")
	}
	r, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Limit: new(1)})
	if err != nil || r.NextCursor == "" {
		t.Fatalf("%+v %v", r, err)
	}
	c := r.NextCursor
	flip := []byte(c)
	flip[len(flip)/2] ^= 1
	now := time.Now()
	earlier := now.Add(-time.Hour)
	for name, tc := range map[string]struct {
		caller knowledge.Caller
		in     knowledge.ListInput
		field  string
	}{
		"another org's cursor": {b.eve, knowledge.ListInput{Cursor: c}, "cursor"},
		"altered cursor":       {b.alice, knowledge.ListInput{Cursor: string(flip)}, "cursor"},
		"garbage cursor":       {b.alice, knowledge.ListInput{Cursor: "eyJvZmZzZXQiOjEwMH0"}, "cursor"},
		"limit 101":            {b.alice, knowledge.ListInput{Limit: new(101)}, "limit"},
		"limit -1":             {b.alice, knowledge.ListInput{Limit: new(-1)}, "limit"},
		"limit 0":              {b.alice, knowledge.ListInput{Limit: new(0)}, "limit"},
		"maxTokens 0":          {b.alice, knowledge.ListInput{MaxTokens: new(0)}, "maxTokens"},
		"empty range":          {b.alice, knowledge.ListInput{CreatedAfter: &now, CreatedBefore: &earlier}, "createdBefore"},
		"bad tag":              {b.alice, knowledge.ListInput{Tags: []string{"c++"}}, "tags[0]"},
	} {
		_, err := b.svc.List(b.ctx, tc.caller, tc.in)
		wantCode(t, err, errs.CodeInvalidArgument, tc.field)
		_ = name
	}
	if r2, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Limit: new(1), Cursor: c}); err != nil || len(r2.Hits) != 1 || r2.Hits[0].ID == r.Hits[0].ID {
		t.Fatalf("the genuine cursor: %+v %v", r2, err)
	}
}
