package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tracing"
)

// BenchmarkSearchTracing measures what tracing costs a search over MCP:
// the p50 of searchTracingSamples sequential search_knowledge calls over
// real HTTP, against real PostgreSQL and Redis, on a corpus of
// searchTracingCorpus entries (embedded, indexed, upkept).
//
// Tracing is per process (OpenTelemetry's global provider is set once), so
// the two arms are two runs:
//
//	go test -run '^$' -bench SearchTracing -benchtime 1x ./apps/mcp/internal/server                       # off, as shipped
//	BENCH_TRACING=on go test -run '^$' -bench SearchTracing -benchtime 1x ./apps/mcp/internal/server      # on
//
// On is the production set-up with OTEL_EXPORTER_OTLP_ENDPOINT pointing to a
// local stand-in collector (an HTTP server taking OTLP/HTTP posts and
// discarding them), sampled 100% (OTEL_TRACES_SAMPLER=always_on), batched
// by the SDK's default span processor: the call's span, every pgx query,
// pool acquire, Redis command and the embedding HTTP call (the local
// embedder makes none). docs/benchmarks.md has the figures.
func BenchmarkSearchTracing(b *testing.B) {
	const searchTracingCorpus, searchTracingSamples = 2000, 600
	on := os.Getenv("BENCH_TRACING") == "on"
	ctx := context.Background()
	var posts, bytes atomic.Int64
	var shutdown func(context.Context) error
	if on {
		standin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			posts.Add(1)
			bytes.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		}))
		defer standin.Close()
		b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", standin.URL)
		b.Setenv("OTEL_TRACES_SAMPLER", "always_on")
		e := appenv.New(os.Getenv)
		cfg := tracing.ReadConfig(e)
		if err := e.Err(); err != nil || !cfg.Enabled() {
			b.Fatalf("tracing config: %+v %v", cfg, err)
		}
		var err error
		if shutdown, err = tracing.Setup(ctx, cfg, "bench-mcp", "bench"); err != nil {
			b.Fatal(err)
		}
	}
	bd := tracedBundle(b, on, embed.NewLocal(), knowledge.Options{})
	org := bd.org("bench")
	ag := bd.agent(org, "bench", allScopes, 0)
	cs := bd.session(ag)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	appenv.PaceGC(cctx, appenv.New(os.Getenv).GCMinHeap(appenv.DefaultGCMinHeapMiB))
	if _, err := bd.svc.EnsureVectorIndex(ctx); err != nil {
		b.Fatal(err)
	}
	author := knowledge.Caller{OrgID: org, AgentID: ag.id}
	for i := range searchTracingCorpus {
		title, body := benchEntry(i)
		if _, err := bd.svc.Store(ctx, author, knowledge.StoreInput{Title: title, Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	rows, err := bd.db.Pool.Query(ctx, "SELECT id FROM knowledge WHERE org_id = $1 AND embedding_status = 'pending'", org)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		b.Fatal(err)
	}
	h := jobs.NewEmbedHandler(bd.db.Pool, embed.NewLocal(), jobs.HandlerOptions{})
	for batch := range slices.Chunk(ids, 64) {
		js := make([]knowledge.EmbeddingJob, len(batch))
		for k, id := range batch {
			js[k] = knowledge.EmbeddingJob{OrgID: org, EntryID: id, Generation: 1}
		}
		if err := h.Process(ctx, js); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := bd.svc.IndexAll(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := bd.svc.Upkeep(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 50 { // warm: connections, plans, caches
		call(b, cs, kt.ToolSearch, map[string]any{"query": benchQuery(searchTracingCorpus - 1 - i), "limit": 10})
	}
	posts0 := posts.Load()
	load := loadAvg()
	lat := make([]time.Duration, 0, searchTracingSamples)
	for i := range searchTracingSamples {
		q := benchQuery(i * 7 % (searchTracingCorpus - 50))
		start := time.Now()
		res := call(b, cs, kt.ToolSearch, map[string]any{"query": q, "limit": 10})
		lat = append(lat, time.Since(start))
		if res.IsError {
			b.Fatal(text(res))
		}
	}
	arm := "off"
	if on {
		arm = "on"
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		shutdown(sctx) // flush: what the searches exported is counted
		scancel()
	}
	fmt.Printf("search tracing=%s: %d searches, load average %s -> %s; exported %d OTLP posts, %d bytes\n",
		arm, searchTracingSamples, load, loadAvg(), posts.Load()-posts0, bytes.Load())
	b.Run("search/tracing-"+arm, func(b *testing.B) { report(b, lat) })
}
