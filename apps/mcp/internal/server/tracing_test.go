package server_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/tracing"
)

// spans is the in-memory exporter of this test binary. OpenTelemetry's
// global provider can be installed once per process (tracers made before
// keep the first), so every test that looks at spans shares it and picks
// its own by trace id.
var (
	spansOnce sync.Once
	spans     *tracetest.InMemoryExporter
)

func recordSpans() *tracetest.InMemoryExporter {
	spansOnce.Do(func() {
		spans = tracetest.NewInMemoryExporter()
		tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	})
	return spans
}

func ofTrace(all tracetest.SpanStubs, id trace.TraceID) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range all {
		if s.SpanContext.TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range s.Attributes {
		m[a.Key] = a.Value
	}
	return m
}

// TestTracesFollowACallThroughDatabaseRedisAndQueue runs the server with
// traced clients, as run wires them with OTEL_* set, and checks the trace
// of one store: the call's server span in the caller's trace, its
// PostgreSQL and Redis child spans, the enqueue's producer span, and the
// trace context in the asynq task the worker will read.
// tracedBundle is a server wired as run wires it: with traced, its pool
// has the pgx tracer and its Redis client the redisotel hooks (tracing on);
// without, neither (tracing off, as shipped).
func tracedBundle(t testing.TB, traced bool, emb embed.Embedder, o knowledge.Options) *bundle {
	t.Helper()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	var opts []db.Option
	if traced {
		opts = append(opts, db.Tracer(tracing.PgxTracer()))
	}
	// As the server connects: the application's role, under row-level
	// security.
	appURL, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	appURL.User = url.User(db.DefaultAppRole)
	pool, err := db.Connect(appURL.String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rdb := redis.NewClient(r.Options)
	t.Cleanup(func() { rdb.Close() })
	if traced {
		if err := tracing.InstrumentRedis(rdb); err != nil {
			t.Fatal(err)
		}
	}
	queue := asynq.NewClientFromRedisClient(rdb)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Embedder, o.Redis, o.Enqueuer, o.Logger = emb, rdb, jobs.NewEnqueuer(queue), logger
	svc := knowledge.New(pool, o)
	cfg, err := server.ConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.RateLimits = ratelimit.Limits{} // no limits: the benchmark calls as fast as it can
	ten := tenancy.New(pool)
	srv := server.New(cfg, server.Deps{Knowledge: svc, Tokens: ten, Redis: rdb, RateSettings: ten, Logger: logger, DBSlots: int(pool.Config().MaxConns)})
	if _, err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &bundle{t: t, srv: srv, url: srv.URL(), tenancy: tenancy.New(d.Pool), svc: svc, db: d, app: pool, redis: rdb}
}

func TestTracesFollowACallThroughDatabaseRedisAndQueue(t *testing.T) {
	exp := recordSpans()
	// An OpenAI-compatible embedding provider: its requests must carry the
	// call's trace context.
	var providerTraces sync.Map
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		providerTraces.Store(r.Header.Get("traceparent"), true)
		time.Sleep(50 * time.Millisecond) // past the store's embed budget: its entry is queued
		var in struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&in)
		vec := make([]float32, embed.Dimensions)
		vec[0] = 1
		var data []map[string]any
		for i := range in.Input {
			data = append(data, map[string]any{"index": i, "embedding": vec})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(provider.Close)
	emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: provider.URL, Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	b := tracedBundle(t, true, emb, knowledge.Options{Config: knowledge.Config{QueryEmbedBudget: 10 * time.Millisecond}})
	rdb := b.redis
	org := b.org("acme")
	a := b.agent(org, "scout", allScopes, 0)

	// The caller's trace: W3C traceparent on the HTTP request.
	var traceID trace.TraceID
	var parent trace.SpanID
	rand.Read(traceID[:])
	rand.Read(parent[:])
	const secretTitle, secretBody = "Quarterly rotation of the vault key", "the vault key is hunter2"
	// ifSimilar: report, so that the store calls the provider (its check
	// by meaning); a store that does not ask never does.
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"store_knowledge","arguments":{"title":%q,"body":%q,"ifSimilar":"report"}}}`, secretTitle, secretBody)
	req, _ := http.NewRequest(http.MethodPost, b.url+server.PathMCP, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("traceparent", fmt.Sprintf("00-%s-%s-01", traceID, parent))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || strings.Contains(string(out), `"isError":true`) {
		t.Fatalf("store: %d %s", res.StatusCode, out)
	}

	// The queue's hand-over runs after the answer: wait for it. The
	// provider's answer arrives after the call's (the late vector is
	// cached): wait for its span.
	b.srv.Flush(context.Background())
	var got []tracetest.SpanStub
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got = ofTrace(exp.GetSpans(), traceID)
		done := false
		for _, s := range got {
			done = done || s.SpanKind == trace.SpanKindClient && attrs(s)["http.request.method"].AsString() == "POST"
		}
		if done || time.Now().After(deadline) {
			break
		}
	}
	var call *tracetest.SpanStub
	for i, s := range got {
		if s.Name == "tools/call "+kt.ToolStore {
			call = &got[i]
		}
	}
	if call == nil {
		t.Fatalf("no span tools/call %s in the caller's trace; spans: %v", kt.ToolStore, names(got))
	}
	if call.Parent.SpanID() != parent || call.SpanKind != trace.SpanKindServer {
		t.Errorf("call span: parent %s kind %v, want the caller's span %s, server", call.Parent.SpanID(), call.SpanKind, parent)
	}
	ca := attrs(*call)
	for k, want := range map[attribute.Key]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": kt.ToolStore, "gen_ai.operation.name": "update_memory",
		"gen_ai.memory.store.id": org.String(), "gen_ai.agent.id": a.id.String(), "knowledge.outcome": "ok",
	} {
		if ca[k].AsString() != want {
			t.Errorf("call span %s = %q, want %q", k, ca[k].AsString(), want)
		}
	}
	// Children: PostgreSQL, Redis, the enqueue; nothing carries content.
	kids := map[string]int{}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range got {
		byID[s.SpanContext.SpanID()] = s
	}
	var send *tracetest.SpanStub
	for i, s := range got {
		for _, a := range s.Attributes {
			if v := a.Value.String(); strings.Contains(v, "hunter2") || strings.Contains(v, "Quarterly rotation") {
				t.Errorf("span %q attribute %s carries content: %q", s.Name, a.Key, v)
			}
		}
		if s.SpanContext.SpanID() == call.SpanContext.SpanID() || !descends(s, call.SpanContext.SpanID(), byID) {
			continue
		}
		sa := attrs(s)
		switch {
		case sa["db.system.name"].AsString() == "postgresql":
			kids["postgresql"]++
		case sa["db.system.name"].AsString() == "redis" || sa["db.system"].AsString() == "redis":
			kids["redis"]++
		case s.Name == "send "+jobs.Queue:
			kids["send"]++
			send = &got[i]
		case s.SpanKind == trace.SpanKindClient && sa["http.request.method"].AsString() == "POST":
			kids["embedding provider"]++
			if _, ok := providerTraces.Load(fmt.Sprintf("00-%s-%s-01", traceID, s.SpanContext.SpanID())); !ok {
				t.Errorf("the provider's request did not carry the client span's trace context")
			}
		}
	}
	if kids["postgresql"] == 0 || kids["redis"] == 0 || kids["send"] != 1 || kids["embedding provider"] == 0 {
		t.Errorf("children of the call span: %v (spans %v); want PostgreSQL, Redis, the embedding provider and one send", kids, names(got))
	}
	// The task the worker reads carries the send span's trace context.
	if send != nil {
		insp := asynq.NewInspectorFromRedisClient(rdb)
		var found bool
		groups, err := insp.Groups(jobs.Queue)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			tasks, err := insp.ListAggregatingTasks(jobs.Queue, g.Group)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range tasks {
				tp := tk.Headers["traceparent"]
				if tp == fmt.Sprintf("00-%s-%s-01", traceID, send.SpanContext.SpanID()) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no waiting embedding task carries the traceparent of the send span %s", send.SpanContext.SpanID())
		}
	}
}

func descends(s tracetest.SpanStub, ancestor trace.SpanID, byID map[trace.SpanID]tracetest.SpanStub) bool {
	for range 32 {
		p := s.Parent.SpanID()
		if p == ancestor {
			return true
		}
		next, ok := byID[p]
		if !ok {
			return false
		}
		s = next
	}
	return false
}

func names(ss []tracetest.SpanStub) []string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	b, _ := json.Marshal(n)
	return []string{string(b)}
}
