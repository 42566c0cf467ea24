package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// GateThresholds are the minScores the gate study tabulates; the default
// (knowledge.DefaultMinScore) is among them.
var GateThresholds = []float64{0, 0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5}

const (
	// gateLimit is the number of hits Search answers by default.
	gateLimit = 10
	// gateDepth is the depth Search itself ranks a limit of 10 with
	// (knowledge's candidateCount: 4 x limit, at least 40). With it, the
	// fused list at minScore 0 cut to the hits >= t and to 10 is exactly
	// what Search answers with minScore t; a shallower list would score
	// some hits lower than Search does (ranks past it count for nothing).
	gateDepth = 40
)

// GateQuery is one query's fused scores at minScore 0, best first, cut at
// gateLimit, and whether its first hit is relevant.
type GateQuery struct {
	Scores      []float64
	TopRelevant bool
	// Unanswerable: nothing relevant to the query is in the store.
	Unanswerable bool
}

// top is the query's best fused score, 0 when nothing was found.
func (q GateQuery) top() float64 {
	if len(q.Scores) == 0 {
		return 0
	}
	return q.Scores[0]
}

// answered reports whether Search with minScore t answers the query.
// Fusion never answers a hit scoring 0, whatever the threshold.
func (q GateQuery) answered(t float64) bool {
	return q.top() > 0 && q.top() >= t
}

// hits counts the hits Search with minScore t answers.
func (q GateQuery) hits(t float64) int {
	n := 0
	for _, s := range q.Scores {
		if s > 0 && s >= t {
			n++
		}
	}
	return n
}

// GateRow is what one minScore would do to the real and the nonsense
// queries.
type GateRow struct {
	MinScore float64 `json:"minScore"`
	Default  bool    `json:"default,omitempty"`
	// Answered is the share of real queries with at least one hit.
	Answered float64 `json:"answered"`
	// PrecisionAt1 is the share of answered real queries whose first hit
	// is relevant (0 when none is answered).
	PrecisionAt1 float64 `json:"precision@1"`
	// MeanHits is the mean number of hits per real query, of at most 10,
	// unanswered queries counting 0.
	MeanHits         float64 `json:"meanHits"`
	NonsenseAnswered int     `json:"nonsenseAnswered"`
}

// GateStudy is the evidence for the default relevance gate: how each
// threshold trades real queries answered against nonsense answered, and
// how the best fused scores of both kinds of query are spread.
type GateStudy struct {
	Depth    int       `json:"depth"`
	Queries  int       `json:"queries"`
	Nonsense int       `json:"nonsenseQueries"`
	Rows     []GateRow `json:"rows"`
	// Top-1 fused score: the largest of the nonsense queries, the 10th and
	// 50th percentiles (nearest rank) of the real ones (0 when unanswered).
	NonsenseTop1Max float64 `json:"nonsenseTop1Max"`
	RealTop1P10     float64 `json:"realTop1P10"`
	RealTop1P50     float64 `json:"realTop1P50"`
	// RealBelowNonsense is the share of real queries whose best score is
	// at most the best nonsense score: those no threshold can answer
	// without also answering a nonsense query.
	RealBelowNonsense float64 `json:"realAtOrBelowNonsenseMax"`
	Seconds           float64 `json:"seconds"`
	Bands             Bands   `json:"scoreBands"`
}

// Bands is what the documented score bands (knowledge.ScoreStrong,
// knowledge.ScoreWeak) are worth on the collection: how the scores of
// right first hits spread, how often a first hit at or above ScoreStrong
// is relevant, and, when the collection has unanswerable queries, how
// well the top score tells them apart from the others.
type Bands struct {
	Strong float64 `json:"strong"`
	Weak   float64 `json:"weak"`
	// Relevant first hits: how many, their score's 5th, 10th and 50th
	// percentiles, and the share of them under Weak.
	RelevantTop1   int     `json:"relevantTop1"`
	RelevantP5     float64 `json:"relevantTop1P5"`
	RelevantP10    float64 `json:"relevantTop1P10"`
	RelevantP50    float64 `json:"relevantTop1P50"`
	RelevantUnderW float64 `json:"relevantTop1UnderWeak"`
	// First hits at or above Strong: how many, and the share relevant.
	StrongTop1     int     `json:"strongTop1"`
	StrongRelevant float64 `json:"strongTop1Relevant"`
	// First hits between Weak and Strong, and under Weak: how many, and
	// the share relevant.
	MidTop1      int     `json:"midTop1"`
	MidRelevant  float64 `json:"midTop1Relevant"`
	WeakTop1     int     `json:"weakTop1"`
	WeakRelevant float64 `json:"weakTop1Relevant"`
	// Unanswerable queries: how many, their top score's 50th and 90th
	// percentiles, and the AUC of the top score (answerable above
	// unanswerable; 0.5 is chance), absent without such queries.
	Unanswerable    int      `json:"unanswerable,omitempty"`
	UnanswerableP50 float64  `json:"unanswerableTop1P50,omitempty"`
	UnanswerableP90 float64  `json:"unanswerableTop1P90,omitempty"`
	AUC             *float64 `json:"auc,omitempty"`
}

