package rank

import (
	"math"
	"testing"

	"github.com/google/uuid"
)

// The reranker's evidence lifts the hit it judges to answer the query as
// a fourth list would; no hit's score goes down; hits not sent keep theirs.
func TestRerank(t *testing.T) {
	t.Parallel()
	cal := Calibration{Floor: 0.1, Full: 0.9}
	id := func(b byte) uuid.UUID { return uuid.UUID{b} }
	mass := QueryIDF{Body: 4}
	cands := []Candidate{
		{ID: id(1), FullTextRank: 1, Coverage: 4},   // full evidence in one list: 0.625
		{ID: id(2), FullTextRank: 2, Coverage: 1},   // a quarter of it
		{ID: id(3), FullTextRank: 3, Coverage: 0.8}, // less, and not sent to the reranker
	}
	fused := Fuse(cands, mass, cal, 0)
	before := map[uuid.UUID]float64{}
	for _, h := range fused {
		before[h.ID] = h.Score
	}
	// The reranker is sure of id 2, unsure of id 1.
	got := Rerank(fused, []float64{0.1, 0.9}, cal)
	if got[0].ID != id(2) || got[1].ID != id(1) || got[2].ID != id(3) {
		t.Fatalf("order %v %v %v, want 2, 1, 3", got[0].ID, got[1].ID, got[2].ID)
	}
	// id 2: its reranker part leads (evidence 1 at place 1), its full-text part agrees.
	want := (1 + agreement*0.25*term(2)) / (1 + 2*agreement)
	if math.Abs(got[0].Score-want) > 1e-12 || got[0].RerankRank != 1 || got[0].ERerank != 1 {
		t.Errorf("id 2: %+v, want score %v", got[0], want)
	}
	for _, h := range got {
		if h.Score < before[h.ID] {
			t.Errorf("%v: reranked %v below fused %v", h.ID, h.Score, before[h.ID])
		}
	}
	if got[1].Score != before[id(1)] || got[2].Score != before[id(3)] || got[2].RerankRank != 0 {
		t.Errorf("an unsure reranker, or none, must leave the score: %+v", got)
	}
}

// With rerankRefRank candidates or more, the reranker's score at that
// place is the query's floor: a reranker that scores everything alike
// gives no evidence.
func TestRerankCrowdFloor(t *testing.T) {
	t.Parallel()
	cal := Calibration{Floor: 0.1, Full: 0.9}
	var hits []Fused
	var scores []float64
	for i := range 30 {
		hits = append(hits, Fused{Candidate: Candidate{ID: uuid.UUID{byte(i + 1)}, FullTextRank: i + 1}, EFullText: 0.5})
		hits[i].Score = combine(hits[i].parts())
		scores = append(scores, 0.60+float64(i%3)*0.01) // a narrow band
	}
	Rerank(hits, scores, cal)
	for _, h := range hits {
		if h.ERerank > 0.0126 {
			t.Errorf("%v: evidence %v from a reranker scoring all within 0.02", h.ID, h.ERerank)
		}
	}
}
