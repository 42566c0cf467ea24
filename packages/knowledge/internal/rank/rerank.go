package rank

import (
	"cmp"
	"slices"
)

// rerankRefRank: the reranker's score at this place among the candidates
// it scored is the query's own floor (its crowd), when it scored that
// many: the vector list's rule (vectorRefRank), for the same reason. A
// weak reranker, such as a bi-encoder standing in for a cross-encoder,
// scores every candidate of a query in a narrow band, and only how far a
// candidate stands out of it is evidence; a cross-encoder scores most
// candidates near 0, under its floor, so its crowd changes nothing.
const rerankRefRank = 20

// Rerank fuses a reranker's scores into the first len(scores) hits
// (scores[i] is hits[i]'s) and returns every hit best first.
//
// The reranker is a fourth list: its evidence is its score on the model's
// scale (cal: floor, full and the crowd above), its part that evidence
// times the rank factor of its place in the reranker's order, and a hit's
// score is the same formula as fusion's over its three strongest parts:
// the strongest leads, the next two add agreement of theirs. So a score
// keeps its meaning (one list at full evidence 0.625, every part at full
// evidence 1), the reranker lifts a hit it judges to answer the query as
// far as a list at that evidence would, and a hit it judges unrelated
// keeps what the lists gave it: a reranked score is never lower than the
// fused one. Hits past len(scores) keep their score.
func Rerank(hits []Fused, scores []float64, cal Calibration) []Fused {
	n := min(len(scores), len(hits))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	if n >= rerankRefRank {
		cal.crowd = scores[order[rerankRefRank-1]]
	}
	for place, i := range order {
		h := &hits[i]
		h.RerankRank, h.Rerank = place+1, scores[i]
		h.ERerank = cal.Evidence(scores[i])
		h.Score = max(h.Score, combineTop(h.parts(), h.ERerank*term(h.RerankRank)))
	}
	slices.SortFunc(hits, func(a, b Fused) int { return BestFirst(a.Score, a.ID, b.Score, b.ID) })
	return hits
}

// parts are a fused hit's parts in each list, as Fuse computed them.
func (h Fused) parts() [fusedLists]float64 {
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
	return x
}

// combineTop is combine over the three strongest of the lists' parts and
// one more part.
func combineTop(x [fusedLists]float64, more float64) float64 {
	slices.SortFunc(x[:], func(a, b float64) int { return cmp.Compare(b, a) })
	if more > x[fusedLists-1] {
		x[fusedLists-1] = more
	}
	return combine(x)
}
