package rank

import (
	"math"
	"testing"

	"github.com/google/uuid"
)

// Fuse: the evidence of each list weighs its RRF term, the strongest list
// leads; no evidence, no hit.
func TestFuseCalibratesAndGates(t *testing.T) {
	t.Parallel()
	cal := Calibration{Floor: 0.2, Full: 0.6}
	mass := QueryIDF{Body: 4, Title: 2}
	id := func(b byte) uuid.UUID { return uuid.UUID{b} }
	cands := []Candidate{
		// Everything, at full evidence: plain RRF of ranks 1, 1, 1 = 1.
		{ID: id(1), VectorRank: 1, Cosine: 0.9, FullTextRank: 1, BM25: 8, Coverage: 8, TitleRank: 1, TitleContains: true},
		// Vector only, under the floor: no evidence, leaves the list, no hit.
		{ID: id(2), VectorRank: 2, Cosine: 0.15},
		// Full text only, half the query's idf mass, rank 2.
		{ID: id(3), FullTextRank: 2, BM25: 2, Coverage: 2},
		// Title only by words: a quarter of the title mass; vector at half.
		{ID: id(4), VectorRank: 3, Cosine: 0.4, TitleRank: 2, TitleBM25: 0.5, TitleCoverage: 0.5},
	}
	got := Fuse(cands, mass, cal, 0)
	want := map[uuid.UUID]float64{
		id(1): 1,
		id(3): 0.5 * term(2) / (1 + 2*agreement),
		id(4): (0.5*term(3) + agreement*0.25*term(2)) / (1 + 2*agreement),
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
	if g := Fuse(cands, mass, cal, want[id(4)]); len(g) != 2 {
		t.Errorf("minScore %v kept %d hits, want 2", want[id(4)], len(g))
	}
	// A query none of whose words the org has (mass 0) gives no lexical evidence.
	if g := Fuse([]Candidate{{ID: id(5), FullTextRank: 1, BM25: 3}}, QueryIDF{}, cal, 0); len(g) != 0 {
		t.Errorf("no idf mass, yet hits: %+v", g)
	}
}

// One entry holding the query's rare words, found by the full-text list
// alone, outranks many entries that two lists find by common words: the
// case that summing the lists' parts got wrong.
func TestFuseStrongSingleListBeatsWeakAgreement(t *testing.T) {
	t.Parallel()
	cal := Calibration{Floor: 0.2, Full: 0.75}
	// Two rare words (idf 2.7 each) and two common ones (idf 0.02).
	mass := QueryIDF{Body: 5.44, Title: 5.44, OrgDocs: 21}
	strong := uuid.UUID{0xff}
	cands := []Candidate{{ID: strong, FullTextRank: 1, BM25: 4.9, Coverage: 4.9, VectorRank: 21, Cosine: 0.25}}
	for i := range 20 {
		cands = append(cands, Candidate{ID: uuid.UUID{byte(i + 1)}, FullTextRank: i + 2, BM25: 0.056, Coverage: 0.056,
			VectorRank: i + 1, Cosine: 0.45 - float64(i)*0.002})
	}
	got := Fuse(cands, mass, cal, 0)
	if len(got) == 0 || got[0].ID != strong {
		t.Fatalf("the entry holding the rare words must lead: %+v", got)
	}
	if got[0].Score < ScoreStrong {
		t.Errorf("full evidence in one list scores %v, under ScoreStrong %v", got[0].Score, ScoreStrong)
	}
	for _, h := range got[1:] {
		if h.Score >= ScoreWeak {
			t.Errorf("a common-word match scores %v, at or above ScoreWeak %v", h.Score, ScoreWeak)
		}
	}
}

// The query's idf mass is capped at rareTermsFull terms of df 1, and only
// once the org has statistics.
func TestQueryMassCapped(t *testing.T) {
	t.Parallel()
	m := QueryIDF{Body: 200, Title: 2, OrgDocs: 3633}
	want := rareTermsFull * math.Log(1+(3633-0.5)/1.5)
	if got := m.capped(m.Body); math.Abs(got-want) > 1e-9 {
		t.Errorf("capped %v, want %v", got, want)
	}
	if got := m.capped(m.Title); got != 2 {
		t.Errorf("a mass under the cap changed: %v", got)
	}
	if got := (QueryIDF{Body: 200}).capped(200); got != 200 {
		t.Errorf("no statistics yet, yet capped: %v", got)
	}
}

// A paragraph's title evidence is its titles' coverage of the whole
// query's mass: a title holding more than rareTermsFull of its rarest
// words' worth is full evidence for a question, a fraction for a paragraph.
func TestFuseLongQueryTitleEvidenceUncapped(t *testing.T) {
	t.Parallel()
	cal := Calibration{Floor: 0.25, Full: 0.75}
	c := []Candidate{{ID: uuid.UUID{1}, TitleRank: 1, TitleBM25: 50, TitleCoverage: 50}}
	m := QueryIDF{Body: 200, Title: 200, OrgDocs: 3633, Terms: LongQueryTerms}
	if got := Fuse(c, m, cal, 0); len(got) != 1 || got[0].ETitle != 1 {
		t.Fatalf("a query of %d terms: title evidence %+v, want 1 (capped mass)", m.Terms, got)
	}
	m.Terms = LongQueryTerms + 1
	if got := Fuse(c, m, cal, 0); len(got) != 1 || math.Abs(got[0].ETitle-0.25) > 1e-9 {
		t.Fatalf("a query of %d terms: title evidence %+v, want 50 / 200", m.Terms, got)
	}
}

// The vector list's floor for a query is the cosine of its vectorRefRank-th
// hit when that is above the model's: hits at or below it leave the list.
func TestFuseVectorFloorOfTheQuery(t *testing.T) {
	t.Parallel()
	cal := Calibration{Floor: 0.2, Full: 0.9}
	var cands []Candidate
	for i := range 30 {
		cands = append(cands, Candidate{ID: uuid.UUID{byte(i + 1)}, VectorRank: i + 1, Cosine: 0.8 - float64(i)*0.01})
	}
	got := Fuse(cands, QueryIDF{}, cal, 0)
	if len(got) != vectorRefRank-1 {
		t.Fatalf("%d hits, want the %d above the query's own floor", len(got), vectorRefRank-1)
	}
	ref := cands[vectorRefRank-1].Cosine
	if want := (cands[0].Cosine - ref) / (cal.Full - cal.Floor) * term(1) / (1 + 2*agreement); math.Abs(got[0].Score-want) > 1e-12 {
		t.Errorf("best hit %v, want %v", got[0].Score, want)
	}
}

// A search of the vector list alone measures against the model's floor:
// every hit above it stays, even where the query's crowd is as near as the
// nearest hit (which Fuse answers with nothing).
func TestFuseByMeaningHasNoCrowdFloor(t *testing.T) {
	t.Parallel()
	cal := Calibration{Floor: 0.2, Full: 0.9}
	var cands []Candidate
	for i := range 21 {
		cos := 0.5
		if i == 20 {
			cos = 0.1 // under the model's floor
		}
		cands = append(cands, Candidate{ID: uuid.UUID{byte(i + 1)}, VectorRank: i + 1, Cosine: cos})
	}
	if got := Fuse(cands, QueryIDF{}, cal, 0); len(got) != 0 {
		t.Fatalf("Fuse: %d hits above a crowd as near as the nearest", len(got))
	}
	got := FuseByMeaning(cands, QueryIDF{}, cal, 0)
	if len(got) != 20 {
		t.Fatalf("FuseByMeaning: %d hits, want the 20 above the model's floor", len(got))
	}
	for i, h := range got {
		if h.VectorRank != i+1 {
			t.Fatalf("hit %d has vector rank %d: not the list's order", i, h.VectorRank)
		}
	}
	if want := (0.5 - cal.Floor) / (cal.Full - cal.Floor) * term(1) / (1 + 2*agreement); math.Abs(got[0].Score-want) > 1e-12 {
		t.Errorf("best hit %v, want %v", got[0].Score, want)
	}
}

// Each list brings four times the hits asked for, at least 40.
func TestDepth(t *testing.T) {
	t.Parallel()
	if n := Depth(1); n != 40 {
		t.Fatalf("Depth(1) = %d", n)
	}
	if n := Depth(50); n != 200 {
		t.Fatalf("Depth(50) = %d", n)
	}
}

func TestRRFScore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ranks []int
		want  float64
	}{
		{[]int{1, 1, 1}, 1},
		{[]int{1, 0, 0}, 1 / 1.6},
		{[]int{0, 1, 1}, 1.3 / 1.6},
		{[]int{2, 0, 0}, 61.0 / 62 / 1.6},
		{[]int{1, 2, 3}, (1 + 0.3*(61.0/62+61.0/63)) / 1.6},
		{[]int{40, 40, 40}, 61.0 / 100},
		{[]int{0, 0, 0}, 0},
	}
	for _, c := range cases {
		if got := RRFScore(c.ranks...); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("RRFScore(%v) = %v, want %v", c.ranks, got, c.want)
		}
	}
	// Rank 1 in one list beats rank 2 in it; another list agreeing adds;
	// the strongest list leads: two lists' rank 50 do not beat one's rank 1.
	if RRFScore(1, 0, 0) <= RRFScore(2, 0, 0) || RRFScore(1, 1, 0) <= RRFScore(1, 0, 0) ||
		RRFScore(0, 50, 50) >= RRFScore(1, 0, 0) {
		t.Error("RRF order broken")
	}
}
