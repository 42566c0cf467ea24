package server_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if code, body := get(t, b.url+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("healthz %d %s", code, body)
	}
	if code, body := get(t, b.url+"/readyz"); code != 200 || !strings.Contains(body, `"postgres":"ok"`) || !strings.Contains(body, `"redis":"ok"`) {
		t.Errorf("readyz %d %s", code, body)
	}
	cs := b.session(b.agent(b.org("acme"), "a", allScopes, 0))
	b.store(cs, map[string]any{"title": "t", "body": "b"})
	toolErr(t, call(t, cs, kt.ToolStore, map[string]any{"title": ""}))
	b.post("", initializeBody)
	_, body := get(t, b.url+"/metrics")
	for _, want := range []string{
		`mcp_tool_calls_total{outcome="ok",tool="store_knowledge"} 1`,
		`mcp_tool_calls_total{outcome="invalid_argument",tool="store_knowledge"} 1`,
		`mcp_tool_call_duration_seconds_bucket{outcome="ok",tool="store_knowledge",le=`,
		`mcp_http_requests_total{code="401",route="mcp"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestReadinessFailsWhenADependencyIsDown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.app.Close() // Postgres gone for this server
	if code, body := get(t, b.url+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"postgres":"unreachable"`) {
		t.Errorf("readyz %d %s", code, body)
	}
	if code, _ := get(t, b.url+"/healthz"); code != 200 {
		t.Errorf("healthz %d while a dependency is down", code)
	}
}

func TestRequestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxBody: 64 << 10})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_knowledge","arguments":{"title":"t","body":"` + strings.Repeat("x", 70<<10) + `"}}}`
	if res := b.post(a.token, big); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", res.StatusCode)
	}
}

// slowService delays Search so a call is in flight during shutdown.
type slowService struct {
	kt.Service
	started chan struct{}
	once    sync.Once
}

func (s *slowService) Search(ctx context.Context, c knowledge.Caller, in knowledge.SearchInput) (*knowledge.SearchResult, error) {
	s.once.Do(func() { close(s.started) })
	time.Sleep(700 * time.Millisecond)
	return s.Service.Search(ctx, c, in)
}

func TestShutdownDrainsInFlightCalls(t *testing.T) {
	t.Parallel()
	slow := &slowService{started: make(chan struct{})}
	b := setup(t, setupOpts{wrap: func(s kt.Service) kt.Service { slow.Service = s; return slow }})
	cs := b.session(b.agent(b.org("acme"), "a", allScopes, 0))
	done := make(chan *mcp.CallToolResult, 1)
	errc := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolSearch, Arguments: map[string]any{"query": "q"}})
		if err != nil {
			errc <- err
			return
		}
		done <- res
	}()
	<-slow.started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	select {
	case res := <-done:
		ok[knowledge.SearchResult](t, res)
	case err := <-errc:
		t.Fatalf("in-flight call failed during shutdown: %v", err)
	}
	if _, err := http.Get(b.url + "/healthz"); err == nil {
		t.Error("server still accepts connections after shutdown")
	}
}

var update = flag.Bool("update", false, "rewrite golden files")

// TestToolsListGolden pins the tools/list answer (names, descriptions,
// input schemas with their limits) a full-scope token sees.
func TestToolsListGolden(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	cs := b.session(b.agent(b.org("acme"), "a", allScopes, 0))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	templates, err := cs.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(map[string]any{"tools": tools.Tools, "resourceTemplates": templates.ResourceTemplates}, "", "  ")
	got = append(got, '\n')
	path := filepath.Join("testdata", "tools_list.golden.json")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestToolsListGolden -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("tools/list changed; if intended, run go test ./apps/mcp/internal/server -run TestToolsListGolden -update\n%s", got)
	}
	// Every schema forbids unknown properties and carries its limits.
	s := string(got)
	for _, want := range []string{`"additionalProperties": false`, `"maxLength": 200`, `"maxLength": 32000`, `"maxItems": 16`,
		`"format": "uuid"`, `"format": "date-time"`, `"maximum": 50`, `"maximum": 200`, `"references"`} {
		if !strings.Contains(s, want) {
			t.Errorf("schemas lack %s", want)
		}
	}
}

func TestStdioModeEnforcesScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	reader := b.agent(org, "reader", []string{"knowledge:read"}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if err := b.srv.ServeStdio(ctx, "kn_bad", nil); err == nil || !strings.Contains(err.Error(), "invalid_token") {
		t.Errorf("bad token: %v", err)
	}
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- b.srv.ServeStdio(ctx, reader.token, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := toolNames(t, cs); !slices.Equal(got, []string{kt.ToolGet, kt.ToolList, kt.ToolRelations, kt.ToolSearch}) {
		t.Errorf("tools %v", got)
	}
	e := toolErr(t, call(t, cs, kt.ToolStore, map[string]any{"title": "t", "body": "b"}))
	if e.Code != "forbidden" || e.RequiredScope != "knowledge:write" || !strings.Contains(e.Message, "insufficient_scope") {
		t.Errorf("store without scope: %+v", e)
	}
	ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "q"}))
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "knowledge://" + uuid.NewString()})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "not found") {
		t.Errorf("read missing: %v", err)
	}
	cs.Close()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Error("stdio server did not stop when the client closed")
	}
}
