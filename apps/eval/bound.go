package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

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

// termsOverBoundSQL mirrors the term selection and the read bound of
// search_candidates.sql (picked): a query's distinct body terms as the
// org's text search configuration analyses them, its MaxQueryTerms with the
// highest body idf (lowest body df, then by term), each looked up in the
// body and the title field, and read PerTermPostings deep scaled by its idf
// relative to the query's most informative term in that field, at least
// MinTermPostings. It reads only the term statistics, so it is cheap.
const termsOverBoundSQL = `
WITH st AS (SELECT config, docs::float8 AS docs FROM knowledge_search_stats WHERE org_id = $1),
q AS (SELECT u.i, u.text FROM unnest($2::text[]) WITH ORDINALITY AS u (text, i)),
terms AS (
    SELECT DISTINCT q.i, a.term
    FROM q CROSS JOIN st
    CROSS JOIN LATERAL knowledge_terms(st.config, '', q.text) AS a (field, term, tf, len)
    WHERE a.field = 'b'
),
dfs AS (
    SELECT t.i, t.term, coalesce(b.df, 0) AS df_b, coalesce(tt.df, 0) AS df_t,
           ln(1 + (st.docs - coalesce(b.df, 0) + 0.5) / (coalesce(b.df, 0) + 0.5)) AS idf_b,
           ln(1 + (st.docs - coalesce(tt.df, 0) + 0.5) / (coalesce(tt.df, 0) + 0.5)) AS idf_t
    FROM terms t CROSS JOIN st
    LEFT JOIN knowledge_term_stats b ON b.org_id = $1 AND b.field = 'b' AND b.term = t.term
    LEFT JOIN knowledge_term_stats tt ON tt.org_id = $1 AND tt.field = 't' AND tt.term = t.term
),
picked AS (
    SELECT d.*, row_number() OVER (PARTITION BY d.i ORDER BY d.df_b, d.term) AS pick FROM dfs d
),
reads AS (
    SELECT p.*,
           greatest($5::int, ceil($3::int * least(1, p.idf_b / coalesce(max(p.idf_b) FILTER (WHERE p.df_b > 0) OVER (PARTITION BY p.i), p.idf_b)))) AS reads_b,
           greatest($5::int, ceil($3::int * least(1, p.idf_t / coalesce(max(p.idf_t) FILTER (WHERE p.df_t > 0) OVER (PARTITION BY p.i), p.idf_t)))) AS reads_t
    FROM picked p WHERE p.pick <= $4
)
SELECT count(*)::int,
       count(*) FILTER (WHERE df_b > reads_b OR df_t > reads_t)::int,
       count(DISTINCT i) FILTER (WHERE df_b > reads_b OR df_t > reads_t)::int,
       coalesce(max(greatest(df_b, df_t)), 0)::int
FROM reads`

// termsOverBound counts the looked-up query terms over the bound.
func termsOverBound(ctx context.Context, pool *pgxpool.Pool, org uuid.UUID, queries []Query) (TermsOverBound, error) {
	texts := make([]string, len(queries))
	for i, q := range queries {
		texts[i] = queryText(q.Text)
	}
	var t TermsOverBound
	err := pool.QueryRow(ctx, termsOverBoundSQL, org, texts, knowledge.PerTermPostings, knowledge.MaxQueryTerms, knowledge.MinTermPostings).
		Scan(&t.QueryTerms, &t.OverBound, &t.Queries, &t.MaxDF)
	return t, err
}
