package search

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
)

// ListHit is one entry of one ranked list: its id and the list's own
// signal for it (cosine similarity for the vector list, BM25 for the full
// text and title lists, the calibrated fused score for the fused list).
type ListHit struct {
	ID    uuid.UUID `json:"id"`
	Score float64   `json:"score"`
	// Rerank is the reranker's raw score of a hit it read (Lists.Reranked).
	Rerank *float64 `json:"rerank,omitempty"`
}

// Lists is the inside of one search: each list's ranking, as deep as asked,
// and the fused ranking built from them exactly as Search builds it (the
// same calibration and the same relevance gate), but not cut at the limit.
// It exists for evaluation (apps/eval) and for operators explaining a
// ranking; agents use Search.
type Lists struct {
	Fused    []ListHit `json:"fused"`
	Vector   []ListHit `json:"vector"`
	FullText []ListHit `json:"fullText"`
	Title    []ListHit `json:"title"`
	// VectorSearch is false when the query could not be embedded.
	VectorSearch bool `json:"vectorSearch"`
	// Candidates are every entry any list found, with its rank and raw
	// signal in each list (0: not in it), and QueryIDF the query's idf mass
	// per field: what fusion was given (rrf.go), for explaining a ranking
	// and for studying fusion offline (apps/eval --dump).
	Candidates []Candidate `json:"candidates"`
	QueryIDF   QueryIDF    `json:"queryIdf"`
	// Reranked is the fused ranking after the reranker (rerank.go), as
	// Search orders it, when the searcher has one and it answered;
	// RerankReason says why not otherwise (SearchResult.RerankReason).
	Reranked     []ListHit `json:"reranked,omitempty"`
	RerankReason string    `json:"rerankReason,omitempty"`
}

// MaxListDepth bounds SearchLists.
const MaxListDepth = 1000

// SearchLists runs s's search of in (its Limit is ignored) with each list
// taken depth deep (1..MaxListDepth) and returns every list and the fusion.
// The vector list is the raw list, before the calibration's floor. It is a
// function, not a method: evaluations explain a searcher's ranking with it
// (apps/eval), and neither the agents' and operators' calls nor the
// worker's have a use for it.
func SearchLists(ctx context.Context, s *Searcher, c domain.Caller, in domain.SearchInput, depth int) (_ *Lists, err error) {
	defer data.WrapOp(&err, "knowledge.SearchLists")
	if n := s.servedByNext(ctx, c.OrgID); n != nil {
		return SearchLists(ctx, n, c, in, depth) // the org has cut over to the next model
	}
	if depth < 1 || depth > MaxListDepth {
		return nil, errs.InvalidArgument("depth", "must be between 1 and %d (got %d)", MaxListDepth, depth)
	}
	in.Limit = nil
	began := time.Now()
	a, err := domain.ValidateSearch(c, in, s.opts.Now())
	if err != nil {
		return nil, err
	}
	r, err := s.rank(ctx, c, a, depth)
	if err != nil {
		return nil, err
	}
	out := &Lists{VectorSearch: r.vectorSearch, QueryIDF: r.mass}
	for _, h := range r.hits {
		out.Fused = append(out.Fused, ListHit{ID: h.ID, Score: h.Score})
	}
	if out.RerankReason, _, err = s.rerank(ctx, c.OrgID, a, r, began); err != nil {
		return nil, err
	}
	if out.RerankReason == "" {
		for _, h := range r.hits {
			l := ListHit{ID: h.ID, Score: h.Score}
			if h.RerankRank > 0 {
				l.Rerank = ptr(h.Rerank)
			}
			out.Reranked = append(out.Reranked, l)
		}
	}
	// listEntry is a hit with its rank in one list, until the list is sorted.
	type listEntry struct {
		rank int
		hit  ListHit
	}
	var vec, fts, ttl []listEntry
	for _, row := range r.rows {
		out.Candidates = append(out.Candidates, row.Candidate)
		if row.VectorRank > 0 {
			vec = append(vec, listEntry{row.VectorRank, ListHit{ID: row.ID, Score: row.Cosine}})
		}
		if row.FullTextRank > 0 {
			fts = append(fts, listEntry{row.FullTextRank, ListHit{ID: row.ID, Score: row.BM25}})
		}
		if row.TitleRank > 0 {
			ttl = append(ttl, listEntry{row.TitleRank, ListHit{ID: row.ID, Score: row.TitleBM25}})
		}
	}
	order := func(l []listEntry) []ListHit {
		slices.SortFunc(l, func(a, b listEntry) int { return a.rank - b.rank })
		hits := make([]ListHit, len(l))
		for i, x := range l {
			hits[i] = x.hit
		}
		return hits
	}
	out.Vector, out.FullText, out.Title = order(vec), order(fts), order(ttl)
	return out, nil
}
