package main

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Coverage is the full-text list's reach: of the queries that share at
// least one non-stop word (after the org's analysis: stop words dropped,
// stemmed) with the corpus, how many the full-text list answers. The issue
// asks for at least 95%; by construction (any shared term matches) it
// should be all of them, so a miss points at a bug, not a ranking choice.
type Coverage struct {
	SharingAWord int     `json:"queriesSharingAWord"`
	Answered     int     `json:"answeredByFullText"`
	Share        float64 `json:"share"`
}

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

// coverage measures Coverage from the queries and the full-text lists the
// main scoring already has (lists[i] belongs to queries[i]).
func coverage(ctx context.Context, pool *pgxpool.Pool, org uuid.UUID, queries []Query, lists []docLists) (Coverage, error) {
	var c Coverage
	for i, q := range queries {
		var shares bool
		if err := pool.QueryRow(ctx, sharesAWordSQL, org, queryText(q.Text)).Scan(&shares); err != nil {
			return c, err
		}
		if !shares {
			continue
		}
		c.SharingAWord++
		if len(lists[i].FullText) > 0 {
			c.Answered++
		}
	}
	if c.SharingAWord > 0 {
		c.Share = float64(c.Answered) / float64(c.SharingAWord)
	}
	return c, nil
}
