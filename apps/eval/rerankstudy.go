package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// The reranker study (--rerank): the fused list against the same list
// reranked, on every judged query, through a Service configured as the MCP
// server is (RERANK_*); the search's latency with and without it; the
// answers while it is down; and what calibrating its scale needs (its
// chance level, the scores of right first hits). docs/benchmarks.md,
// "Reranking", holds the figures.

// rerankDownQueries: searches timed with the reranker down, each way.
const rerankDownQueries = 40

// RerankReport is what --rerank measured.
type RerankReport struct {
	Model       string                      `json:"model"`
	TopN        int                         `json:"topN"`
	BudgetMs    float64                     `json:"budgetMs"`
	Calibration knowledge.RerankCalibration `json:"calibration"`
	// Before is the fused list, After the same list reranked.
	Before Row `json:"before"`
	After  Row `json:"after"`
	// Outcomes counts the quality pass's answers by rerank outcome ("ok"
	// or the reason the fused order stood: those count as fused).
	Outcomes map[string]int `json:"outcomes"`
	// Bands are the score bands of the reranked answers (gate.go).
	Bands Bands `json:"scoreBands"`
	// NonsenseMax is the best score the reranker gave any nonsense query
	// against rerankChance passages of the corpus: its chance level, which
	// the calibration's floor must clear. RelevantP10/P50 are its raw
	// scores of right first hits after reranking.
	NonsenseMax float64 `json:"nonsenseMaxScore"`
	NonsenseN   int     `json:"nonsenseQueriesScored"`
	RelevantP10 float64 `json:"relevantTop1ScoreP10"`
	RelevantP50 float64 `json:"relevantTop1ScoreP50"`
	// Latency, the same queries interleaved: Search with rerank: false,
	// with the reranker, and what the search waited for the provider.
	Timed        Latency `json:"timedFused"`
	TimedRerank  Latency `json:"timedReranked"`
	ProviderWait Latency `json:"providerWait"`
	// Overhead is each reranked search's time less its provider wait and
	// its fused twin's: what reranking costs besides the provider.
	Overhead      Latency        `json:"overhead"`
	TimedOutcomes map[string]int `json:"timedOutcomes"`
	// Down: the reranker hung (accepts, never answers) and refused (no
	// listener), rerankDownQueries searches each, RERANK_BUDGET as set by
	// --rerank-down-budget.
	DownBudgetMs float64    `json:"downBudgetMs"`
	Down         []DownPass `json:"down"`
}

// DownPass is one way of being down: the searches' latency by reason,
// what the reranker added to each (its time less that of the same search
// with rerank: false, run just before), and the errors (the target is
// none).
type DownPass struct {
	Way      string             `json:"way"`
	Errors   int                `json:"errors"`
	ByReason map[string]Latency `json:"byReason"`
	Added    map[string]Latency `json:"addedByReason"`
	Max      float64            `json:"maxMs"`
	MaxAdded float64            `json:"maxAddedMs"`
}

// rerankChance is how many corpus passages each nonsense query is
// reranked against for the chance level.
const rerankChance = 30

