package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesHTTPAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	env := map[string]string{"MCP_ADDR": "127.0.0.1:0", "DATABASE_URL": d.URL, "REDIS_URL": r.URL}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, nil, func(k string) string { return env[k] }, strings.NewReader(""), pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line (%v); stderr: %s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "mcp: serving ")
	if !ok || !strings.HasSuffix(endpoint, "/mcp") {
		t.Fatalf("stdout line %q", line)
	}
	base := strings.TrimSuffix(endpoint, "/mcp")
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
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop after cancel")
	}
	if s := stderr.String(); !strings.Contains(s, `"msg":"stopped"`) {
		t.Errorf("logs lack the stop line: %s", s)
	}
}

func TestRunRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"bad ttl":              {nil, map[string]string{"MCP_TOKEN_CACHE_TTL": "1h"}, "MCP_TOKEN_CACHE_TTL"},
		"bad public url":       {nil, map[string]string{"MCP_PUBLIC_URL": "mcp.example.com"}, "MCP_PUBLIC_URL"},
		"cosine floor alone":   {nil, map[string]string{"SEARCH_COSINE_FLOOR": "0.3"}, "SEARCH_COSINE_FULL"},
		"cosine full <= floor": {nil, map[string]string{"SEARCH_COSINE_FLOOR": "0.3", "SEARCH_COSINE_FULL": "0.2"}, "SEARCH_COSINE_FULL"},
		"extra argument":       {[]string{"serve"}, nil, "usage"},
		"stdio without token":  {[]string{"--stdio"}, map[string]string{"DATABASE_URL": testenv.Postgres(t).URL, "REDIS_URL": testenv.LeaseRedis(t).URL}, "KNOWLEDGE_TOKEN"},
		"text search config":   {nil, map[string]string{"DATABASE_URL": testenv.Postgres(t).URL, "REDIS_URL": testenv.LeaseRedis(t).URL, "SEARCH_TEXT_CONFIG": "englsh"}, `SEARCH_TEXT_CONFIG="englsh"`},
		"stdio bad token":      {[]string{"--stdio"}, map[string]string{"DATABASE_URL": testenv.Postgres(t).URL, "REDIS_URL": testenv.LeaseRedis(t).URL, "KNOWLEDGE_TOKEN": "nope"}, "invalid_token"},
	}
	for name, c := range cases {
		var out, errb syncBuffer
		err := run(context.Background(), c.args, func(k string) string { return c.env[k] }, strings.NewReader(""), &out, &errb)
		if err == nil || !strings.Contains(err.Error()+errb.String(), c.want) {
			t.Errorf("%s: got %v (stderr %s), want an error about %s", name, err, errb.String(), c.want)
		}
	}
}
