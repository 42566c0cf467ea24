// Package rank is the ranking maths of knowledge's search: three lists
// fused by Reciprocal Rank Fusion (k = 60), each hit's contribution
// weighted by the evidence of the list that found it, led by its strongest
// list (docs/knowledge.md, "Ranking and scores").
//
// Plain RRF scores a hit by its ranks alone: the best vector hit of a query
// that matches nothing still ranks first and scores the same as the best hit
// of a query that matches perfectly, and hits that two lists rank low
// outrank the one entry a single list found with certainty. Here each list
// gives a calibrated evidence e in [0, 1] from its raw signal, a hit's part
// in list l is x(l) = e(l) * (k + 1) / (k + rank(l)), and with its parts
// sorted x1 >= x2 >= x3
//
//	score = (x1 + agreement * (x2 + x3)) / (1 + 2 * agreement)
//
// so the strongest list leads and every other list that agrees adds a
// share (agreement = 0.3). With e = 1 everywhere this is RRF normalised to
// (0, 1]: a hit at full evidence in all three lists at rank 1 scores 1, one
// at full evidence in a single list scores 1 / 1.6 = 0.625. The rank factor
// decays slowly (rank 10: 0.87, rank 40: 0.61), so a score is mostly
// evidence. Summing the parts equally instead let many entries matching
// the query's common words in two lists outrank the one entry holding its
// rare ones (a report holding every query word ranked 21st of 21:
// knowledge's TestSearchLongEntryFoundByItsBestPassage), and let a weak
// model's vector list pull a strong full-text list down. The evidence of
// each list:
//
//   - full text: coverage / the query's idf mass, capped at 1. Coverage is
//     BM25 without length normalisation (b = 0): a query term held once
//     adds its idf, more often a little more. The list ranks by BM25; its
//     evidence says how much of the query the entry holds, not how long the
//     entry is (a passage of 300 words holding every query word once had a
//     third of the evidence of a ten-word note holding two of them, against
//     an org of notes). The mass is the sum of the query terms' idf, at most
//     that of rareTermsFull terms held by a single entry of the org: an
//     entry holding every word of a short query scores 1, as does one
//     holding five of a long query's rarest words (a paragraph as query:
//     without the cap its mass was ten times a question's, and no entry gave
//     the full-text list more than a sliver of evidence). One holding only
//     the query's common words scores little, whatever the org's size,
//     because idf is relative to it. A query word the org has never seen
//     keeps its (high) idf in the mass: a query about something the org does
//     not know scores low everywhere. A long entry's are its best passage's.
//   - title: 1 when the title holds the whole query (ILIKE), else coverage
//     over titles / the query's idf mass over titles (capped alike).
//   - vector: (cosine - floor) / (full - model floor), clamped to [0, 1],
//     with the embedding model's floor (what unrelated texts score) and full
//     point (Calibration), and a floor that is the higher of the
//     model's and the cosine of this query's vectorRefRank-th nearest entry:
//     how near the query sits to everything (its crowd). A long query, or a
//     weak model, puts many entries at similar cosines; only how far a hit
//     stands out of that crowd, on the model's scale, is evidence. Hits at
//     or below the floor leave the list. A search of the vector list alone
//     has no crowd floor (FuseByMeaning).
//
// A query with nothing relevant comes back empty because nothing gives
// evidence for it: no query word is in the org's index (or only stop
// words), and every vector hit is under the model's floor, so every score
// is 0 and no hit is answered. On top of that, hits below the caller's
// minScore, or DefaultMinScore when none is given, are dropped: a margin
// against hits with almost no evidence (a single common word). apps/eval
// measures both, and the score bands of ScoreStrong and ScoreWeak.
package rank

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"
)

