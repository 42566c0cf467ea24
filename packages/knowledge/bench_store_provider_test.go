package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// BenchmarkStoreProvider measures what the embedding provider costs a
// store, in one run, calls interleaved: an org of
// KNOWLEDGE_STORE_BENCH_SIZE entries (default 5,000; indexed, keys filled
// in), then KNOWLEDGE_STORE_BENCH_STORES stores (default 300) of new text
// through Service.Store as the MCP server's role, in turn with
//
//   - local: the local embedder (the reference; the check is by words);
//   - slow: an OpenAI-compatible provider (httptest) answering in 100 to
//     400 ms;
//   - hanging: one that never answers;
//   - use-lite: the USE-lite model of the embedserver tool, when it
//     answers at KNOWLEDGE_BENCH_USE_LITE_URL (default
//     http://127.0.0.1:18395/v1; left out otherwise);
//
// the caller not asking for the check by meaning (ifSimilar left out), then
// a few stores of each provider with ifSimilar: report, which wait for it
// within the embed budget (1 s). Prints p50, p95 and p99 of each, the p50
// against local's, and the requests the httptest providers received
// during the default stores (0: no store waited on them).
func BenchmarkStoreProvider(b *testing.B) {
	ctx := context.Background()
	size := benchEnvInt(b, "KNOWLEDGE_STORE_BENCH_SIZE", 5000, 100)
	stores := benchEnvInt(b, "KNOWLEDGE_STORE_BENCH_STORES", 300, 10)
	d := testenv.Postgres(b)
	app := d.AppPool(b)
	a := testfactory.Agent(ctx, b, d.Pool, nil)
	c := knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
	gen := newTextGen()
	rng := mrand.New(mrand.NewPCG(5, 6))
	rows := make([][]any, size)
	for i := range rows {
		title, body, tags := gen.entry(rng)
		rows[i] = []any{c.OrgID, title, body, tags, c.AgentID}
	}
	if _, err := d.Pool.CopyFrom(ctx, pgx.Identifier{"knowledge"}, []string{"org_id", "title", "body", "tags", "created_by_agent_id"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, "UPDATE org_quotas SET used = $2 WHERE org_id = $1", c.OrgID, size); err != nil {
		b.Fatal(err)
	}
	ops := knowledge.New(d.Pool, knowledge.Options{})
	if _, err := maint(ops).IndexAll(ctx); err != nil {
		b.Fatal(err)
	}
	for keyed := 0; keyed < size; {
		rep, err := maint(ops).Upkeep(ctx)
		if err != nil || rep.SimilarKeys == 0 {
			b.Fatalf("upkeep: %+v %v", rep, err)
		}
		keyed += rep.SimilarKeys
	}

	local := embed.NewLocal()
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	type variant struct {
		name     string
		metric   string // the unit prefix of its p50
		svc      *knowledge.Service
		requests *atomic.Int64 // of an httptest provider
		lat      []time.Duration
	}
	provider := func(name string, delay func() time.Duration) (embed.Embedder, *atomic.Int64) {
		var n atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			var req struct {
				Input []string `json:"input"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			select {
			case <-time.After(delay()):
			case <-r.Context().Done():
				return
			case <-stop:
				return
			}
			vs, _ := local.Embed(r.Context(), req.Input)
			type item struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			}
			var out struct {
				Data []item `json:"data"`
			}
			for i, v := range vs {
				out.Data = append(out.Data, item{i, v})
			}
			json.NewEncoder(w).Encode(out)
		}))
		b.Cleanup(srv.Close)
		e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL, Model: name, MaxAttempts: 1})
		if err != nil {
			b.Fatal(err)
		}
		return e, &n
	}
	slow, slowN := provider("slow-provider", func() time.Duration { return 100*time.Millisecond + mrand.N(300*time.Millisecond) })
	hang, hangN := provider("hanging-provider", func() time.Duration { return time.Hour })
	vs := []*variant{
		{name: "local", metric: "local", svc: knowledge.New(app, knowledge.Options{})},
		{name: "slow (100-400 ms)", metric: "slow", svc: knowledge.New(app, knowledge.Options{Embedder: slow}), requests: slowN},
		{name: "hanging", metric: "hanging", svc: knowledge.New(app, knowledge.Options{Embedder: hang}), requests: hangN},
	}
	url := os.Getenv("KNOWLEDGE_BENCH_USE_LITE_URL")
	if url == "" {
		url = "http://127.0.0.1:18395/v1"
	}
	if useLite, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: url, Model: "use-lite-v1-pad768", MaxAttempts: 1, Timeout: 10 * time.Second}); err == nil {
		if _, err := useLite.Embed(ctx, []string{"is it there?"}); err == nil {
			vs = append(vs, &variant{name: "use-lite", metric: "use-lite", svc: knowledge.New(app, knowledge.Options{Embedder: useLite})})
		} else {
			logf("use-lite left out: %s does not answer (%v); ../shared/tools/embedserver/run.sh starts it", url, err)
		}
	}

	store := func(v *variant, ifSimilar string) time.Duration {
		title, body, tags := gen.entry(rng)
		start := time.Now()
		r, err := v.svc.Store(ctx, c, knowledge.StoreInput{Title: title, Body: body, Tags: tags, IfSimilar: ifSimilar})
		el := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if ifSimilar == "" && v.name != "local" && !r.SimilarPending {
			b.Fatalf("%s: a default store owes no check: %+v", v.name, r)
		}
		return el
	}
	for range 20 { // warm the pools' connections and the plans
		for _, v := range vs {
			store(v, "")
		}
	}
	before := map[string]int64{}
	for _, v := range vs {
		if v.requests != nil {
			before[v.name] = v.requests.Load()
		}
	}
	for range stores {
		for _, v := range vs {
			v.lat = append(v.lat, store(v, ""))
		}
	}
	logf("org of %d entries, %d stores each, ifSimilar left out (load average %s):", size, stores, loadAvg())
	p := percentile
	base := time.Duration(0)
	for _, v := range vs {
		slices.Sort(v.lat)
		p50 := p(v.lat, 0.5)
		if v.name == "local" {
			base = p50
		}
		sent := ""
		if v.requests != nil {
			sent = fmt.Sprintf("; provider requests during them: %d", v.requests.Load()-before[v.name])
		}
		logf("  %-18s p50 %7.2f ms  p95 %7.2f ms  p99 %7.2f ms  p50 - local's %+6.2f ms%s", v.name,
			ms(p50), ms(p(v.lat, 0.95)), ms(p(v.lat, 0.99)), ms(p50-base), sent)
		b.ReportMetric(ms(p50), v.metric+"-p50-ms")
	}

	// Asking for the check by meaning: bounded by the embed budget.
	asks := max(stores/10, 5)
	logf("with ifSimilar: report (%d stores each):", asks)
	for _, v := range vs[1:] {
		var lat []time.Duration
		for range asks {
			lat = append(lat, store(v, knowledge.IfSimilarReport))
		}
		slices.Sort(lat)
		logf("  %-18s p50 %7.2f ms  max %7.2f ms", v.name, ms(p(lat, 0.5)), ms(lat[len(lat)-1]))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchEnvInt reads a benchmark's size from the environment: def when
// unset, at least least.
func benchEnvInt(b *testing.B, name string, def, least int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		b.Fatalf("%s=%q: a number of at least %d", name, v, least)
	}
	return n
}
