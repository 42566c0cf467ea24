package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/tracing"
)

// BenchmarkSearchTracing measures what tracing costs a search over MCP:
// sequential search_knowledge calls over real HTTP, against real
// PostgreSQL (as the application's role) and Redis, on a corpus of
// searchTracingCorpus entries (embedded, indexed, upkept). BENCH_TRACING
// picks the set-up (OpenTelemetry's global provider is set once a
// process, so "off" and "on" are two runs):
//
//	go test -run '^$' -bench SearchTracing -benchtime 1x ./apps/mcp/internal/server                              # off, as shipped
//	BENCH_TRACING=on go test -run '^$' -bench SearchTracing -benchtime 1x ./apps/mcp/internal/server             # on, every call sampled
//	BENCH_TRACING=interleaved go test -run '^$' -bench SearchTracing -benchtime 1x ./apps/mcp/internal/server    # both in one run
//
// "on" is the production set-up (tracing.Setup from the OTEL_* variables)
// with OTEL_EXPORTER_OTLP_ENDPOINT pointing to a local stand-in collector
// (an HTTP server taking the OTLP/HTTP posts; they are decoded, to count
// the spans, only after the timed calls) and OTEL_TRACES_SAMPLER=always_on:
// the call's span and every pgx statement, pool acquire and Redis command
// under it, batched by the SDK's span processor. "interleaved" is the same
// provider whose sampler takes every other call, so the sampled and the
// unsampled calls meet the same load (this machine is shared); an
// unsampled call still starts a non-recording span, which "off" does not.
// BENCH_TRACING_SAMPLES sets the number of timed calls (default 600).
// docs/benchmarks.md has the figures.
func BenchmarkSearchTracing(b *testing.B) {
	const searchTracingCorpus = 2000
	searchTracingSamples := 600
	if n, err := strconv.Atoi(os.Getenv("BENCH_TRACING_SAMPLES")); err == nil && n > 0 {
		searchTracingSamples = n // more calls, a steadier p50 on a busy machine
	}
	mode := os.Getenv("BENCH_TRACING")
	if mode == "" {
		mode = "off"
	}
	ctx := context.Background()
	var mu sync.Mutex
	var bodies [][]byte
	var sample atomic.Bool // interleaved: whether the next call is sampled
	var provider *sdktrace.TracerProvider
	if mode != "off" {
		standin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
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
		var opts []sdktrace.TracerProviderOption
		if mode == "interleaved" {
			opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(switchSampler{&sample})))
		}
		var err error
		if provider, err = tracing.NewProvider(ctx, cfg, "bench-mcp", "bench", opts...); err != nil {
			b.Fatal(err)
		}
		tracing.Install(provider)
	}
	bd := tracedBundle(b, mode != "off", embed.NewLocal(), knowledge.Options{})
	org := bd.org("bench")
	ag := bd.agent(org, "bench", allScopes, 0)
	cs := bd.session(ag)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	appenv.PaceGC(cctx, appenv.New(os.Getenv).GCMinHeap(appenv.DefaultGCMinHeapMiB))
	// The corpus is made as the worker would, as the schema's owner; the
	// server searches it as the application's role.
	owner := knowledge.New(bd.db.Pool, knowledge.Options{Embedder: embed.NewLocal()})
	if _, err := knowledge.NewMaintenance(owner, knowledge.MaintenanceConfig{}).EnsureVectorIndex(ctx); err != nil {
		b.Fatal(err)
	}
	author := knowledge.Caller{OrgID: org, AgentID: ag.id}
	for i := range searchTracingCorpus {
		title, body := benchEntry(i)
		if _, err := owner.Store(ctx, author, knowledge.StoreInput{Title: title, Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	embedPending(b, bd.db.Pool, org)
	if _, err := knowledge.NewMaintenance(owner, knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := knowledge.NewMaintenance(owner, knowledge.MaintenanceConfig{}).Upkeep(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 50 { // warm: connections, plans, caches
		sample.Store(i%2 == 0)
		call(b, cs, kt.ToolSearch, map[string]any{"query": benchQuery(searchTracingCorpus - 1 - i), "limit": 10})
	}
	if provider != nil { // what the set-up made is not the searches'
		provider.ForceFlush(ctx)
		mu.Lock()
		bodies = nil
		mu.Unlock()
	}
	load := loadAvg()
	cpu0 := cpuTime()
	lat := map[bool][]time.Duration{}
	for i := range searchTracingSamples {
		// Interleaved: sampled on even calls of even pairs and odd calls
		// of odd pairs, so neither always goes first.
		sampled := mode == "on" || mode == "interleaved" && (i%2 == 0) == (i/2%2 == 0)
		sample.Store(sampled)
		q := benchQuery(i * 7 % (searchTracingCorpus - 50))
		start := time.Now()
		res := call(b, cs, kt.ToolSearch, map[string]any{"query": q, "limit": 10})
		lat[sampled] = append(lat[sampled], time.Since(start))
		if res.IsError {
			b.Fatal(text(res))
		}
	}
	cpu := cpuTime() - cpu0
	spans, size := 0, 0
	if provider != nil {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		provider.Shutdown(sctx) // flush: what the searches exported is counted
		scancel()
		mu.Lock()
		for _, body := range bodies {
			size += len(body)
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err == nil {
				for _, rs := range req.ResourceSpans {
					for _, ss := range rs.ScopeSpans {
						spans += len(ss.Spans)
					}
				}
			}
		}
		mu.Unlock()
	}
	n := float64(searchTracingSamples)
	fmt.Printf("search tracing=%s: %d searches, load average %s -> %s; process CPU %.2f ms a search (client and server); exported %.1f spans and %.0f bytes a sampled search\n",
		mode, searchTracingSamples, load, loadAvg(), float64(cpu.Microseconds())/1000/n,
		float64(spans)/float64(max(len(lat[true]), 1)), float64(size)/float64(max(len(lat[true]), 1)))
	for _, sampled := range []bool{false, true} {
		if len(lat[sampled]) == 0 {
			continue
		}
		arm := map[bool]string{false: "unsampled", true: "sampled"}[sampled]
		if mode != "interleaved" {
			arm = mode
		}
		b.Run("search/tracing-"+arm, func(b *testing.B) {
			report(b, lat[sampled])
			if mode != "interleaved" {
				b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
			}
		})
	}
}

// switchSampler samples while its flag is set.
type switchSampler struct{ on *atomic.Bool }

func (s switchSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if s.on.Load() {
		return sdktrace.AlwaysSample().ShouldSample(p)
	}
	return sdktrace.NeverSample().ShouldSample(p)
}

func (switchSampler) Description() string { return "switch" }

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
