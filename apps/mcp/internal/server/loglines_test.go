package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestLogLinesPerCall: 27 calls (tool calls and resource reads, each its
// own stateless HTTP request, after the client's initialize) log one INFO
// line each, and nothing else at INFO: the SDK's session chatter is at
// DEBUG. A client's ping under 2026-07-28, a method that protocol removed,
// is logged at WARN, not ERROR. docs/benchmarks.md, "Log lines per call".
func TestLogLinesPerCall(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	b := setup(t, setupOpts{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	org := b.org("acme")
	a := b.agent(org, "a", allScopes, 0)
	cs := b.session(a)
	start := len(buf.lines())

	const calls = 27
	var ids []string
	for i := range 9 {
		st := b.store(cs, map[string]any{"title": "Runbook step " + string(rune('a'+i)), "body": "restart the worker after a deploy"})
		ids = append(ids, st.ID.String())
	}
	for i := range 9 {
		ok[map[string]any](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "restart worker"}))
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://" + ids[i]}); err != nil {
			t.Fatal(err)
		}
	}
	b.srv.Flush(context.Background()) // the calls' lines are written after their answers
	lines := buf.lines()[start:]
	byLevel := map[string]int{}
	var info []string
	for _, l := range lines {
		lv, _ := l["level"].(string)
		byLevel[lv]++
		if lv == "INFO" {
			info = append(info, l["msg"].(string))
		}
	}
	t.Logf("%d calls: %d INFO lines (%.2f a call), %d DEBUG, %d WARN, %d ERROR", calls, byLevel["INFO"],
		float64(byLevel["INFO"])/calls, byLevel["DEBUG"], byLevel["WARN"], byLevel["ERROR"])
	if byLevel["INFO"] != calls {
		t.Errorf("%d INFO lines for %d calls, want one a call: %q", byLevel["INFO"], calls, info)
	}
	for _, m := range info {
		if m != "tool call" && m != "resource read" {
			t.Errorf("INFO line %q is not a call's line", m)
		}
	}

	// ping under 2026-07-28 (which removed it): the client's mistake,
	// answered with an error, logged at WARN at most.
	start = len(buf.lines())
	req, _ := http.NewRequest(http.MethodPost, b.url+server.PathMCP, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "ping")
	req.Header.Set("Authorization", "Bearer "+a.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"error"`) {
		t.Errorf("ping under 2026-07-28 answered %d %s, want an error", res.StatusCode, body)
	}
	seen := false
	for _, l := range buf.lines()[start:] {
		if l["level"] == "ERROR" {
			t.Errorf("logged at ERROR: %v", l)
		}
		if l["msg"] == "method removed in the new protocol" {
			seen = l["level"] == "WARN"
		}
	}
	if !seen {
		t.Errorf("the removed method was not logged at WARN: %v (answer %s)", buf.lines()[start:], body)
	}
}
