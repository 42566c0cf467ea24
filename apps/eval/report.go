package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Report is everything one run measured; --json prints it as is.
type Report struct {
	Dataset string `json:"dataset"`
	Variant string `json:"variant,omitempty"`
	// Unanswerable counts the judged queries with no answer in the store
	// (VariantUnanswerable).
	Unanswerable   int    `json:"unanswerable,omitempty"`
	Path           string `json:"path"`
	Commit         string `json:"commit"`
	Date           string `json:"date"`
	Embedder       string `json:"embedder"`
	Docs           int    `json:"docs"`
	Refused        int    `json:"docsRefused"`
	Queries        int    `json:"queries"`
	QueriesSkipped int    `json:"queriesWithoutJudgments"`
	// Limited: --limit-docs or --limit-queries cut the collection.
	Limited     bool           `json:"limited"`
	Depth       int            `json:"depth"`
	Concurrency int            `json:"concurrency"`
	DatabaseURL string         `json:"databaseUrl,omitempty"` // with --keep
	Indexed     int            `json:"indexed"`
	Embeddings  map[string]int `json:"embeddings"` // entries by embedding status
	Statistics  string         `json:"statistics"`

	LoadSeconds  float64 `json:"loadSeconds"`
	IndexSeconds float64 `json:"indexSeconds"`
	EmbedSeconds float64 `json:"embedSeconds"`
	// VectorIndexSeconds: building the model's HNSW indexes, as the worker
	// does at start (Maintenance.EnsureVectorIndex).
	VectorIndexSeconds float64 `json:"vectorIndexSeconds"`

	Rows []Row `json:"rows"`
	// Against is the fused list against its best own list and plain BM25.
	Against Against `json:"against"`
	// Coverage: the full-text list's answers to queries sharing a word
	// with the corpus.
	Coverage Coverage `json:"fullTextCoverage"`
	// NoVector counts queries whose vector list was unavailable.
	NoVector int     `json:"queriesWithoutVectorSearch"`
	Latency  Latency `json:"searchLatency"`
	// Answered counts real queries for which Search (default options)
	// returned at least one hit.
	Answered int            `json:"searchAnswered"`
	Nonsense NonsenseResult `json:"nonsense"`
	// PerTermCheck is absent with --per-term-check=false.
	PerTermCheck *BoundCheck `json:"perTermCheck,omitempty"`
	Gate         *GateStudy  `json:"gate"`
	// Rerank is the reranker study, with --rerank.
	Rerank *RerankReport `json:"rerank,omitempty"`
}

// NonsenseResult is the nonsense check: how many made-up queries Search
// answered (the target is none), and which.
type NonsenseResult struct {
	Queries         int      `json:"queries"`
	Answered        int      `json:"answered"`
	AnsweredQueries []string `json:"answeredQueries,omitempty"`
	// MaxCosine is the best raw cosine any nonsense query reached: the
	// chance level of the model in this org, which the calibration's floor
	// must clear (SEARCH_COSINE_FLOOR).
	MaxCosine float64 `json:"maxCosine"`
	// Floor is the calibration's floor in use.
	Floor float64 `json:"cosineFloor"`
}

