package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// BoundCheck is what the per-term bound of the full-text list costs:
// search reads at most knowledge.PerTermPostings postings of each query
// term (best first by impact), scaled by the term's idf relative to the
// query's most informative term, at least knowledge.MinTermPostings, which
// keeps common words cheap but may
// miss an entry whose score a common term would have carried. The check
// runs every judged query again on a Service reading every posting (the
// exact reference) and compares.
type BoundCheck struct {
	PerTermPostings int       `json:"perTermPostings"`
	MinTermPostings int       `json:"minTermPostings"`
	FullText        BoundPair `json:"fullText"`
	Fused           BoundPair `json:"fused"`
	// Terms says whether the bound could bite at all on this collection.
	Terms   TermsOverBound `json:"terms"`
	Seconds float64        `json:"seconds"`
}

// BoundPair is one list scored bounded (the main scoring) and exact.
type BoundPair struct {
	Bounded Row `json:"bounded"`
	Exact   Row `json:"exact"`
	// SameTop10 is the share of queries whose top 10 (ids, in order) is
	// identical bounded and exact.
	SameTop10 float64 `json:"sameTop10"`
	same      int
}

// add scores one query's bounded and exact list.
func (p *BoundPair) add(bounded, exact []string, j Judgments) {
	p.Bounded.Add(bounded, j)
	p.Exact.Add(exact, j)
	if SameTop(bounded, exact, 10) {
		p.same++
	}
}

// mean turns the sums into means over n queries.
func (p *BoundPair) mean(n int) {
	p.Bounded.Mean()
	p.Exact.Mean()
	if n > 0 {
		p.SameTop10 = float64(p.same) / float64(n)
	}
}

// TermsOverBound counts the query terms search actually looks up (the
// query's analysed body terms, its MaxQueryTerms most informative) whose
// document frequency in the body or the title field exceeds the bound:
// only for those does the bounded read differ from the exact one.
type TermsOverBound struct {
	// QueryTerms counts (query, term) pairs looked up.
	QueryTerms int `json:"queryTerms"`
	// OverBound counts those read partly (df over the term's bound) in
	// either field.
	OverBound int `json:"overBound"`
	// Queries counts the queries with at least one such term.
	Queries int `json:"queries"`
	// MaxDF is the largest df of any term looked up.
	MaxDF int `json:"maxDf"`
}

// SameTop reports whether a and b have the same first k ids in the same
// order; a list with fewer than k ids matches only one just as short.
func SameTop(a, b []string, k int) bool {
	return slices.Equal(a[:min(k, len(a))], b[:min(k, len(b))])
}

// boundComparison accumulates the bounded-vs-exact comparison query by
// query, so its arithmetic is testable without a database.
type boundComparison struct {
	check BoundCheck
	n     int
}

func newBoundComparison() *boundComparison {
	return &boundComparison{check: BoundCheck{
		PerTermPostings: knowledge.PerTermPostings,
		MinTermPostings: knowledge.MinTermPostings,
		FullText:        BoundPair{Bounded: Row{Name: "full text, bounded"}, Exact: Row{Name: "full text, exact"}},
		Fused:           BoundPair{Bounded: Row{Name: "fused, bounded"}, Exact: Row{Name: "fused, exact"}},
	}}
}

// add scores one query's bounded and exact lists.
func (b *boundComparison) add(bounded, exact docLists, j Judgments) {
	b.check.FullText.add(bounded.FullText, exact.FullText, j)
	b.check.Fused.add(bounded.Fused, exact.Fused, j)
	b.n++
}

// result turns the sums into the check's figures.
func (b *boundComparison) result() BoundCheck {
	out := b.check
	out.FullText.mean(b.n)
	out.Fused.mean(b.n)
	return out
}

// perTermCheck runs every judged query on exact, a Service on the same
// pool with the same options but unbounded postings, at the depth of the
// main scoring, and compares with bounded, the main scoring's lists.
func perTermCheck(ctx context.Context, exact *knowledge.Service, c knowledge.Caller, ds *Dataset, queries []Query,
	docOf map[uuid.UUID]string, depth int, bounded []docLists) (*BoundCheck, error) {
	start := time.Now()
	comp := newBoundComparison()
	for i, q := range queries {
		l, err := searchLists(ctx, exact, c, knowledge.SearchInput{Query: q.Text}, depth, docOf)
		if err != nil {
			return nil, fmt.Errorf("exact read, query %s: %w", q.ID, err)
		}
		comp.add(bounded[i], l, ds.Qrels[q.ID])
	}
	out := comp.result()
	out.Seconds = time.Since(start).Seconds()
	return &out, nil
}

// termsOverBound counts the looked-up query terms over the bound.
func termsOverBound(ctx context.Context, svc *knowledge.Service, org uuid.UUID, queries []Query) (TermsOverBound, error) {
	texts := make([]string, len(queries))
	for i, q := range queries {
		texts[i] = queryText(q.Text)
	}
	t, err := knowledge.CountTermsOverBound(ctx, svc, org, texts)
	return TermsOverBound(t), err
}
