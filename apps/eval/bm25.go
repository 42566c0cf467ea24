package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The reference ranking: textbook BM25, the list a user would try first,
// against which the fused list is judged (Report.Against). It shares
// nothing with the product's search but the text analysis:
//
//   - every document the run stored, as one text (its title and text, as
//     BEIR's "flat" indexes do), scored whole (no passages);
//   - every query term, weighted by how often the query holds it (as
//     Anserini's bag-of-words query: a repeated term counts again), never
//     capped in number and never bounded in postings;
//   - idf ln(1 + (N - df + 0.5) / (df + 0.5)) and length normalisation
//     by the collection's own statistics (N, df and the average length over
//     the documents stored), k1 = refK1, b = refB;
//   - the analysis is PostgreSQL's to_tsvector with the org's text search
//     configuration (english: its parser, stop words and Snowball stemmer),
//     so the terms are those of the product's index less what it adds (the
//     identifiers kept whole, docs/knowledge.md, "Analysis"). Lucene's
//     English analyzer, behind the published BM25 figures, stems with
//     Porter and drops fewer stop words: NFCorpus 0.3218 there.
//
// The score of a document is sum over query terms t of
// qtf(t) * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg)),
// where len is the document's number of terms (stop words excluded).
const (
	refK1 = 0.9
	refB  = 0.4
	// analyzeBatch is how many texts one analysis statement takes.
	analyzeBatch = 256
)

// refPosting is one document holding a term, and how often.
type refPosting struct {
	doc int32
	tf  int32
}

// BM25Ref is the reference index over one run's documents.
type BM25Ref struct {
	ids      []string // corpus ids, by document number
	lens     []float64
	avg      float64
	postings map[string][]refPosting
	analyze  func(ctx context.Context, texts []string) ([]map[string]int, error)
}

// NewBM25Ref indexes docs (each analysed by analyze, one term -> count
// map per text, as to_tsvector gives them).
func NewBM25Ref(ctx context.Context, docs []Doc, analyze func(context.Context, []string) ([]map[string]int, error)) (*BM25Ref, error) {
	r := &BM25Ref{postings: map[string][]refPosting{}, analyze: analyze}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Title + "\n\n" + d.Text
	}
	terms, err := analyze(ctx, texts)
	if err != nil {
		return nil, err
	}
	var total float64
	for i, tf := range terms {
		r.ids = append(r.ids, docs[i].ID)
		n := 0
		// Sorted, so a term's postings are in document order whatever the
		// map's order.
		for _, t := range slices.Sorted(maps.Keys(tf)) {
			r.postings[t] = append(r.postings[t], refPosting{doc: int32(i), tf: int32(tf[t])})
			n += tf[t]
		}
		r.lens = append(r.lens, float64(n))
		total += float64(n)
	}
	if len(docs) > 0 {
		r.avg = total / float64(len(docs))
	}
	return r, nil
}

// IDF is BM25's idf of a term held by df of the n documents.
func IDF(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// Rank returns the depth best documents for each query (corpus ids), best
// first, ties by id; a query sharing no term with the documents gets none.
func (r *BM25Ref) Rank(ctx context.Context, queries []string, depth int) ([][]string, error) {
	terms, err := r.analyze(ctx, queries)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(queries))
	score := make([]float64, len(r.ids))
	for qi, qtf := range terms {
		hit := r.score(qtf, score)
		slices.SortFunc(hit, func(a, b int32) int {
			return cmp.Or(cmp.Compare(score[b], score[a]), cmp.Compare(r.ids[a], r.ids[b]))
		})
		ranked := make([]string, 0, min(depth, len(hit)))
		for _, d := range hit[:min(depth, len(hit))] {
			ranked = append(ranked, r.ids[d])
		}
		out[qi] = ranked
		for _, d := range hit {
			score[d] = 0
		}
	}
	return out, nil
}

// score adds the BM25 score of every document holding a term of qtf (term
// -> count in the query) to score, by document number, and returns those
// documents.
func (r *BM25Ref) score(qtf map[string]int, score []float64) []int32 {
	var hit []int32
	for t, n := range qtf {
		ps := r.postings[t]
		if len(ps) == 0 {
			continue
		}
		w := float64(n) * IDF(len(r.ids), len(ps))
		for _, p := range ps {
			tf := float64(p.tf)
			norm := 1 - refB
			if r.avg > 0 {
				norm += refB * r.lens[p.doc] / r.avg
			}
			if score[p.doc] == 0 {
				hit = append(hit, p.doc)
			}
			score[p.doc] += w * tf * (refK1 + 1) / (tf + refK1*norm)
		}
	}
	return hit
}

// pgAnalyzer analyses texts with to_tsvector in config on pool: each
// text's lexemes with their number of positions (a lexeme without
// positions, which to_tsvector does not make, counts once).
func pgAnalyzer(pool *pgxpool.Pool, config string) func(context.Context, []string) ([]map[string]int, error) {
	return func(ctx context.Context, texts []string) ([]map[string]int, error) {
		out := make([]map[string]int, len(texts))
		for i := range out {
			out[i] = map[string]int{}
		}
		for start := 0; start < len(texts); start += analyzeBatch {
			part := texts[start:min(start+analyzeBatch, len(texts))]
			rows, err := pool.Query(ctx, `
				SELECT d.i::int, t.lexeme, coalesce(cardinality(t.positions), 1)::int
				FROM unnest($2::text[]) WITH ORDINALITY AS d (txt, i)
				CROSS JOIN LATERAL unnest(to_tsvector($1::regconfig, d.txt)) AS t`, config, part)
			if err != nil {
				return nil, fmt.Errorf("analyse with %s: %w", config, err)
			}
			var i, tf int
			var lexeme string
			_, err = pgx.ForEachRow(rows, []any{&i, &lexeme, &tf}, func() error {
				out[start+i-1][lexeme] = tf
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("analyse with %s: %w", config, err)
			}
		}
		return out, nil
	}
}
