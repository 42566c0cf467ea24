package knowledge

import (
	"math"
	"testing"

	"github.com/google/uuid"
)

// fuse: the evidence of each list weighs its RRF term; no evidence, no hit.
func TestFuseCalibratesAndGates(t *testing.T) {
	t.Parallel()
	cal := VectorCalibration{Floor: 0.2, Full: 0.6}
	mass := queryMass{Body: 4, Title: 2}
	id := func(b byte) uuid.UUID { return uuid.UUID{b} }
	cands := []candidate{
		// Everything, at full evidence: plain RRF of ranks 1, 1, 1 = 1.
		{ID: id(1), VectorRank: 1, Cosine: 0.9, FullTextRank: 1, BM25: 8, TitleRank: 1, TitleContains: true},
		// Vector only, under the floor: no evidence, leaves the list, no hit.
		{ID: id(2), VectorRank: 2, Cosine: 0.15},
		// Full text only, half the query's idf mass, rank 2.
		{ID: id(3), FullTextRank: 2, BM25: 2},
		// Title only by words: a quarter of the title mass; vector at half.
		{ID: id(4), VectorRank: 3, Cosine: 0.4, TitleRank: 2, TitleBM25: 0.5},
	}
	got := fuse(cands, mass, cal, 0)
	want := map[uuid.UUID]float64{
		id(1): 1,
		id(3): 0.5 * rrfTerm(2) / 3,
		id(4): (0.5*rrfTerm(3) + 0.25*rrfTerm(2)) / 3,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d hits, want %d: %+v", len(got), len(want), got)
	}
	for i, h := range got {
		if math.Abs(h.Score-want[h.ID]) > 1e-12 {
			t.Errorf("hit %v: score %v, want %v", h.ID, h.Score, want[h.ID])
		}
		if i > 0 && h.Score > got[i-1].Score {
			t.Errorf("not best first: %+v", got)
		}
	}
	if got[0].ID != id(1) || got[0].Score != RRFScore(1, 1, 1) {
		t.Errorf("full evidence must be plain RRF: %+v", got[0])
	}
	// minScore drops what is under it, keeps what is at or above it.
	if g := fuse(cands, mass, cal, want[id(4)]); len(g) != 2 {
		t.Errorf("minScore %v kept %d hits, want 2", want[id(4)], len(g))
	}
	// A query none of whose words the org has (mass 0) gives no lexical evidence.
	if g := fuse([]candidate{{ID: id(5), FullTextRank: 1, BM25: 3}}, queryMass{}, cal, 0); len(g) != 0 {
		t.Errorf("no idf mass, yet hits: %+v", g)
	}
}
