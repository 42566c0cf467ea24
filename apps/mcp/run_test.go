package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// testenv.Buffer is a goroutine-safe bytes.Buffer.

func TestRunServesHTTPAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	srv := startRun(t, map[string]string{"MCP_ADDR": "127.0.0.1:0", "DATABASE_URL": d.URL, "REDIS_URL": r.URL})
	base, endpoint := srv.base, srv.base+server.PathMCP
	for _, p := range []string{"/healthz", "/readyz"} {
		res, err := http.Get(base + p)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, res, err)
		}
		res.Body.Close()
	}
	res, err := http.Post(endpoint, "application/json", strings.NewReader(`{}`))
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated POST: %v %v", res, err)
	}
	res.Body.Close()
	if err := srv.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if s := srv.logs.String(); !strings.Contains(s, `"msg":"stopped"`) {
		t.Errorf("logs lack the stop line: %s", s)
	}
}

func TestRunRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		args []string
		env  map[string]string
		// servers: DATABASE_URL and REDIS_URL name a fresh database (with
		// an entry of the local model's vectors when stored) and Redis.
		servers, stored bool
		want            string
	}{
		"bad ttl":              {env: map[string]string{"MCP_TOKEN_CACHE_TTL": "1h"}, want: "MCP_TOKEN_CACHE_TTL"},
		"bad addr":             {env: map[string]string{"MCP_ADDR": "8080"}, want: "MCP_ADDR"},
		"bad public url":       {env: map[string]string{"MCP_PUBLIC_URL": "mcp.example.com"}, want: "MCP_PUBLIC_URL"},
		"cosine floor alone":   {env: map[string]string{"SEARCH_COSINE_FLOOR": "0.3"}, want: "SEARCH_COSINE_FULL"},
		"cosine full <= floor": {env: map[string]string{"SEARCH_COSINE_FLOOR": "0.3", "SEARCH_COSINE_FULL": "0.2"}, want: "SEARCH_COSINE_FULL"},
		"extra argument":       {args: []string{"serve"}, want: "usage"},
		"stdio without token":  {args: []string{"--stdio"}, servers: true, want: "KNOWLEDGE_TOKEN"},
		"text search config":   {env: map[string]string{"SEARCH_TEXT_CONFIG": "englsh"}, servers: true, want: `SEARCH_TEXT_CONFIG="englsh"`},
		"stdio bad token":      {args: []string{"--stdio"}, env: map[string]string{"KNOWLEDGE_TOKEN": "nope"}, servers: true, want: "invalid_token"},
		// Vectors of the local model are stored; a server configured with
		// another model of another width refuses to start, naming both.
		"stored vectors of another model": {env: map[string]string{
			"EMBEDDER": "openai", "EMBEDDINGS_MODEL": "text-embedding-3-small", "EMBEDDINGS_DIMENSIONS": "1536"},
			servers: true, stored: true,
			want: "EMBEDDINGS_MODEL=text-embedding-3-small: the configured embeddings are text-embedding-3-small (1536 dimensions), but the stored vectors are local-hash-v1 (768 dimensions)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := maps.Clone(c.env)
			if env == nil {
				env = map[string]string{}
			}
			if c.servers {
				db := testenv.Postgres(t)
				if c.stored {
					testfactory.Entry(context.Background(), t, db.Pool, &testfactory.EntryOpts{Title: "t", Body: "b",
						Embedding: slices.Repeat([]float32{0.1}, 768), Model: "local-hash-v1"})
				}
				env["DATABASE_URL"], env["REDIS_URL"] = db.URL, testenv.LeaseRedis(t).URL
			}
			var out, errb testenv.Buffer
			err := run(context.Background(), c.args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
			if err == nil || !strings.Contains(err.Error()+errb.String(), c.want) {
				t.Errorf("%s: got %v (stderr %s), want an error about %s", name, err, errb.String(), c.want)
			}
		})
	}
}

