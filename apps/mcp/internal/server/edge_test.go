package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// blackHole is a TCP address that accepts connections and never answers: a
// hung PostgreSQL (SIGSTOP, a partition) as a client sees it.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// closedAddr is an address where nothing listens: a stopped PostgreSQL.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// postWithin posts like b.post, but gives up after patience (a client's
// patience; the old server kept such a request open for 40 s).
func (b *bundle) postWithin(patience time.Duration, token, body string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.url+server.PathMCP, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Timeout: patience}).Do(req)
	if err != nil {
		b.t.Fatalf("no answer within %s: %v", patience, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res, string(data)
}

const toolsListBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// Issue 10, point 1: a hung token store costs a prompt 503, not a request
// that never ends.
func TestTokenLookupHasADeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{tokensURL: "postgres://postgres@" + blackHole(t) + "/x?sslmode=disable",
		config: func(c *server.Config) { c.TokenTimeout = 300 * time.Millisecond }})
	a := b.agent(b.org("acme"), "a", allScopes, 0) // issued on the real database
	res, body := b.postWithin(15*time.Second, a.token, toolsListBody)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q, body %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if !strings.HasPrefix(body, "unavailable: ") {
		t.Errorf("body %q does not say unavailable", body)
	}
}

// Issue 10, point 2: a dependency outage is 503 + Retry-After, not 500.
func TestTokenStoreOutageIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{tokensURL: "postgres://postgres@" + closedAddr(t) + "/x?sslmode=disable&connect_timeout=2"})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	res, body := b.postWithin(15*time.Second, a.token, toolsListBody)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q, body %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	_, metrics := get(t, b.url+"/metrics")
	if !strings.Contains(metrics, `mcp_dependency_unavailable_total{dependency="token_store"} 1`) {
		t.Error("metrics do not count the outage")
	}
}

// blockingService holds every search until released.
type blockingService struct {
	kt.Service
	entered chan struct{}
	release chan struct{}
}

func (s *blockingService) Search(ctx context.Context, c knowledge.Caller, in knowledge.SearchInput) (*knowledge.SearchResult, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Service.Search(ctx, c, in)
}