// rerankStudy runs the study on r's loaded database.
func (r *evalRun) rerankStudy(ctx context.Context) (*RerankReport, error) {
	waits := &lastWait{}
	opts := r.opts
	opts.Reranker, opts.RerankObserver = r.reranker, waits
	r.env.rerank.Apply(&opts.Config)
	svc := knowledge.New(r.pool, opts) // the provider itself: the timed pass
	quality := svc                     // the quality pass: through the cache of scores, if any
	if r.cfg.embedCache != "" {
		c, err := withRerankCache(r.reranker, r.cfg.embedCache)
		if err != nil {
			return nil, fmt.Errorf("--embed-cache: %w", err)
		}
		defer c.Close()
		qopts := opts
		qopts.Reranker, qopts.RerankObserver = c, nil
		quality = knowledge.New(r.pool, qopts)
		r.chance = c
	}
	cal := knowledge.RerankCalibrationFor(r.reranker.Model())
	if opts.RerankCalibration != nil {
		cal = *opts.RerankCalibration
	}
	rep := &RerankReport{Model: r.reranker.Model(), TopN: cmp.Or(opts.RerankTopN, knowledge.DefaultRerankTopN),
		BudgetMs: ms(cmp.Or(opts.RerankBudget, knowledge.DefaultRerankBudget)), Calibration: cal,
		Before: Row{Name: "fused"}, After: Row{Name: "fused + rerank"}, Outcomes: map[string]int{}, TimedOutcomes: map[string]int{}}

	r.progress("rerank: %d queries with %s (top %d)", len(r.queries), rep.Model, rep.TopN)
	var gates []GateQuery
	var relevantRaw []float64
	for _, q := range r.queries {
		if strings.TrimSpace(q.Text) == "" {
			continue
		}
		l, err := knowledge.SearchLists(ctx, quality, r.caller, knowledge.SearchInput{Query: queryText(q.Text)}, r.cfg.depth)
		if err != nil {
			return nil, fmt.Errorf("rerank, query %s: %w", q.ID, err)
		}
		outcome := cmp.Or(l.RerankReason, "ok")
		if outcome == knowledge.RerankNoHits {
			outcome = "ok" // nothing to order: the same either way
		}
		rep.Outcomes[outcome]++
		after := l.Reranked
		if after == nil {
			after = l.Fused
		}
		fused, reranked := r.docs(l.Fused), r.docs(after)
		g := GateQuery{Unanswerable: r.ds.Unanswerable[q.ID]}
		for _, h := range after[:min(gateLimit, len(after))] {
			g.Scores = append(g.Scores, h.Score)
		}
		g.TopRelevant = len(reranked) > 0 && r.ds.Qrels[q.ID][reranked[0]] > 0
		gates = append(gates, g)
		if g.TopRelevant && after[0].Rerank != nil {
			relevantRaw = append(relevantRaw, *after[0].Rerank)
		}
		if g.Unanswerable {
			continue
		}
		rep.Before.Add(fused, r.ds.Qrels[q.ID])
		rep.After.Add(reranked, r.ds.Qrels[q.ID])
	}
	rep.Before.Mean()
	rep.After.Mean()
	rep.Bands = bands(gates)
	slices.Sort(relevantRaw)
	rep.RelevantP10, rep.RelevantP50 = nearestRank(relevantRaw, 0.1), nearestRank(relevantRaw, 0.5)

	var err error
	if rep.NonsenseMax, rep.NonsenseN, err = r.rerankChance(ctx, cmp.Or(opts.RerankBudget, knowledge.DefaultRerankBudget)); err != nil {
		return nil, err
	}
	if err := r.rerankTimed(ctx, svc, waits, rep); err != nil {
		return nil, err
	}
	rep.DownBudgetMs = ms(r.cfg.rerankDownBudget)
	for _, way := range []string{"hung", "refused"} {
		d, err := r.rerankDown(ctx, way)
		if err != nil {
			return nil, err
		}
		rep.Down = append(rep.Down, d)
	}
	return rep, nil
}

// docs maps a list's entries to the corpus ids they were stored from.
func (r *evalRun) docs(hits []knowledge.ListHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = cmp.Or(r.docOf[h.ID], h.ID.String())
	}
	return out
}

// rerankChance reranks each nonsense query against the first rerankChance
// documents of the corpus, each as the search sends a candidate (title and
// passage), waiting for each as long as a search would, and returns the
// best score: the model's chance level here.
func (r *evalRun) rerankChance(ctx context.Context, budget time.Duration) (best float64, n int, err error) {
	var docs []string
	for _, d := range r.ds.Docs[:min(rerankChance, len(r.ds.Docs))] {
		in := storeInput(d)
		docs = append(docs, in.Title+"\n\n"+cut(in.Body, knowledge.RerankPassageChars))
	}
	rr := r.reranker
	if r.chance != nil {
		rr = r.chance
	}
	for _, q := range NonsenseQueries(nonsenseN, nonsenseSeed) {
		qctx, cancel := context.WithTimeout(ctx, budget) // a search's wait, not the client's default
		rs, err := rr.Rerank(qctx, q, docs)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			r.progress("rerank chance level, %q: %v (left out)", q, err)
			continue
		}
		n++
		for _, x := range rs {
			best = max(best, x.Score)
		}
	}
	return best, n, nil
}