// Every bad variable of the process is named in one error, the server's
// own and the embedder's alike: an operator fixes them in one go.
func TestRunNamesEveryBadVariableAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_ADDR": "localhost", "EMBEDDER": "openai", "EMBEDDINGS_MODEL": "m",
		"EMBEDDINGS_DIMENSIONS": "9000", "SEARCH_COSINE_FLOOR": "2"}
	var out, errb testenv.Buffer
	err := run(context.Background(), nil, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	for _, want := range []string{`MCP_ADDR="localhost"`, `EMBEDDINGS_DIMENSIONS="9000"`, "SEARCH_COSINE_FLOOR"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want every bad variable named, %s among them", err, want)
		}
	}
}

// proxy forwards TCP connections from a reserved address to target once
// started: a dependency that is down until start is called.
type proxy struct {
	addr, target string
	t            *testing.T
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here until start
	return &proxy{addr: addr, target: target, t: t}
}

func (p *proxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", p.target)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				io.Copy(c, u)
			}()
		}
	}()
}

func withHost(t *testing.T, raw, host string) (string, string) {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	old := u.Host
	u.Host = host
	return u.String(), old
}

// Issue 10, point 3: the server starts while PostgreSQL and Redis are both
// down, serves (not-ready, 503 for calls that need them), and recovers
// without a restart when they return.
func TestRunStartsWithDependenciesDownAndRecovers(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	tok := testfactory.Token(context.Background(), t, d.Pool, &testfactory.TokenOpts{Scopes: []string{tenancy.ScopeKnowledgeRead, tenancy.ScopeKnowledgeWrite}})
	pgProxy := newProxy(t, "")
	pgURL, pgTarget := withHost(t, d.URL, pgProxy.addr)
	pgProxy.target = pgTarget
	redisProxy := newProxy(t, "")
	redisURL, redisTarget := withHost(t, r.URL, redisProxy.addr)
	redisProxy.target = redisTarget

	srv := startRun(t, map[string]string{"MCP_ADDR": "127.0.0.1:0", "DATABASE_URL": pgURL, "REDIS_URL": redisURL})
	base, stderr := srv.base, srv.logs
	status := func(path string) (int, string) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := status("/readyz"); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, `"postgres":"unreachable"`) || !strings.Contains(body, `"redis":"unreachable"`) {
		t.Fatalf("readyz while down: %d %s", code, body)
	}
	if code, _ := status("/healthz"); code != http.StatusOK {
		t.Fatalf("healthz while down: %d", code)
	}
	list := func() *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok.Text)
		res, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := list(); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a call while PostgreSQL is down: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if !strings.Contains(stderr.String(), "postgres unreachable at start") || !strings.Contains(stderr.String(), "redis unreachable at start") {
		t.Errorf("logs do not say what is down: %s", stderr.String())
	}

	pgProxy.start()
	redisProxy.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := status("/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 30 s after the dependencies returned: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res := list(); res.StatusCode != http.StatusOK {
		t.Fatalf("a call after recovery: %d", res.StatusCode)
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// running is the server run in HTTP mode by startRun.
type running struct {
	base string          // http://ADDR, without the /mcp path
	logs *testenv.Buffer // its stderr
	// stop cancels the run and returns its error (once; t's cleanup
	// calls it too).
	stop func() error
}

// startRun runs the server with env until t ends, and returns once it
// has printed its address.
func startRun(t *testing.T, env map[string]string) running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &testenv.Buffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, nil, func(k string) string { return env[k] }, strings.NewReader(""), pw, logs)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil { // run returned: its error is waiting
		cancel()
		t.Fatalf("run printed no address (%v): %v; stderr: %s", err, <-errc, logs.String())
	}
	go io.Copy(io.Discard, pr)
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "mcp: serving ")
	if !ok || !strings.HasSuffix(endpoint, server.PathMCP) {
		cancel()
		t.Fatalf("stdout line %q", line)
	}
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(30 * time.Second):
				runErr = errors.New("run did not stop 30 s after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return running{base: strings.TrimSuffix(endpoint, server.PathMCP), logs: logs, stop: stop}
}
