package search

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
)

// The lexical index's reach, for an evaluation or an operator asking why a
// query found nothing or what the read bound costs: whether a query shares
// a word with the org's index, and how many of a search's query terms are
// read only partly. Both read the term statistics the index keeps, never
// the postings, so they are cheap. Like SearchLists they are functions
// taking the Searcher whose index they measure, not methods: neither an
// agent's nor an operator's call uses them, nor the worker.

// sharesAWordSQL asks whether a query has an analysed term the org's index
// holds, with the same analysis and configuration search uses.
// The query's terms are materialised first: inlined, the analysis was
// the inner side of a join over the org's every term (never analysed
// tables look one row long), and ran once per term: minutes per
// paragraph-long query.
const sharesAWordSQL = `
WITH q AS MATERIALIZED (
    SELECT a.term
    FROM knowledge_search_stats st
    CROSS JOIN LATERAL knowledge_terms(st.config, '', $2) AS a (field, term, tf, len)
    WHERE st.org_id = $1 AND a.field = 'b'
)
SELECT EXISTS (
    SELECT 1 FROM q
    CROSS JOIN LATERAL (SELECT 1 FROM knowledge_term_stats s
                        WHERE s.org_id = $1 AND s.field = 'b' AND s.term = q.term LIMIT 1) s)`

// SharesAWord tells whether query has a word (stop words dropped, stemmed,
// as the org's text search configuration analyses it) that the body of
// some indexed entry of org holds: by construction the full-text list
// answers every such query, so a miss points at a bug. False for an org
// with nothing indexed yet.
func SharesAWord(ctx context.Context, s *Searcher, org uuid.UUID, query string) (_ bool, err error) {
	defer data.WrapOp(&err, "knowledge.SharesAWord")
	var shares bool
	err = s.pool.QueryRow(ctx, sharesAWordSQL, org, query).Scan(&shares)
	return shares, err
}

// termsOverBoundSQL mirrors the term selection and the read bound of
// sql/search_candidates.sql (picked): a query's distinct body terms as the
// org's text search configuration analyses them, each weighing its
// frequency in the query times its idf, its MaxQueryTerms of the highest
// body weight (then by term), each looked up in the body and the title
// field, and read PerTermPostings deep scaled by its weight relative to
// the query's heaviest term in that field, at least MinTermPostings.
const termsOverBoundSQL = `
WITH st AS (SELECT config, docs::float8 AS docs FROM knowledge_search_stats WHERE org_id = $1),
q AS (SELECT u.i, u.text FROM unnest($2::text[]) WITH ORDINALITY AS u (text, i)),
terms AS (
    SELECT q.i, a.term, max(a.tf)::float8 AS qtf
    FROM q CROSS JOIN st
    CROSS JOIN LATERAL knowledge_terms(st.config, '', q.text) AS a (field, term, tf, len)
    WHERE a.field = 'b'
    GROUP BY q.i, a.term
),
dfs AS (
    SELECT t.i, t.term, coalesce(b.df, 0) AS df_b, coalesce(tt.df, 0) AS df_t,
           t.qtf * ln(1 + (st.docs - coalesce(b.df, 0) + 0.5) / (coalesce(b.df, 0) + 0.5)) AS idf_b,
           t.qtf * ln(1 + (st.docs - coalesce(tt.df, 0) + 0.5) / (coalesce(tt.df, 0) + 0.5)) AS idf_t
    FROM terms t CROSS JOIN st
    LEFT JOIN knowledge_term_stats b ON b.org_id = $1 AND b.field = 'b' AND b.term = t.term
    LEFT JOIN knowledge_term_stats tt ON tt.org_id = $1 AND tt.field = 't' AND tt.term = t.term
),
picked AS (
    SELECT d.*, row_number() OVER (PARTITION BY d.i ORDER BY d.idf_b DESC, d.term) AS pick FROM dfs d
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

// TermsOverBound counts the query terms searches look up (each query's
// analysed body terms, its MaxQueryTerms most informative) whose document
// frequency in the body or the title field exceeds the read bound
// (PerTermPostings scaled by idf, at least MinTermPostings): only for those
// does a search's bounded read differ from reading every posting.
type TermsOverBound struct {
	QueryTerms int // (query, term) pairs looked up
	OverBound  int // those read partly, in either field
	Queries    int // queries with at least one such term
	MaxDF      int // the largest df of any term looked up
}

// CountTermsOverBound counts, over queries searched in org, the terms read
// partly (TermsOverBound).
func CountTermsOverBound(ctx context.Context, s *Searcher, org uuid.UUID, queries []string) (_ TermsOverBound, err error) {
	defer data.WrapOp(&err, "knowledge.CountTermsOverBound")
	var t TermsOverBound
	err = s.pool.QueryRow(ctx, termsOverBoundSQL, org, queries, PerTermPostings, MaxQueryTerms, MinTermPostings).
		Scan(&t.QueryTerms, &t.OverBound, &t.Queries, &t.MaxDF)
	return t, err
}
