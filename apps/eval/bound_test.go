package main

import "testing"

func TestSameTop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b []string
		k    int
		want bool
	}{
		{[]string{"a", "b", "c"}, []string{"a", "b", "d"}, 2, true},  // differ past k only
		{[]string{"a", "b", "c"}, []string{"a", "b", "d"}, 3, false}, // differ within k
		{[]string{"a", "b"}, []string{"b", "a"}, 10, false},          // same ids, other order
		{[]string{"a"}, []string{"a", "b"}, 10, false},               // one list is shorter within k
		{[]string{"a"}, []string{"a", "b"}, 1, true},
		{nil, nil, 10, true}, // both answered nothing
	} {
		if got := SameTop(c.a, c.b, c.k); got != c.want {
			t.Errorf("SameTop(%v, %v, %d) = %v, want %v", c.a, c.b, c.k, got, c.want)
		}
	}
}

func TestBoundComparison(t *testing.T) {
	t.Parallel()
	j := Judgments{"a": 1, "b": 1}
	c := newBoundComparison()
	// Query 1: identical everywhere.
	same := docLists{FullText: []string{"a", "x"}, Fused: []string{"a", "b"}}
	c.add(same, same, j)
	// Query 2: the exact read finds b in full text, which moves the fusion.
	c.add(docLists{FullText: []string{"x"}, Fused: []string{"a"}},
		docLists{FullText: []string{"b", "x"}, Fused: []string{"b", "a"}}, j)
	r := c.result()
	near(t, "same full text", r.FullText.SameTop10, 0.5)
	near(t, "same fused", r.Fused.SameTop10, 0.5)
	if r.FullText.Bounded.Name != "full text, bounded" || r.Fused.Exact.Name != "fused, exact" {
		t.Fatalf("names: %+v", r)
	}
	// Full-text R@100: bounded (1/2 + 0) / 2, exact (1/2 + 1/2) / 2.
	near(t, "full text bounded R@100", r.FullText.Bounded.Recall100, 0.25)
	near(t, "full text exact R@100", r.FullText.Exact.Recall100, 0.5)
	near(t, "fused exact R@100", r.Fused.Exact.Recall100, 1)

	if e := newBoundComparison().result(); e.Fused.SameTop10 != 0 || e.FullText.Bounded.NDCG10 != 0 {
		t.Fatalf("no queries: %+v", e)
	}
}