// JSON writes the report for scripts.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Text writes the report as a plain-text table for people and docs.
func (r *Report) Text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format+"\n", a...) }
	p("dataset\t%s (%s)", r.Dataset, r.Path)
	p("commit, date\t%s, %s", r.Commit, r.Date)
	p("embedder\t%s", r.Embedder)
	p("docs\t%d stored, %d refused by Store", r.Docs-r.Refused, r.Refused)
	p("queries\t%d judged (%d without judgments skipped)", r.Queries, r.QueriesSkipped)
	if r.Limited {
		p("limited\tyes: --limit-docs/--limit-queries; figures are not comparable with the full collection")
	}
	p("load\t%.1f s (Service.Store, %d concurrent)", r.LoadSeconds, r.Concurrency)
	p("index\t%.1f s (IndexAll: %d entries)", r.IndexSeconds, r.Indexed)
	p("embed\t%.1f s (ready %d, failed %d, pending %d)", r.EmbedSeconds,
		r.Embeddings["ready"], r.Embeddings["failed"], r.Embeddings["pending"])
	p("vector index\t%.1f s (EnsureVectorIndex, as the worker at start)", r.VectorIndexSeconds)
	p("statistics\t%s", r.Statistics)
	if r.NoVector > 0 {
		p("warning\tvector search unavailable for %d queries", r.NoVector)
	}
	if r.DatabaseURL != "" {
		p("database kept\t%s", r.DatabaseURL)
	}
	p("")
	p("SearchLists, depth %d\tnDCG@10\tR@10\tR@100\tMRR@10\tanswers", r.Depth)
	for _, row := range r.Rows {
		p("%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.1f%%", row.Name, row.NDCG10, row.Recall10, row.Recall100, row.MRR10, 100*row.Answered)
	}
	a := r.Against
	p("fused against\tits best list (%s) %.4f: %+.4f; plain BM25 %.4f: %+.4f (%.3fx); fused >= both - %.3f: %s",
		a.BestList, a.Best, a.Fused-a.Best, a.BM25, a.Fused-a.BM25, a.Ratio(), againstTolerance, yesNo(a.Met()))
	p("full text reach\tanswers %d of %d queries sharing a non-stop word with the corpus (%.1f%%)",
		r.Coverage.Answered, r.Coverage.SharingAWord, 100*r.Coverage.Share)
	p("")
	p("Search latency\tp50 %.2f ms, p95 %.2f ms, p99 %.2f ms (%d queries after %d warm-up, default options)",
		r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Queries, min(warmUp, r.Latency.Queries))
	p("Search answered\t%d of %d real queries with at least one hit", r.Answered, r.Latency.Queries)
	p("nonsense answered\t%d of %d (target 0); their best raw cosine %.3f, the calibration's floor %.3f",
		r.Nonsense.Answered, r.Nonsense.Queries, r.Nonsense.MaxCosine, r.Nonsense.Floor)
	const show = 5 // --json lists them all
	for i, q := range r.Nonsense.AnsweredQueries {
		if i == show {
			p("\t  ... and %d more", len(r.Nonsense.AnsweredQueries)-show)
			break
		}
		p("\t  %q", q)
	}
	if r.PerTermCheck != nil {
		p("")
		r.PerTermCheck.text(p, r.Depth, r.Queries)
	}
	if r.Gate != nil {
		p("")
		r.Gate.text(p)
	}
	if r.Rerank != nil {
		p("")
		r.Rerank.text(p)
	}
	return tw.Flush()
}

// text writes the per-term check: the bounded and exact figures side by
// side, and whether the bound could bite on this collection at all.
func (b *BoundCheck) text(p func(string, ...any), depth, queries int) {
	// Lines without a tab do not widen the table's columns.
	p("Per-term bound: the lexical lists read %d postings per term scaled by its idf (at least %d, bounded, as Search does) vs every posting (exact), %.1f s",
		b.PerTermPostings, b.MinTermPostings, b.Seconds)
	p("SearchLists, depth %d\tnDCG@10\tR@100\ttop 10 identical", depth)
	for _, pair := range []BoundPair{b.FullText, b.Fused} {
		p("%s\t%.4f\t%.4f", pair.Bounded.Name, pair.Bounded.NDCG10, pair.Bounded.Recall100)
		p("%s\t%.4f\t%.4f\t%.1f%% of queries", pair.Exact.Name, pair.Exact.NDCG10, pair.Exact.Recall100, 100*pair.SameTop10)
	}
	t := b.Terms
	verdict := "the bound read fewer postings for these"
	if t.OverBound == 0 {
		verdict = "the bound never bites here: bounded and exact read the same postings"
	}
	p("query terms over the bound\t%d of %d looked up (df over the term's bound in body or title; largest df %d), in %d of %d queries: %s",
		t.OverBound, t.QueryTerms, t.MaxDF, t.Queries, queries, verdict)
}

