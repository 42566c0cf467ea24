package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.12f, want %.12f", name, got, want)
	}
}

// The judgments of the worked example: two graded 2, one graded 1, one
// judged not relevant, and one relevant document the ranking never finds.
var judged = Judgments{"a": 2, "b": 1, "c": 0, "d": 2, "e": 1}

func TestNDCGGradedGainsAndIdealFromAllJudged(t *testing.T) {
	t.Parallel()
	// Ranking: c (0), a (2), x (unjudged), b (1).
	// DCG@10 = 2/log2(3) + 1/log2(5).
	// Ideal over all judged docs: 2, 2, 1, 1 -> 2/1 + 2/log2(3) + 1/2 + 1/log2(5).
	dcg := 2/math.Log2(3) + 1/math.Log2(5)
	ideal := 2 + 2/math.Log2(3) + 0.5 + 1/math.Log2(5)
	near(t, "nDCG@10", NDCG([]string{"c", "a", "x", "b"}, judged, 10), dcg/ideal)

	// Cut at 2: only c and a count; the ideal is cut at 2 too (2, 2).
	near(t, "nDCG@2", NDCG([]string{"c", "a", "x", "b"}, judged, 2), (2/math.Log2(3))/(2+2/math.Log2(3)))

	// The perfect ranking scores 1; nothing relevant scores 0.
	near(t, "perfect", NDCG([]string{"a", "d", "b", "e"}, judged, 10), 1)
	near(t, "none", NDCG([]string{"c", "x"}, judged, 10), 0)
	near(t, "empty", NDCG(nil, judged, 10), 0)
	near(t, "no relevant judgments", NDCG([]string{"c"}, Judgments{"c": 0}, 10), 0)
}

func TestRecall(t *testing.T) {
	t.Parallel()
	// 4 relevant (a, b, d, e); c is judged 0 and does not count.
	r := []string{"c", "a", "x", "b"}
	near(t, "R@10", Recall(r, judged, 10), 2.0/4)
	near(t, "R@2", Recall(r, judged, 2), 1.0/4)
	near(t, "R@100", Recall([]string{"e", "d", "b", "a"}, judged, 100), 1)
	near(t, "no relevant", Recall(r, Judgments{"c": 0}, 10), 0)
}

func TestReciprocalRank(t *testing.T) {
	t.Parallel()
	near(t, "first relevant at 2", ReciprocalRank([]string{"c", "a", "b"}, judged, 10), 0.5)
	near(t, "at 1", ReciprocalRank([]string{"e"}, judged, 10), 1)
	near(t, "beyond the cut", ReciprocalRank([]string{"x", "y", "a"}, judged, 2), 0)
	near(t, "none", ReciprocalRank([]string{"c", "x"}, judged, 10), 0)
}

func TestRowMeans(t *testing.T) {
	t.Parallel()
	var r Row
	r.Add([]string{"a"}, Judgments{"a": 1}) // perfect: 1, 1, 1, 1
	r.Add(nil, Judgments{"a": 1})           // no hits: 0 everywhere, not answered
	r.Mean()
	for name, v := range map[string]float64{"nDCG": r.NDCG10, "R@10": r.Recall10, "R@100": r.Recall100, "MRR": r.MRR10, "answered": r.Answered} {
		near(t, name, v, 0.5)
	}
}

func TestRRF(t *testing.T) {
	t.Parallel()
	// a: 1/61 + 1/62; b: 1/62 + 1/61 (ranks 2 and 1); c: 1/61; d: 1/63.
	// a and b tie, both with a best rank of 1, so the id decides.
	got := RRF(60, []string{"a", "b", "d"}, []string{"c", "a"}, []string{"b"})
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("RRF = %v, want %v", got, want)
	}
	// A document in two lists beats one ranked first in a single list.
	got = RRF(60, []string{"x", "y"}, []string{"z", "y"})
	if got[0] != "y" {
		t.Fatalf("RRF = %v, want y first", got)
	}
	if len(RRF(60)) != 0 {
		t.Fatal("RRF of no lists is not empty")
	}
}

func TestPercentilesNearestRank(t *testing.T) {
	t.Parallel()
	d := make([]time.Duration, 100)
	for i := range d {
		d[len(d)-1-i] = time.Duration(i+1) * time.Millisecond // unsorted: 100 ms .. 1 ms
	}
	l := Percentiles(d)
	if l.Queries != 100 || l.P50 != 50 || l.P95 != 95 || l.P99 != 99 {
		t.Fatalf("got %+v, want 100 queries, p50 50, p95 95, p99 99", l)
	}
	if l := Percentiles([]time.Duration{3 * time.Millisecond}); l.P50 != 3 || l.P99 != 3 {
		t.Fatalf("one sample: %+v", l)
	}
	if l := Percentiles(nil); l.Queries != 0 || l.P50 != 0 {
		t.Fatalf("no samples: %+v", l)
	}
}

func TestNonsenseQueriesAreDeterministic(t *testing.T) {
	t.Parallel()
	a, b := NonsenseQueries(20, 7), NonsenseQueries(20, 7)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different queries")
	}
	if slices.Equal(a, NonsenseQueries(20, 8)) {
		t.Fatal("different seeds, same queries")
	}
	for _, q := range a {
		if q == "" {
			t.Fatal("empty query")
		}
	}
}
