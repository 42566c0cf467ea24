package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// store_document over Streamable HTTP: the write scope, a document of
// sections read back and found, a replacement, another org, and the body
// limit raised for this tool alone.
func TestStoreDocumentOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	writer := b.session(b.agent(org, "writer", []string{tenancy.ScopeKnowledgeRead, tenancy.ScopeKnowledgeWrite}, 0))
	reader := b.session(b.agent(org, "reader", []string{tenancy.ScopeKnowledgeRead}, 0))
	stranger := b.session(b.agent(b.org("other"), "eve", allScopes, 0))

	doc := "# Install\n\nRun the installer.\n\n# Operate\n\nWatch the gauges.\n"
	args := map[string]any{"title": "Pump manual", "content": doc, "source": "docs/pumps.md", "tags": []string{"pumps"}}
	_, err := reader.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolStoreDocument, Arguments: args})
	if err == nil || !strings.Contains(err.Error(), "store_document needs the knowledge:write scope") {
		t.Fatalf("store_document with read only: %v", err)
	}
	r := ok[knowledge.DocumentResult](t, call(t, writer, kt.ToolStoreDocument, args))
	if len(r.Sections) != 2 || r.Sections[1].HeadingPath[0] != "Operate" || r.QuotaUnits != 3 {
		t.Fatalf("store_document: %+v", r)
	}
	got := ok[map[string]any](t, call(t, reader, kt.ToolGet, map[string]any{"id": r.ID}))
	secs, _ := got["document"].(map[string]any)["sections"].([]any)
	if len(secs) != 2 {
		t.Fatalf("get_knowledge of the document: %v", got["document"])
	}
	listed := ok[knowledge.ListResult](t, call(t, reader, kt.ToolList, map[string]any{"documentId": r.ID}))
	if len(listed.Hits) != 2 {
		t.Errorf("list_knowledge with documentId: %d hits, want the 2 sections", len(listed.Hits))
	}
	if e := toolErr(t, call(t, stranger, kt.ToolGet, map[string]any{"id": r.ID})); e.Code != "not_found" {
		t.Errorf("another org's get: %+v", e)
	}
	if e := toolErr(t, call(t, writer, kt.ToolStoreDocument, map[string]any{"title": "x", "content": "y", "format": "pdf"})); e.Code != "invalid_argument" || e.Field != "format" {
		t.Errorf("bad format: %+v", e)
	}
	args["content"] = strings.Replace(doc, "gauges", "dials", 1)
	r2 := ok[knowledge.DocumentResult](t, call(t, writer, kt.ToolStoreDocument, args))
	if !r2.Replaced || r2.ID != r.ID || r2.Kept != 1 || r2.Changed != 1 {
		t.Fatalf("replacement: %+v", r2)
	}
}

func TestDocumentBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxBody: 64 << 10})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	content := strings.Repeat("Pumps move water.\n", (200<<10)/18)
	msg := func(tool string, args map[string]any) string {
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
		return string(raw)
	}
	// 200 KiB: over MCP_MAX_BODY_BYTES, taken by store_document alone.
	res := b.post(a.token, msg(kt.ToolStoreDocument, map[string]any{"title": "Big", "content": content}))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("store_document of 200 KiB: status %d", res.StatusCode)
	}
	if res := b.post(a.token, msg(kt.ToolStore, map[string]any{"title": "Big", "body": content})); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("store_knowledge of 200 KiB: status %d, want 413", res.StatusCode)
	}
	huge := strings.Repeat("x", knowledge.MaxDocumentBytes+1)
	res = b.post(a.token, msg(kt.ToolStoreDocument, map[string]any{"title": "Huge", "content": huge}))
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(raw)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "invalid_argument") || !strings.Contains(body, fmt.Sprint(knowledge.MaxDocumentBytes)) {
		t.Errorf("store_document over the content limit: %d %s; want a tool error naming the limit", res.StatusCode, body[:min(len(body), 300)])
	}
}
