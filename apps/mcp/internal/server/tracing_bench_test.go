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
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tracing"
)

// BenchmarkSearchTracing measures what tracing costs a search over MCP:
// the p50 of searchTracingSamples sequential search_knowledge calls over
// real HTTP, against real PostgreSQL (as the application's role) and Redis, on a corpus of
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
	var posts, bytes, spanCount atomic.Int64
	var shutdown func(context.Context) error
	if on {
		standin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err == nil {
				for _, rs := range req.ResourceSpans {
					for _, ss := range rs.ScopeSpans {
						spanCount.Add(int64(len(ss.Spans)))
					}
				}
			}
			posts.Add(1)
			bytes.Add(int64(len(body)))
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
	// The corpus is made as the worker would, as the schema's owner; the
	// server searches it as the application's role.
	owner := knowledge.New(bd.db.Pool, knowledge.Options{Embedder: embed.NewLocal()})
	if _, err := owner.EnsureVectorIndex(ctx); err != nil {
		b.Fatal(err)
	}
	author := knowledge.Caller{OrgID: org, AgentID: ag.id}
	for i := range searchTracingCorpus {
		title, body := benchEntry(i)
		if _, err := owner.Store(ctx, author, knowledge.StoreInput{Title: title, Body: body}); err != nil {
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
	if _, err := owner.IndexAll(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Upkeep(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 50 { // warm: connections, plans, caches
		call(b, cs, kt.ToolSearch, map[string]any{"query": benchQuery(searchTracingCorpus - 1 - i), "limit": 10})
	}
	if on { // what the set-up made is not the searches'
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error }).ForceFlush(sctx)
		scancel()
	}
	posts0, bytes0, spans0 := posts.Load(), bytes.Load(), spanCount.Load()
	load := loadAvg()
	cpu0 := cpuTime()
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
	cpu := cpuTime() - cpu0
	arm := "off"
	if on {
		arm = "on"
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		shutdown(sctx) // flush: what the searches exported is counted
		scancel()
	}
	n := float64(searchTracingSamples)
	fmt.Printf("search tracing=%s: %d searches, load average %s -> %s; process CPU %.2f ms a search (client and server); exported %d OTLP posts, %.1f spans and %.0f bytes a search\n",
		arm, searchTracingSamples, load, loadAvg(), float64(cpu.Microseconds())/1000/n, posts.Load()-posts0,
		float64(spanCount.Load()-spans0)/n, float64(bytes.Load()-bytes0)/n)
	b.Run("search/tracing-"+arm, func(b *testing.B) {
		report(b, lat)
		b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
	})
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