// rerankTimed times Search on the first --rerank-timed queries, each once
// with rerank: false and once reranked, interleaved so that the machine's
// load weighs on both alike, after a warm-up.
func (r *evalRun) rerankTimed(ctx context.Context, svc *knowledge.Service, waits *lastWait, rep *RerankReport) error {
	var texts []string
	for _, q := range r.queries {
		if strings.TrimSpace(q.Text) != "" {
			texts = append(texts, queryText(q.Text))
		}
	}
	texts = texts[:min(r.cfg.rerankTimed, len(texts))]
	r.progress("rerank: timing %d searches with and without the reranker", len(texts))
	off := false
	for _, q := range texts[:min(5, len(texts))] {
		if _, err := svc.Search(ctx, r.caller, knowledge.SearchInput{Query: q}); err != nil {
			return err
		}
	}
	var fused, reranked, wait, overhead []time.Duration
	for _, q := range texts {
		start := time.Now()
		if _, err := svc.Search(ctx, r.caller, knowledge.SearchInput{Query: q, Rerank: &off}); err != nil {
			return fmt.Errorf("search %q: %w", q, err)
		}
		f := time.Since(start)
		waits.reset()
		start = time.Now()
		res, err := svc.Search(ctx, r.caller, knowledge.SearchInput{Query: q})
		if err != nil {
			return fmt.Errorf("search %q: %w", q, err)
		}
		t := time.Since(start)
		rep.TimedOutcomes[cmp.Or(res.RerankReason, "ok")]++
		fused, reranked, wait = append(fused, f), append(reranked, t), append(wait, waits.d)
		overhead = append(overhead, t-waits.d-f)
	}
	rep.Timed, rep.TimedRerank, rep.ProviderWait, rep.Overhead = Percentiles(fused), Percentiles(reranked), Percentiles(wait), Percentiles(overhead)
	return nil
}

// rerankDown times searches with the reranker down one way: "hung" (a
// listener that accepts and never answers: every call lasts the budget
// until the breaker opens) or "refused" (nothing listens).
func (r *evalRun) rerankDown(ctx context.Context, way string) (DownPass, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return DownPass{}, err
	}
	url := "http://" + ln.Addr().String()
	if way == "refused" {
		ln.Close()
	} else {
		hung := &http.Server{Handler: http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) { <-req.Context().Done() }),
			ReadHeaderTimeout: time.Second}
		go func() { _ = hung.Serve(ln) }()
		defer hung.Close()
	}
	rr, err := rerank.New(rerank.Config{BaseURL: url, Model: r.reranker.Model()})
	if err != nil {
		return DownPass{}, err
	}
	opts := r.opts
	opts.Reranker = rr
	opts.RerankBudget = r.cfg.rerankDownBudget
	svc := knowledge.New(r.pool, opts)
	d := DownPass{Way: way, ByReason: map[string]Latency{}, Added: map[string]Latency{}}
	by, added := map[string][]time.Duration{}, map[string][]time.Duration{}
	off := false
	n := 0
	for _, q := range r.queries {
		if n == rerankDownQueries {
			break
		}
		if strings.TrimSpace(q.Text) == "" {
			continue
		}
		n++
		start := time.Now()
		if _, err := svc.Search(ctx, r.caller, knowledge.SearchInput{Query: queryText(q.Text), Rerank: &off}); err != nil {
			return d, fmt.Errorf("search %q: %w", q.Text, err)
		}
		fused := time.Since(start)
		start = time.Now()
		res, err := svc.Search(ctx, r.caller, knowledge.SearchInput{Query: queryText(q.Text)})
		took := time.Since(start)
		if err != nil {
			if ctx.Err() != nil {
				return d, ctx.Err()
			}
			d.Errors++
			continue
		}
		reason := res.RerankReason
		if res.Reranked {
			reason = "reranked (down, yet?)"
		}
		by[reason], added[reason] = append(by[reason], took), append(added[reason], took-fused)
		d.Max, d.MaxAdded = max(d.Max, ms(took)), max(d.MaxAdded, ms(took-fused))
	}
	for reason, ds := range by {
		d.ByReason[reason], d.Added[reason] = Percentiles(ds), Percentiles(added[reason])
	}
	return d, nil
}

// lastWait is a rerank.Observer keeping the last wait (the timed pass
// searches one at a time).
type lastWait struct{ d time.Duration }