// Issue 10, point 4: beyond MCP_MAX_INFLIGHT a request is answered 503 at
// once, and the server serves again as soon as a slot frees.
func TestOverloadIsShedAtOnce(t *testing.T) {
	t.Parallel()
	blk := &blockingService{entered: make(chan struct{}, 1), release: make(chan struct{})}
	b := setup(t, setupOpts{
		wrap:   func(s kt.Service) kt.Service { blk.Service = s; return blk },
		config: func(c *server.Config) { c.MaxInFlight = 1 },
	})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	done := make(chan int, 1)
	go func() {
		res, _ := b.postWithin(30*time.Second, a.token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_knowledge","arguments":{"query":"q"}}}`)
		done <- res.StatusCode
	}()
	<-blk.entered // the one slot is taken
	res, body := b.postWithin(15*time.Second, a.token, toolsListBody)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" || !strings.HasPrefix(body, "overloaded: ") {
		t.Fatalf("over the bound: status %d, Retry-After %q, body %q; want 503, 1, overloaded", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	close(blk.release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the call in flight answered %d", code)
	}
	if res, body := b.postWithin(15*time.Second, a.token, toolsListBody); res.StatusCode != http.StatusOK {
		t.Fatalf("after the flood: %d %s", res.StatusCode, body)
	}
	_, metrics := get(t, b.url+"/metrics")
	if !strings.Contains(metrics, "mcp_requests_shed_total 1") {
		t.Error("metrics do not count the shed request")
	}
}

// Issue 10, point 8: every refused token that may not be genuine gets the
// same 401 body.
func TestEvery401HasOneBody(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	good := b.agent(org, "a", allScopes, 0)
	forged := good.token[:len(good.token)-4] + "AAAA"
	if forged == good.token {
		forged = good.token[:len(good.token)-4] + "BBBB"
	}
	headers := map[string]string{
		"missing":   "",
		"basic":     "Basic dXNlcjpwYXNz",
		"no token":  "Bearer",
		"garbage":   "Bearer not-a-token",
		"forged":    "Bearer " + forged,
		"two parts": "Bearer a b",
	}
	bodies := map[string]string{}
	for name, h := range headers {
		req, _ := http.NewRequest(http.MethodPost, b.url+server.PathMCP, strings.NewReader(initializeBody))
		req.Header.Set("Content-Type", "application/json")
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d", name, res.StatusCode)
		}
		bodies[name] = string(data)
	}
	want := `{"error":"invalid_token","error_description":"` + authn.Generic + `"}` + "\n"
	for name, body := range bodies {
		if body != want {
			t.Errorf("%s: body %q, want %q", name, body, want)
		}
	}
}

// Issue 10, point 5: the scope gate and the SDK read one and the same
// request; bodies that two readers could read differently are refused.
func TestScopeGateAndSDKReadOneRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	reader := b.agent(org, "r", []string{tenancy.ScopeKnowledgeRead}, 0)
	forbidden := map[string]string{
		"case-variant key":    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_knowledge","Name":"search_knowledge","arguments":{"title":"t","body":"b"}}}`,
		"case-variant method": `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"tools/list","params":{"name":"store_knowledge","Name":"search_knowledge","arguments":{"title":"t","body":"b"}}}`,
	}
	for name, body := range forbidden {
		if res := b.post(reader.token, body); res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, res.StatusCode)
		}
	}
	search := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_knowledge","arguments":{"query":"q"}}}`
	refused := map[string]string{
		"trailing data":      search + ` xyz`,
		"two values":         search + search,
		"store after":        search + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_knowledge","arguments":{"title":"t","body":"b"}}}`,
		"duplicate name":     `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_knowledge","name":"search_knowledge","arguments":{"query":"q"}}}`,
		"duplicate method":   `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"search_knowledge","arguments":{"query":"q"}}}`,
		"batch, then more":   `[` + search + `] []`,
		"not JSON":           `{"jsonrpc":`,
		"trailing forbidden": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_knowledge","Name":"search_knowledge","arguments":{"title":"t","body":"b"}}} xyz`,
	}
	for name, body := range refused {
		res := b.post(reader.token, body)
		data, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), `"code":-32`) {
			t.Errorf("%s: status %d %s, want 400 with a JSON-RPC error", name, res.StatusCode, data)
		}
	}
	// Nothing was written by any of them.
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM knowledge").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d entries (%v), want 0", n, err)
	}
	// White space around one value is fine.
	if res := b.post(reader.token, "\n "+search+" \n"); res.StatusCode != http.StatusOK {
		t.Errorf("search with white space around: %d", res.StatusCode)
	}
}

// Issue 10, point 4: a call waits for a database connection at most
// MCP_DB_WAIT, then gets a retryable unavailable at once.
func TestWaitForADatabaseConnectionIsBounded(t *testing.T) {
	t.Parallel()
	blk := &blockingService{entered: make(chan struct{}, 1), release: make(chan struct{})}
	b := setup(t, setupOpts{
		wrap:    func(s kt.Service) kt.Service { blk.Service = s; return blk },
		dbSlots: 1,
		config:  func(c *server.Config) { c.DBWait = 200 * time.Millisecond },
	})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.postWithin(30*time.Second, a.token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_knowledge","arguments":{"query":"q"}}}`)
	}()
	<-blk.entered // the one connection slot is taken
	e := toolErr(t, call(t, b.session(a), kt.ToolStore, map[string]any{"title": "t", "body": "b"}))
	if e.Code != "unavailable" || !e.Retryable || e.RetryAfterMs <= 0 || !strings.Contains(e.Message, "busy") {
		t.Fatalf("no connection within MCP_DB_WAIT: %+v", e)
	}
	close(blk.release)
	<-done
	b.store(b.session(a), map[string]any{"title": "t", "body": "b"})
	_, metrics := get(t, b.url+"/metrics")
	if !strings.Contains(metrics, `mcp_dependency_unavailable_total{dependency="db_pool"} 1`) {
		t.Error("metrics do not count the refused call")
	}
}