// bands measures the score bands over the judged queries.
func bands(all []GateQuery) Bands {
	b := Bands{Strong: knowledge.ScoreStrong, Weak: knowledge.ScoreWeak}
	var rel, ans, unans []float64
	strongRight, midRight, weakRight := 0, 0, 0
	for _, q := range all {
		top := q.top()
		if q.Unanswerable {
			unans = append(unans, top)
			continue
		}
		ans = append(ans, top)
		if q.TopRelevant {
			rel = append(rel, top)
			if top < b.Weak {
				b.RelevantUnderW++
			}
		}
		switch {
		case len(q.Scores) == 0:
		case top >= b.Strong:
			b.StrongTop1++
			if q.TopRelevant {
				strongRight++
			}
		case top < b.Weak:
			b.WeakTop1++
			if q.TopRelevant {
				weakRight++
			}
		default:
			b.MidTop1++
			if q.TopRelevant {
				midRight++
			}
		}
	}
	slices.Sort(rel)
	b.RelevantTop1 = len(rel)
	b.RelevantP5, b.RelevantP10, b.RelevantP50 = nearestRank(rel, 0.05), nearestRank(rel, 0.10), nearestRank(rel, 0.50)
	if len(rel) > 0 {
		b.RelevantUnderW /= float64(len(rel))
	}
	if b.StrongTop1 > 0 {
		b.StrongRelevant = float64(strongRight) / float64(b.StrongTop1)
	}
	if b.MidTop1 > 0 {
		b.MidRelevant = float64(midRight) / float64(b.MidTop1)
	}
	if b.WeakTop1 > 0 {
		b.WeakRelevant = float64(weakRight) / float64(b.WeakTop1)
	}
	if len(unans) > 0 && len(ans) > 0 {
		slices.Sort(unans)
		b.Unanswerable = len(unans)
		b.UnanswerableP50, b.UnanswerableP90 = nearestRank(unans, 0.5), nearestRank(unans, 0.9)
		a := AUC(ans, unans)
		b.AUC = &a
	}
	return b
}

// AUC is the probability that a positive's score is above a negative's
// (ties count half): the area under the ROC curve of the score.
func AUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return 0.5
	}
	var s float64
	for _, p := range pos {
		for _, n := range neg {
			switch {
			case p > n:
				s++
			case p == n:
				s += 0.5
			}
		}
	}
	return s / float64(len(pos)*len(neg))
}

// Gate tabulates the thresholds over the real and the nonsense queries.
func Gate(real, nonsense []GateQuery, thresholds []float64) GateStudy {
	st := GateStudy{Depth: gateDepth, Queries: len(real), Nonsense: len(nonsense)}
	for _, t := range thresholds {
		st.Rows = append(st.Rows, gateRow(real, nonsense, t))
	}
	for _, q := range nonsense {
		st.NonsenseTop1Max = math.Max(st.NonsenseTop1Max, q.top())
	}
	tops := make([]float64, len(real))
	below := 0
	for i, q := range real {
		tops[i] = q.top()
		if len(nonsense) > 0 && tops[i] <= st.NonsenseTop1Max {
			below++
		}
	}
	slices.Sort(tops)
	st.RealTop1P10, st.RealTop1P50 = nearestRank(tops, 0.10), nearestRank(tops, 0.50)
	if len(real) > 0 {
		st.RealBelowNonsense = float64(below) / float64(len(real))
	}
	return st
}

// gateRow is one threshold's row.
func gateRow(real, nonsense []GateQuery, t float64) GateRow {
	row := GateRow{MinScore: t, Default: t == knowledge.DefaultMinScore}
	answered, right, hits := 0, 0, 0
	for _, q := range real {
		hits += q.hits(t)
		if q.answered(t) {
			answered++
			if q.TopRelevant {
				right++
			}
		}
	}
	for _, q := range nonsense {
		if q.answered(t) {
			row.NonsenseAnswered++
		}
	}
	if len(real) > 0 {
		row.Answered = float64(answered) / float64(len(real))
		row.MeanHits = float64(hits) / float64(len(real))
	}
	if answered > 0 {
		row.PrecisionAt1 = float64(right) / float64(answered)
	}
	return row
}

// gateStudy runs every judged query and the nonsense queries through
// SearchLists with minScore 0 at Search's own depth, so every threshold
// can be applied afterwards to the same answers.
func gateStudy(ctx context.Context, svc *knowledge.Service, c knowledge.Caller, ds *Dataset, queries []Query, docOf map[uuid.UUID]string) (*GateStudy, error) {
	start := time.Now()
	zero := 0.0
	run := func(text string) (GateQuery, []string, error) {
		l, err := searchLists(ctx, svc, c, knowledge.SearchInput{Query: text, MinScore: &zero}, gateDepth, docOf)
		n := min(gateLimit, len(l.Scores))
		return GateQuery{Scores: l.Scores[:n]}, l.Fused[:n], err
	}
	real := make([]GateQuery, len(queries))
	for i, q := range queries {
		g, docs, err := run(q.Text)
		if err != nil {
			return nil, fmt.Errorf("gate, query %s: %w", q.ID, err)
		}
		g.TopRelevant = len(docs) > 0 && ds.Qrels[q.ID][docs[0]] > 0
		g.Unanswerable = ds.Unanswerable[q.ID]
		real[i] = g
	}
	answerable := slices.DeleteFunc(slices.Clone(real), func(q GateQuery) bool { return q.Unanswerable })
	var nonsense []GateQuery
	for _, q := range NonsenseQueries(nonsenseN, nonsenseSeed) {
		g, _, err := run(q)
		if err != nil {
			return nil, fmt.Errorf("gate, search %q: %w", q, err)
		}
		nonsense = append(nonsense, g)
	}
	st := Gate(answerable, nonsense, GateThresholds)
	st.Bands = bands(real)
	st.Seconds = time.Since(start).Seconds()
	return &st, nil
}