const (
	// K is the k of RRF: a hit ranked r in a list contributes 1/(k+r).
	K = 60
	// fusedLists is how many lists are fused.
	fusedLists = 3
	// agreement is the share of its part that a list adds to a hit that
	// a stronger list leads (see the formula above).
	agreement = 0.3
	// rareTermsFull caps the query's idf mass at that of this many terms
	// held by a single entry of the org (full-text and title evidence).
	rareTermsFull = 5
	// LongQueryTerms: a query of more body terms is a paragraph, not a
	// question. Its title evidence is not capped (fuse): a title is a
	// handful of words, and holding five of a paragraph's rarest words
	// made titles that share its setting, not its subject, full evidence
	// (the long-queries variant of apps/eval lost 0.02 nDCG@10 to them).
	LongQueryTerms = 16
	// vectorRefRank: the cosine of the query's vectorRefRank-th nearest
	// entry is its own floor, when its list is that long.
	vectorRefRank = 20

	// BM25K1 and BM25B are BM25's term-frequency saturation and length
	// normalisation: Anserini's values for BEIR (and close to Lucene's
	// defaults, 1.2 and 0.75): short knowledge entries should not be
	// penalised much for length.
	BM25K1 = 0.9
	BM25B  = 0.4

	// DefaultMinScore is the minScore of a search that gives none: hits
	// with less evidence are not answered at all. On NFCorpus every gate
	// from 0 to 0.10 answers the same real queries at the same precision
	// (apps/eval); 0.05 is half of that safe range, a margin for collections
	// where single common words give weak partial matches.
	DefaultMinScore = 0.05

	// ScoreStrong and ScoreWeak are the bands of a score an agent reads
	// (docs/knowledge.md, "Ranking and scores", with the figures apps/eval
	// measures): at or above ScoreStrong a hit answers the query (full
	// evidence in one list, or strong evidence in several); under
	// ScoreWeak it shares only some words or a vague likeness with it.
	ScoreStrong = 0.5
	ScoreWeak   = 0.2
)

// Calibration maps a cosine similarity of the embedding model to
// evidence: Floor is what unrelated texts typically score (evidence 0; such
// hits leave the vector list), Full what a close paraphrase scores
// (evidence 1).
type Calibration struct {
	Floor float64
	Full  float64
	// crowd is the cosine of the query's vectorRefRank-th hit (Fuse).
	crowd float64
}

// Evidence is (cosine - floor) / (full - floor) in [0, 1], where floor is
// the higher of the model's and the query's crowd: the model's range is
// the scale, so entries barely above a crowd near the full point (a long
// query, a weak model) get little evidence, not the whole range.
func (c Calibration) Evidence(cosine float64) float64 {
	if c.Full <= c.Floor {
		return Clamp01(cosine)
	}
	return Clamp01((cosine - max(c.Floor, c.crowd)) / (c.Full - c.Floor))
}

// Clamp01 is x within [0, 1] (0 for NaN).
func Clamp01(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return math.Min(1, math.Max(0, x))
}

// RRFScore is the fused score of one hit at full evidence in every list
// it is in, given its 1-based rank in each list (0: not in that list).
func RRFScore(ranks ...int) float64 {
	var x [fusedLists]float64
	for i, r := range ranks[:min(len(ranks), fusedLists)] {
		if r > 0 {
			x[i] = term(r)
		}
	}
	return combine(x)
}

// combine is the fused score of a hit's parts, one per list: the
// strongest leads, the others add agreement of theirs.
func combine(x [fusedLists]float64) float64 {
	slices.SortFunc(x[:], func(a, b float64) int { return cmp.Compare(b, a) })
	return (x[0] + agreement*(x[1]+x[2])) / (1 + 2*agreement)
}

// rrfTerm is the contribution of rank r normalised so that rank 1 gives 1.
func term(r int) float64 {
	return float64(K+1) / float64(K+r)
}

// Candidate is one entry found by at least one list of a search, with its
// rank (0: not in that list) and raw signal in each list: what fusion is
// given, and what an evaluation is shown of it (knowledge.SearchLists).
type Candidate struct {
	ID            uuid.UUID `json:"id"`
	VectorRank    int       `json:"vectorRank,omitempty"`
	FullTextRank  int       `json:"fullTextRank,omitempty"`
	TitleRank     int       `json:"titleRank,omitempty"`
	Cosine        float64   `json:"cosine,omitempty"`
	BM25          float64   `json:"bm25,omitempty"`
	TitleBM25     float64   `json:"titleBm25,omitempty"`
	TitleContains bool      `json:"titleContains,omitempty"`
	// Coverage and TitleCoverage: the BM25 sums with no length
	// normalisation (b = 0), the lexical evidence's numerators.
	Coverage      float64 `json:"coverage,omitempty"`
	TitleCoverage float64 `json:"titleCoverage,omitempty"`
}

// QueryIDF is the query's idf mass per field (the sum of its kept terms'
// idf in the org), the denominators of the lexical evidence, and the org's
// indexed entries, which cap them.
type QueryIDF struct {
	Body    float64 `json:"body"`
	Title   float64 `json:"title"`
	OrgDocs float64 `json:"orgDocs"`
	// Terms is how many of the query's body terms were looked up: past
	// LongQueryTerms the query is a paragraph, not a question (fuse).
	Terms int `json:"terms,omitempty"`
}