func (w *lastWait) Reranked(_ string, _ int, d time.Duration, _ string) { w.d = d }
func (w *lastWait) reset()                                              { w.d = 0 }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// errNoReranker is --rerank without a reranker configured.
var errNoReranker = errors.New("--rerank needs a reranker: set RERANK_PRESET or RERANK_BASE_URL, and RERANK_MODEL " +
	"(the embedserver's stand-in: RERANK_BASE_URL=http://127.0.0.1:18395 RERANK_MODEL=use-lite-rerank-standin RERANK_BUDGET=30s)")

// text writes the study with its targets.
func (s *RerankReport) text(p func(string, ...any)) {
	p("Reranker\t%s, top %d, budget %.0f ms, calibration floor %.3f full %.3f", s.Model, s.TopN, s.BudgetMs, s.Calibration.Floor, s.Calibration.Full)
	p("SearchLists, judged queries\tnDCG@10\tR@10\tR@100\tMRR@10")
	for _, row := range []Row{s.Before, s.After} {
		p("%s\t%.4f\t%.4f\t%.4f\t%.4f", row.Name, row.NDCG10, row.Recall10, row.Recall100, row.MRR10)
	}
	p("outcomes\t%v (any but ok counts as fused)", s.Outcomes)
	p("target: reranked >= fused - 0.005\t%.4f vs %.4f: %s", s.After.NDCG10, s.Before.NDCG10, met(s.After.NDCG10 >= s.Before.NDCG10-0.005))
	b := s.Bands
	p("reranked score bands\trelevant first hits p5 / p10 / p50 %.3f / %.3f / %.3f, %.1f%% under %.1f; first hits >= %.1f relevant %.1f%% of %d, %.1f-%.1f %.1f%% of %d",
		b.RelevantP5, b.RelevantP10, b.RelevantP50, 100*b.RelevantUnderW, b.Weak, b.Strong, 100*b.StrongRelevant, b.StrongTop1,
		b.Weak, b.Strong, 100*b.MidRelevant, b.MidTop1)
	if b.AUC != nil {
		p("reranked top-score AUC\t%.3f (answerable above unanswerable)", *b.AUC)
	}
	p("calibration\t%d nonsense queries' best score %.3f (the floor must clear it); right first hits' scores p10 %.3f, p50 %.3f",
		s.NonsenseN, s.NonsenseMax, s.RelevantP10, s.RelevantP50)
	p("Search, %d queries interleaved\tp50 / p95 / p99 ms", s.Timed.Queries)
	for _, l := range []struct {
		name string
		l    Latency
	}{{"fused (rerank: false)", s.Timed}, {"reranked", s.TimedRerank}, {"provider wait", s.ProviderWait}, {"overhead (reranked - wait - fused)", s.Overhead}} {
		p("%s\t%.2f / %.2f / %.2f", l.name, l.l.P50, l.l.P95, l.l.P99)
	}
	p("timed outcomes\t%v", s.TimedOutcomes)
	p("target: reranked p50 <= fused p50 + provider p50 + 2 ms\t%.2f vs %.2f: %s", s.TimedRerank.P50,
		s.Timed.P50+s.ProviderWait.P50+2, met(s.TimedRerank.P50 <= s.Timed.P50+s.ProviderWait.P50+2))
	for _, d := range s.Down {
		reasons := make([]string, 0, len(d.ByReason))
		for r := range d.ByReason {
			reasons = append(reasons, r)
		}
		slices.Sort(reasons)
		for _, r := range reasons {
			l, a := d.ByReason[r], d.Added[r]
			p("reranker %s, %s\t%d searches, p50 %.2f ms, p99 %.2f ms; added to the fused search p50 %.2f ms, p99 %.2f ms",
				d.Way, r, l.Queries, l.P50, l.P99, a.P50, a.P99)
		}
		p("target: reranker %s, adds at most budget + 5 ms, 0 errors\tmax added %.2f ms (max search %.2f ms) vs %.0f ms, %d errors: %s",
			d.Way, d.MaxAdded, d.Max, s.DownBudgetMs+5, d.Errors, met(d.MaxAdded <= s.DownBudgetMs+5 && d.Errors == 0))
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
