package main

import (
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

func TestGateQuery(t *testing.T) {
	t.Parallel()
	q := GateQuery{Scores: []float64{0.3, 0.1, 0.05}}
	if !q.answered(0.3) || q.answered(0.31) || q.hits(0.1) != 2 || q.hits(0) != 3 {
		t.Fatalf("answered/hits wrong for %+v", q)
	}
	var none GateQuery
	if none.answered(0) || none.hits(0) != 0 || none.top() != 0 {
		t.Fatal("a query with no hits is answered at minScore 0")
	}
}

func TestGate(t *testing.T) {
	t.Parallel()
	real := []GateQuery{
		{Scores: []float64{0.4, 0.2, 0.1}, TopRelevant: true},
		{Scores: []float64{0.12, 0.05}, TopRelevant: false},
		{Scores: []float64{0.06}, TopRelevant: true},
		{}, // nothing found
	}
	nonsense := []GateQuery{{Scores: []float64{0.07}}, {Scores: []float64{0.02}}, {}}
	g := Gate(real, nonsense, []float64{0, knowledge.DefaultMinScore, 0.1, 0.5})
	if g.Queries != 4 || g.Nonsense != 3 || g.Depth != gateDepth || len(g.Rows) != 4 {
		t.Fatalf("study: %+v", g)
	}

	r0 := g.Rows[0] // minScore 0: three real and two nonsense queries answered
	near(t, "answered@0", r0.Answered, 0.75)
	near(t, "P@1@0", r0.PrecisionAt1, 2.0/3)
	near(t, "hits@0", r0.MeanHits, 6.0/4)
	if r0.NonsenseAnswered != 2 || r0.Default {
		t.Errorf("row 0: %+v", r0)
	}

	if d := g.Rows[1]; !d.Default || d.MinScore != knowledge.DefaultMinScore {
		t.Errorf("the default's row is not marked: %+v", d)
	}

	r1 := g.Rows[2] // minScore 0.1: the first two real queries, no nonsense
	near(t, "answered@0.1", r1.Answered, 0.5)
	near(t, "P@1@0.1", r1.PrecisionAt1, 0.5)
	near(t, "hits@0.1", r1.MeanHits, 4.0/4) // 0.4, 0.2, 0.1 and 0.12
	if r1.NonsenseAnswered != 0 {
		t.Errorf("row 0.1: %+v", r1)
	}

	r5 := g.Rows[3] // minScore 0.5: nothing answered, P@1 stays 0
	if r5.Answered != 0 || r5.PrecisionAt1 != 0 || r5.MeanHits != 0 {
		t.Errorf("row 0.5: %+v", r5)
	}

	near(t, "nonsense max", g.NonsenseTop1Max, 0.07)
	// Real tops sorted: 0, 0.06, 0.12, 0.4. Nearest rank: p10 -> 1st, p50 -> 2nd.
	near(t, "p10", g.RealTop1P10, 0)
	near(t, "p50", g.RealTop1P50, 0.06)
	near(t, "at or below nonsense", g.RealBelowNonsense, 0.5)
}

func TestGateThresholdsHoldTheDefault(t *testing.T) {
	t.Parallel()
	g := Gate(nil, nil, GateThresholds)
	marked := 0
	for _, r := range g.Rows {
		if r.Default {
			marked++
		}
	}
	if marked != 1 {
		t.Fatalf("%d rows marked default; GateThresholds must hold knowledge.DefaultMinScore (%v) once", marked, knowledge.DefaultMinScore)
	}
	if g.RealBelowNonsense != 0 || g.RealTop1P50 != 0 {
		t.Fatalf("empty study: %+v", g)
	}
}

func TestNearestRank(t *testing.T) {
	t.Parallel()
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	near(t, "p10", nearestRank(s, 0.1), 1)
	near(t, "p50", nearestRank(s, 0.5), 5)
	near(t, "p95", nearestRank(s, 0.95), 10)
	near(t, "p0", nearestRank(s, 0), 1)
	near(t, "empty", nearestRank(nil, 0.5), 0)
}
