package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// BenchmarkSearchRerank measures what a reranker costs a search beyond its
// own time, and what a reranker that is down costs: an org of
// KNOWLEDGE_RERANK_BENCH_SIZE entries (default 3,000, embedded by the
// local embedder, indexed, upkept), KNOWLEDGE_RERANK_BENCH_QUERIES
// distinct queries (default 200) through Service.Search, the variants in
// turn on each query so that all meet the same load:
//
//   - fused: no reranker (the reference);
//   - reranked: a Cohere-shaped reranker (httptest) that answers after
//     20 ms; its handler's own time (decode, wait, encode) is recorded per
//     request, so the search's overhead is its latency less the fused
//     p50 less that time (the target: at most 2 ms at the p50);
//   - hanging: a reranker that never answers, the default budget
//     (300 ms): a search answers within the budget, reranked false, and
//     once the breaker opens at once;
//   - refused: nothing listens at the reranker's address (connection
//     refused): reranked false at once.
//
// Prints each variant's p50, p95, p99 and max, the reranked searches'
// overhead, and how many answers were reranked.
func BenchmarkSearchRerank(b *testing.B) {
	ctx := context.Background()
	size := benchEnvInt(b, "KNOWLEDGE_RERANK_BENCH_SIZE", 3000, 100)
	nq := benchEnvInt(b, "KNOWLEDGE_RERANK_BENCH_QUERIES", 200, 10)
	db := testenv.Postgres(b)
	app := db.AppPool(b)
	a := testfactory.Agent(ctx, b, db.Pool, nil)
	c := knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
	gen := newTextGen()
	rng := mrand.New(mrand.NewPCG(7, 8))
	storeEmbedded(b, db.Pool, knowledge.New(db.Pool, knowledge.Options{}), c, size, gen, rng)

	// The Cohere shape: {query, documents, top_n} -> {results: [{index,
	// relevance_score}]}, scores falling with the index (the fused order
	// kept), after delay.
	var mu sync.Mutex
	var handlerTime []time.Duration
	provider := func(delay time.Duration) string {
		stop := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t0 := time.Now()
			var req struct {
				Documents []string `json:"documents"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			case <-stop:
				return
			}
			type result struct {
				Index int     `json:"index"`
				Score float64 `json:"relevance_score"`
			}
			out := struct {
				Results []result `json:"results"`
			}{}
			for i := range req.Documents {
				out.Results = append(out.Results, result{i, 0.9 - float64(i)/float64(2*len(req.Documents))})
			}
			json.NewEncoder(w).Encode(out)
			mu.Lock()
			handlerTime = append(handlerTime, time.Since(t0))
			mu.Unlock()
		}))
		b.Cleanup(func() { close(stop); srv.Close() })
		return srv.URL
	}
	reranker := func(url string) rerank.Reranker {
		r, err := rerank.New(rerank.Config{BaseURL: url, Model: "bench-reranker"})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	// An address nothing listens at: a port taken and given back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	refusedURL := "http://" + l.Addr().String()
	l.Close()

	const providerDelay = 20 * time.Millisecond
	type variant struct {
		name     string
		svc      *knowledge.Service
		lat      []time.Duration
		reranked int
		why      map[string]int // RerankReason of the answers not reranked
	}
	vs := []*variant{
		{name: "fused", svc: knowledge.New(app, knowledge.Options{})},
		{name: "reranked (20 ms)", svc: knowledge.New(app, knowledge.Options{Reranker: reranker(provider(providerDelay))})},
		{name: "hanging", svc: knowledge.New(app, knowledge.Options{Reranker: reranker(provider(time.Hour))})},
		{name: "refused", svc: knowledge.New(app, knowledge.Options{Reranker: reranker(refusedURL)})},
	}
	queries := make([]string, nq)
	qrng := mrand.New(mrand.NewPCG(9, 10))
	for i := range queries {
		queries[i] = fmt.Sprintf("%s %d", gen.query(qrng), i)
	}
	for _, v := range vs {
		v.why = map[string]int{}
	}
	search := func(v *variant, q string) time.Duration {
		t0 := time.Now()
		r, err := v.svc.Search(ctx, c, knowledge.SearchInput{Query: q})
		el := time.Since(t0)
		if err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
		if r.Reranked {
			v.reranked++
		} else {
			v.why[r.RerankReason]++
		}
		return el
	}
	for i := range 20 { // warm the pools' connections and the plans
		for _, v := range vs[:2] {
			search(v, fmt.Sprintf("warm %d %s", i, queries[i%len(queries)]))
		}
	}
	mu.Lock()
	handlerTime = handlerTime[:0]
	mu.Unlock()
	for _, v := range vs {
		v.reranked, v.why = 0, map[string]int{}
	}
	for _, q := range queries {
		for _, v := range vs {
			v.lat = append(v.lat, search(v, q))
		}
	}
	logf("org of %d entries, %d queries, variants in turn on each (load average %s):", size, nq, loadAvg())
	p := percentile
	var fused time.Duration
	for _, v := range vs {
		slices.Sort(v.lat)
		if v.name == "fused" {
			fused = p(v.lat, 0.5)
		}
		logf("  %-17s p50 %7.2f ms  p95 %7.2f ms  p99 %7.2f ms  max %7.2f ms  reranked %d of %d, not: %v", v.name,
			ms(p(v.lat, 0.5)), ms(p(v.lat, 0.95)), ms(p(v.lat, 0.99)), ms(v.lat[len(v.lat)-1]), v.reranked, len(v.lat), v.why)
	}
	mu.Lock()
	ht := slices.Clone(handlerTime)
	mu.Unlock()
	slices.Sort(ht)
	rr := vs[1]
	over := p(rr.lat, 0.5) - fused - p(ht, 0.5)
	logf("reranked: p50 %.2f ms = fused p50 %.2f ms + the provider's p50 %.2f ms (%d requests) + %.2f ms",
		ms(p(rr.lat, 0.5)), ms(fused), ms(p(ht, 0.5)), len(ht), ms(over))
	logf("down: hanging max %.2f ms (budget %s), refused max %.2f ms", ms(vs[2].lat[len(vs[2].lat)-1]),
		knowledge.DefaultRerankBudget, ms(vs[3].lat[len(vs[3].lat)-1]))
	b.ReportMetric(ms(fused), "fused-p50-ms")
	b.ReportMetric(ms(over), "rerank-overhead-p50-ms")
	b.ReportMetric(ms(vs[2].lat[len(vs[2].lat)-1]), "hanging-max-ms")
}
