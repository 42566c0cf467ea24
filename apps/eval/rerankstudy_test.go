package main

import (
	"context"
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// countingReranker scores a passage by its length and counts the passages
// it was asked for.
type countingReranker struct{ asked int }

func (c *countingReranker) Model() string { return "length" }
func (c *countingReranker) Rerank(_ context.Context, _ string, docs []string) ([]rerank.Result, error) {
	c.asked += len(docs)
	out := make([]rerank.Result, len(docs))
	for i, d := range docs {
		out[i] = rerank.Result{Index: i, Score: float64(len(d))}
	}
	return out, nil
}

// The cache of scores answers a pair it holds, across runs, and asks the
// reranker only for the others; results come best first either way.
func TestRerankCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inner := &countingReranker{}
	c, err := withRerankCache(inner, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rerank(context.Background(), "q", []string{"a", "bbb"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = withRerankCache(inner, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Rerank(context.Background(), "q", []string{"cc", "a", "bbb"})
	if err != nil {
		t.Fatal(err)
	}
	if inner.asked != 3 {
		t.Errorf("asked for %d passages, want 2 then 1", inner.asked)
	}
	want := []rerank.Result{{Index: 2, Score: 3}, {Index: 0, Score: 2}, {Index: 1, Score: 1}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}