// capped is the mass of one field at most rareTermsFull terms held by a
// single entry of the org (BM25's idf of df 1 among OrgDocs entries).
func (m QueryIDF) capped(field float64) float64 {
	if m.OrgDocs < 1 {
		return field
	}
	return math.Min(field, rareTermsFull*math.Log(1+(m.OrgDocs-0.5)/1.5))
}

// Fused is a candidate with its evidence and fused score, and, once
// reranked (Rerank), the reranker's part.
type Fused struct {
	Candidate
	Score                      float64
	EVector, EFullText, ETitle float64
	// RerankRank is the 1-based place in the reranker's order (0: not
	// reranked), Rerank its raw score and ERerank the calibrated evidence.
	RerankRank      int
	Rerank, ERerank float64
}

// Fuse calibrates and fuses candidates, and returns those scoring at least
// minScore, best first (ties by id, so answers are stable). Vector hits
// at or below the query's floor leave the vector list; the ranks of the
// others do not change, as the list is ordered by cosine.
func Fuse(cands []Candidate, mass QueryIDF, cal Calibration, minScore float64) []Fused {
	cal.crowd = refCosine(cands)
	return fuse(cands, mass, cal, minScore)
}

// FuseByMeaning is Fuse for a search of the vector list alone (semantic
// mode): the floor is the model's alone, not the query's crowd. The crowd
// floor keeps a weak vector list from outweighing the lexical lists; with
// no lexical list it only hid the nearest entries where the query is near
// most of the org (a small org whose entries share its words: the 20th
// nearest sits among the nearest, and nothing stood out of it). The order
// is the list's, by cosine, either way.
func FuseByMeaning(cands []Candidate, mass QueryIDF, cal Calibration, minScore float64) []Fused {
	return fuse(cands, mass, cal, minScore)
}

// fuse is Fuse with cal's crowd already set (0: the model's floor alone).
func fuse(cands []Candidate, mass QueryIDF, cal Calibration, minScore float64) []Fused {
	body, title := mass.capped(mass.Body), mass.capped(mass.Title)
	if mass.Terms > LongQueryTerms {
		title = mass.Title
	}
	out := make([]Fused, 0, len(cands))
	for _, c := range cands {
		h := Fused{Candidate: c}
		if c.VectorRank > 0 {
			h.EVector = cal.Evidence(c.Cosine)
			if h.EVector == 0 {
				h.VectorRank = 0
			}
		}
		if c.FullTextRank > 0 && body > 0 {
			h.EFullText = Clamp01(c.Coverage / body)
		}
		if c.TitleRank > 0 {
			if c.TitleContains {
				h.ETitle = 1
			} else if title > 0 {
				h.ETitle = Clamp01(c.TitleCoverage / title)
			}
		}
		var x [fusedLists]float64
		if h.VectorRank > 0 {
			x[0] = h.EVector * term(h.VectorRank)
		}
		if h.FullTextRank > 0 {
			x[1] = h.EFullText * term(h.FullTextRank)
		}
		if h.TitleRank > 0 {
			x[2] = h.ETitle * term(h.TitleRank)
		}
		h.Score = combine(x)
		if h.Score <= 0 || h.Score < minScore {
			continue
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Fused) int { return BestFirst(a.Score, a.ID, b.Score, b.ID) })
	return out
}

// refCosine is the cosine of the vectorRefRank-th hit of the vector list,
// the query's own floor; 0 when the list is shorter.
func refCosine(cands []Candidate) float64 {
	for _, c := range cands {
		if c.VectorRank == vectorRefRank {
			return c.Cosine
		}
	}
	return 0
}

// BestFirst orders two scored entries: the higher score first, ties by id,
// so an order never depends on the order rows arrived in. Fusion's order,
// and the duplicate check's list of similar entries.
func BestFirst(aScore float64, aID uuid.UUID, bScore float64, bID uuid.UUID) int {
	if aScore != bScore {
		if aScore > bScore {
			return -1
		}
		return 1
	}
	return strings.Compare(aID.String(), bID.String())
}

// Depth is how many candidates each list brings to the fusion:
// four times the hits asked for, at least 40. Past a few times the limit a
// hit of one list can no longer beat hits several lists agree on, so deeper
// lists cost time and change nothing the caller sees. The floor keeps small
// limits from starving the fusion.
func Depth(limit int) int {
	return max(limit*4, 40)
}
