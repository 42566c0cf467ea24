package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// outputSchemas are the outputSchema of every tool as tools/list publishes
// them (the same registration as the server's, listed over an in-memory
// session), resolved for validation.
var outputSchemas = sync.OnceValues(func() (map[string]*jsonschema.Resolved, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "schemas", Version: "v0"}, nil)
	kt.Register(srv, nil, kt.Options{})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "schemas", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*jsonschema.Resolved, len(lr.Tools))
	for _, tool := range lr.Tools {
		if tool.OutputSchema == nil {
			return nil, fmt.Errorf("tool %s has no outputSchema", tool.Name)
		}
		raw, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			return nil, err
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("tool %s: outputSchema: %w", tool.Name, err)
		}
		if out[tool.Name], err = s.Resolve(nil); err != nil {
			return nil, fmt.Errorf("tool %s: outputSchema: %w", tool.Name, err)
		}
	}
	return out, nil
})

// answersChecked counts the tool answers the checking transport validated
// (TestOutputSchemasHoldOnEveryTool asserts it ran).
var answersChecked atomic.Int64

// checkAnswer validates one tools/call answer (the JSON-RPC response body)
// of tool against its outputSchema: structuredContent must be there and
// satisfy it, on success and on error alike.
func checkAnswer(tool string, body []byte) error {
	schemas, err := outputSchemas()
	if err != nil {
		return err
	}
	var msg struct {
		Result *struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return fmt.Errorf("%s: answer is not JSON: %v", tool, err)
	}
	if msg.Result == nil {
		return nil // a JSON-RPC error (unknown tool, a refusal before the tool): no tool answer
	}
	s, ok := schemas[tool]
	if !ok {
		if msg.Result.IsError {
			return nil // a tool this server does not have: answered by the SDK
		}
		return fmt.Errorf("%s: answered, but no outputSchema is published", tool)
	}
	if len(msg.Result.StructuredContent) == 0 {
		return fmt.Errorf("%s: answer without structuredContent: %s", tool, body)
	}
	var v any
	if err := json.Unmarshal(msg.Result.StructuredContent, &v); err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s: structuredContent does not satisfy the outputSchema: %v\n%s", tool, err, msg.Result.StructuredContent)
	}
	answersChecked.Add(1)
	return nil
}

// schemaChecking is an http.RoundTripper that validates every tools/call
// answer going through it against the tool's outputSchema: every test
// that talks to the server over HTTP checks the contract of the answers it
// gets (setup_test.go puts it under every session of the suite).
type schemaChecking struct {
	t    testing.TB
	base http.RoundTripper
}

func (c schemaChecking) RoundTrip(r *http.Request) (*http.Response, error) {
	var tool string
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		var req struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &req) == nil && req.Method == "tools/call" {
			tool = req.Params.Name
		}
	}
	resp, err := c.base.RoundTrip(r)
	if err != nil || tool == "" || resp.StatusCode != http.StatusOK ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if err := checkAnswer(tool, b); err != nil {
		c.t.Errorf("outputSchema: %v", err)
	}
	return resp, nil
}

// TestOutputSchemasHoldOnEveryTool calls every tool, to success and to a
// tool error, through the checking transport, and checks that the checker
// both ran on each answer and refuses what breaks a schema.
func TestOutputSchemasHoldOnEveryTool(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	a := b.agent(org, "a", allScopes, 0)
	cs := b.session(a)
	task := b.task(org)

	before := answersChecked.Load()
	first := b.store(cs, map[string]any{"title": "Vacuum settings", "body": "autovacuum_vacuum_scale_factor 0.05 for hot tables", "tags": []string{"postgres"},
		"taskRef": map[string]any{"taskId": task, "kind": "produced"}})
	second := b.store(cs, map[string]any{"title": "Vacuum settings, revised", "body": "autovacuum_vacuum_scale_factor 0.02 for hot tables"})
	ok[knowledge.SearchResult](t, call(t, cs, kt.ToolSearch, map[string]any{"query": "vacuum", "includeSuperseded": true}))
	ok[map[string]any](t, call(t, cs, kt.ToolList, map[string]any{"limit": 1}))
	ok[map[string]any](t, call(t, cs, kt.ToolGet, map[string]any{"id": first.ID}))
	ok[map[string]any](t, call(t, cs, kt.ToolSupersede, map[string]any{"oldId": first.ID, "newId": second.ID}))
	ok[map[string]any](t, call(t, cs, kt.ToolSupersede, map[string]any{"oldId": second.ID,
		"replacement": map[string]any{"title": "Vacuum settings, third", "body": "scale factor 0.01"}}))
	ok[map[string]any](t, call(t, cs, kt.ToolForget, map[string]any{"id": first.ID, "reason": "test"}))
	ok[map[string]any](t, call(t, cs, kt.ToolGet, map[string]any{"id": first.ID})) // the tombstone
	for _, tool := range []string{kt.ToolStore, kt.ToolSearch, kt.ToolSupersede, kt.ToolGet, kt.ToolList, kt.ToolForget} {
		toolErr(t, call(t, cs, tool, map[string]any{"nope": 1}))
	}
	if n := answersChecked.Load() - before; n < 15 {
		t.Errorf("the checking transport validated %d answers, want at least 15", n)
	}

	// The checker refuses what breaks a schema.
	for _, bad := range []string{
		`{"result":{"structuredContent":{"hits":[],"vectorSearch":true,"extra":1}}}`, // undeclared property
		`{"result":{"structuredContent":{"hits":[]}}}`,                               // a required property missing
		`{"result":{"structuredContent":{"error":{"code":"oops","message":"m"}},"isError":true}}`,
		`{"result":{"content":[]}}`, // no structured content
	} {
		if err := checkAnswer(kt.ToolSearch, []byte(bad)); err == nil {
			t.Errorf("checkAnswer accepted %s", bad)
		}
	}
}
