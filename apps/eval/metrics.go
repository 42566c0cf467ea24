package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Judgments are one query's graded judgments, doc id -> score. A score of
// 1 or more is relevant with that gain; 0 or less is not relevant.
type Judgments map[string]int

// relevant counts the documents with a positive score.
func (j Judgments) relevant() int {
	n := 0
	for _, s := range j {
		if s > 0 {
			n++
		}
	}
	return n
}

// gain is the trec_eval gain of doc: its score when relevant, else 0.
func (j Judgments) gain(doc string) float64 {
	return float64(max(j[doc], 0))
}

// NDCG is trec_eval's ndcg_cut.k: gains are the graded scores as they are,
// discounted by 1/log2(rank+1), divided by the DCG of the ideal ranking of
// all judged documents (not only those retrieved). 0 when nothing is
// relevant.
func NDCG(ranking []string, j Judgments, k int) float64 {
	var dcg float64
	for i, d := range ranking[:min(k, len(ranking))] {
		dcg += j.gain(d) / math.Log2(float64(i+2))
	}
	gains := make([]float64, 0, len(j))
	for d := range j {
		if g := j.gain(d); g > 0 {
			gains = append(gains, g)
		}
	}
	slices.SortFunc(gains, func(a, b float64) int { return cmp.Compare(b, a) })
	var ideal float64
	for i, g := range gains[:min(k, len(gains))] {
		ideal += g / math.Log2(float64(i+2))
	}
	if ideal == 0 {
		return 0
	}
	return dcg / ideal
}

// Recall is the share of the query's relevant documents found in the top
// k. 0 when nothing is relevant (trec_eval's convention).
func Recall(ranking []string, j Judgments, k int) float64 {
	rel := j.relevant()
	if rel == 0 {
		return 0
	}
	found := 0
	for _, d := range ranking[:min(k, len(ranking))] {
		if j[d] > 0 {
			found++
		}
	}
	return float64(found) / float64(rel)
}

// ReciprocalRank is 1/rank of the first relevant document within the top
// k, 0 if there is none.
func ReciprocalRank(ranking []string, j Judgments, k int) float64 {
	for i, d := range ranking[:min(k, len(ranking))] {
		if j[d] > 0 {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// Row is one ranking's figures, each the mean over the judged queries.
type Row struct {
	Name      string  `json:"name"`
	NDCG10    float64 `json:"ndcg@10"`
	Recall10  float64 `json:"recall@10"`
	Recall100 float64 `json:"recall@100"`
	MRR10     float64 `json:"mrr@10"`
	// Answered is the share of queries for which the list had any hit.
	Answered float64 `json:"answered"`
	n        int
}

// Add scores one query's ranking into the row's running sums.
func (r *Row) Add(ranking []string, j Judgments) {
	r.NDCG10 += NDCG(ranking, j, 10)
	r.Recall10 += Recall(ranking, j, 10)
	r.Recall100 += Recall(ranking, j, 100)
	r.MRR10 += ReciprocalRank(ranking, j, 10)
	if len(ranking) > 0 {
		r.Answered++
	}
	r.n++
}

// Mean turns the sums into means over the queries added.
func (r *Row) Mean() {
	if r.n == 0 {
		return
	}
	n := float64(r.n)
	r.NDCG10 /= n
	r.Recall10 /= n
	r.Recall100 /= n
	r.MRR10 /= n
	r.Answered /= n
}

// RRF fuses rankings by plain Reciprocal Rank Fusion: a document scores
// sum 1/(k + rank) over the lists it is in (rank 1-based). Ties go to the
// document with the better single rank, then to the smaller id, so the
// result does not depend on map order.
func RRF(k float64, lists ...[]string) []string {
	score := map[string]float64{}
	best := map[string]int{}
	var order []string
	for _, l := range lists {
		for i, d := range l {
			if _, ok := score[d]; !ok {
				order = append(order, d)
				best[d] = i + 1
			}
			score[d] += 1 / (k + float64(i+1))
			best[d] = min(best[d], i+1)
		}
	}
	slices.SortFunc(order, func(a, b string) int {
		return cmp.Or(cmp.Compare(score[b], score[a]), cmp.Compare(best[a], best[b]), cmp.Compare(a, b))
	})
	return order
}

// Latency is the distribution of one timed call.
type Latency struct {
	Queries int     `json:"queries"`
	P50     float64 `json:"p50Ms"`
	P95     float64 `json:"p95Ms"`
	P99     float64 `json:"p99Ms"`
}

// Percentiles summarises durations with the nearest-rank percentile (the
// smallest value with at least p of the samples at or below it).
func Percentiles(d []time.Duration) Latency {
	ms := make([]float64, len(d))
	for i, x := range d {
		ms[i] = float64(x) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	return Latency{Queries: len(ms), P50: nearestRank(ms, 0.50), P95: nearestRank(ms, 0.95), P99: nearestRank(ms, 0.99)}
}

// nearestRank is the smallest value of sorted with at least p of the
// values at or below it; 0 for no values.
func nearestRank(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
