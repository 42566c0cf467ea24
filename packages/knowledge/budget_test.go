package knowledge_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// A cursor continues the listing it was made for: with other filters it is
// refused naming cursor; limit and maxTokens may change between pages.
func TestListCursorBoundToItsFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.store(t, b.alice, "a", "b", "ops")
	}
	r, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Limit: new(1), Tags: []string{"OPS"}})
	if err != nil || r.NextCursor == "" {
		t.Fatalf("%+v %v", r, err)
	}
	c := r.NextCursor
	alice, past := b.alice.AgentID, time.Now().Add(-time.Minute)
	for name, in := range map[string]knowledge.ListInput{
		"no tags":           {Cursor: c},
		"other tags":        {Cursor: c, Tags: []string{"db"}},
		"author":            {Cursor: c, Tags: []string{"ops"}, AuthorAgentID: &alice},
		"includeSuperseded": {Cursor: c, Tags: []string{"ops"}, IncludeSuperseded: true},
		"includeExpired":    {Cursor: c, Tags: []string{"ops"}, IncludeExpired: true},
		"createdAfter":      {Cursor: c, Tags: []string{"ops"}, CreatedAfter: &past},
		"asOf another time": {Cursor: c, Tags: []string{"ops"}, AsOf: &past},
	} {
		_, err := b.svc.List(b.ctx, b.alice, in)
		if e := wantCode(t, err, errs.CodeInvalidArgument, "cursor"); e != nil && !strings.Contains(e.Message, "other filters") {
			t.Errorf("%s: %v", name, e)
		}
	}
	// The same filters (tags normalised alike), another limit and a budget: accepted.
	r2, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Cursor: c, Tags: []string{"ops"}, Limit: new(5), MaxTokens: new(5000)})
	if err != nil || len(r2.Hits) != 2 {
		t.Fatalf("same filters: %+v %v", r2, err)
	}
}

// maxTokens trims a page to its budget (shorter snippets, then fewer
// hits, at least one) and says so; paging with a budget still gives every
// entry once, in order.
func TestListMaxTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []uuid.UUID
	for i := range 12 {
		id := b.store(t, b.alice, "entry "+strings.Repeat("t", i), strings.Repeat("long body words ", 40))
		want = append([]uuid.UUID{id}, want...)
	}
	full, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{})
	if err != nil || full.Truncated || len(full.Hits) != 12 {
		t.Fatalf("no budget: %d hits, truncated %v, %v", len(full.Hits), full.Truncated, err)
	}
	whole := knowledge.EstimateTokens(full)
	for _, budget := range []int{whole, whole * 2 / 3, whole / 3, 150, 100} {
		r, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{MaxTokens: new(budget)})
		if err != nil {
			t.Fatal(err)
		}
		got := knowledge.EstimateTokens(r)
		if budget >= whole && (r.Truncated || len(r.Hits) != 12) {
			t.Errorf("budget %d >= %d: trimmed anyway (%d hits)", budget, whole, len(r.Hits))
		}
		if budget < whole && !r.Truncated {
			t.Errorf("budget %d < %d: not marked truncated", budget, whole)
		}
		if len(r.Hits) == 0 || (len(r.Hits) > 1 && got > budget) {
			t.Errorf("budget %d: %d hits, about %d tokens", budget, len(r.Hits), got)
		}
		if ids := b.listAll(t, b.alice, knowledge.ListInput{MaxTokens: new(budget), Limit: new(5)}); !slices.Equal(ids, want) {
			t.Errorf("budget %d: paging gave %v, want %v", budget, ids, want)
		}
	}
	_, err = b.svc.List(b.ctx, b.alice, knowledge.ListInput{MaxTokens: new(99)})
	wantCode(t, err, errs.CodeInvalidArgument, "maxTokens")
}

// FitSearch keeps the best hits, shortens snippets first, and reports what
// it left out.
func TestFitSearch(t *testing.T) {
	t.Parallel()
	res := &knowledge.SearchResult{VectorSearch: true}
	for i := range 10 {
		res.Hits = append(res.Hits, knowledge.Hit{ID: uuid.New(), Title: "hit", Snippet: strings.Repeat("s", 240), Score: 1 - float64(i)/20})
	}
	whole := knowledge.EstimateTokens(res)
	best := res.Hits[0].ID
	cut := *res
	cut.Hits = slices.Clone(res.Hits)
	knowledge.FitSearch(&cut, whole-1)
	if !cut.Truncated || cut.OmittedHits != 0 || len(cut.Hits) != 10 || len(cut.Hits[0].Snippet) >= 240 {
		t.Errorf("a little under: snippets should shorten first: %d hits, omitted %d, snippet %d", len(cut.Hits), cut.OmittedHits, len(cut.Hits[0].Snippet))
	}
	tight := *res
	tight.Hits = slices.Clone(res.Hits)
	knowledge.FitSearch(&tight, 200)
	if !tight.Truncated || tight.OmittedHits == 0 || len(tight.Hits)+tight.OmittedHits != 10 || tight.Hits[0].ID != best ||
		knowledge.EstimateTokens(&tight) > 200 {
		t.Errorf("tight: %d hits, omitted %d, %d tokens", len(tight.Hits), tight.OmittedHits, knowledge.EstimateTokens(&tight))
	}
	roomy := *res
	roomy.Hits = slices.Clone(res.Hits)
	knowledge.FitSearch(&roomy, whole)
	if roomy.Truncated || len(roomy.Hits) != 10 || len(roomy.Hits[9].Snippet) != 240 {
		t.Errorf("within budget: changed")
	}
}