// text writes the gate table, the default's row marked, and the spread
// of the best scores of real and nonsense queries.
func (g *GateStudy) text(p func(string, ...any)) {
	p("Relevance gate: SearchLists with minScore 0 at Search's depth (%d), top %d, then each minScore applied (%d real, %d nonsense queries), %.1f s",
		g.Depth, gateLimit, g.Queries, g.Nonsense, g.Seconds)
	p("minScore\treal answered\tP@1 of answered\thits per real query\tnonsense answered")
	for _, row := range g.Rows {
		name := fmt.Sprintf("%.2f", row.MinScore)
		if row.Default {
			name += " (default)"
		}
		p1 := "-"
		if row.Answered > 0 {
			p1 = fmt.Sprintf("%.3f", row.PrecisionAt1)
		}
		p("%s\t%.1f%%\t%s\t%.2f\t%d of %d", name, 100*row.Answered, p1, row.MeanHits, row.NonsenseAnswered, g.Nonsense)
	}
	p("top-1 fused score: nonsense max %.4f; real p10 %.4f, p50 %.4f (%.1f%% of real queries at or below the nonsense max)",
		g.NonsenseTop1Max, g.RealTop1P10, g.RealTop1P50, 100*g.RealBelowNonsense)
	b := g.Bands
	p("Score bands (strong >= %.2f, weak < %.2f), first hits of the %d answerable queries:", b.Strong, b.Weak, g.Queries)
	p("  relevant first hits	%d: score p5 %.3f, p10 %.3f, p50 %.3f; %.1f%% of them under weak", b.RelevantTop1, b.RelevantP5, b.RelevantP10, b.RelevantP50, 100*b.RelevantUnderW)
	p("  first hits at or above strong	%d, %.1f%% relevant", b.StrongTop1, 100*b.StrongRelevant)
	p("  first hits between	%d, %.1f%% relevant", b.MidTop1, 100*b.MidRelevant)
	p("  first hits under weak	%d, %.1f%% relevant", b.WeakTop1, 100*b.WeakRelevant)
	if b.AUC != nil {
		p("  unanswerable queries	%d: top score p50 %.3f, p90 %.3f; AUC of the top score, answerable vs unanswerable: %.3f", b.Unanswerable, b.UnanswerableP50, b.UnanswerableP90, *b.AUC)
	}
	if g.NonsenseTop1Max == 0 {
		// Score 0 is no evidence from any list; fusion drops it at any minScore.
		p("  no nonsense query found anything even at minScore 0 (no lexical match; every vector hit under the calibration's floor):")
		p("  on this collection the gate is margin, not what keeps nonsense out")
	}
}

// rowBM25 names the reference's row (bm25.go).
const rowBM25 = "plain BM25 (reference)"

// againstTolerance is how far under its best list or plain BM25 the fused
// list may be (nDCG@10): a fresh load moves figures by about 0.001.
const againstTolerance = 0.005

// Against is the fused list's nDCG@10 next to its best own list's (vector,
// full text or title) and the reference's, plain BM25: the fused list
// should be at least as good as either (less againstTolerance).
type Against struct {
	Fused    float64 `json:"fused"`
	BestList string  `json:"bestList"`
	Best     float64 `json:"best"`
	BM25     float64 `json:"plainBM25"`
}

// against reads Against from score's rows.
func against(rows []Row) Against {
	a := Against{}
	for _, r := range rows {
		switch r.Name {
		case rowFused:
			a.Fused = r.NDCG10
		case rowVector, rowFullText, rowTitle:
			if a.BestList == "" || r.NDCG10 > a.Best {
				a.BestList, a.Best = r.Name, r.NDCG10
			}
		case rowBM25:
			a.BM25 = r.NDCG10
		}
	}
	return a
}

// Ratio is the fused list's nDCG@10 over plain BM25's (0 when BM25 found
// nothing relevant).
func (a Against) Ratio() float64 {
	if a.BM25 == 0 {
		return 0
	}
	return a.Fused / a.BM25
}

// Met says whether the fused list is within againstTolerance of both.
func (a Against) Met() bool {
	return a.Fused >= a.Best-againstTolerance && a.Fused >= a.BM25-againstTolerance
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
