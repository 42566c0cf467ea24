package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// A document uploaded in parts over Streamable HTTP: the scope, the order
// of the parts, a repeated part, another agent's and another org's calls
// (not_found), the finish answering as store_document (twice: the same
// document), and the audit trail recording every call.
func TestUploadOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{audit: true})
	org := b.org("acme")
	alice := b.agent(org, "alice", allScopes, time.Hour)
	as := b.session(alice)
	bob := b.session(b.agent(org, "bob", allScopes, time.Hour))
	reader := b.session(b.agent(org, "reader", []string{tenancy.ScopeKnowledgeRead}, time.Hour))
	eve := b.session(b.agent(b.org("other"), "eve", allScopes, time.Hour))

	for _, tool := range []string{kt.ToolUploadStart, kt.ToolUploadAppend, kt.ToolUploadFinish} {
		_, err := reader.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), tool+" needs the knowledge:write scope") {
			t.Errorf("%s with a read-only token: %v", tool, err)
		}
	}

	parts := []string{"# Runbook\n\nRestart the ", "queue workers one at a time.\n\n## Checks\n\nWatch the ", "backlog gauge.\n"}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if e := toolErr(t, call(t, as, kt.ToolUploadStart, map[string]any{"title": "Runbook", "totalBytes": knowledge.MaxUploadBytes + 1})); e.Code != "invalid_argument" || e.Field != "totalBytes" {
		t.Fatalf("start past the limit: %+v", e)
	}
	st := ok[knowledge.UploadStartResult](t, call(t, as, kt.ToolUploadStart, map[string]any{"title": "Runbook", "totalBytes": total, "tags": []string{"ops"}}))
	if st.MaxPartBytes != knowledge.MaxUploadPartBytes || st.ExpiresAt.IsZero() {
		t.Fatalf("start: %+v", st)
	}
	id := st.UploadID.String()
	appendPart := func(cs *mcp.ClientSession, index int, content string) *mcp.CallToolResult {
		return call(t, cs, kt.ToolUploadAppend, map[string]any{"uploadId": id, "index": index, "content": content})
	}
	ok[knowledge.UploadAppendResult](t, appendPart(as, 0, parts[0]))
	if r := ok[knowledge.UploadAppendResult](t, appendPart(as, 0, parts[0])); !r.Repeated || r.NextIndex != 1 {
		t.Fatalf("repeated part: %+v", r)
	}
	if e := toolErr(t, appendPart(as, 2, parts[2])); e.Code != "invalid_argument" || e.Field != "index" || !strings.Contains(e.Message, "must be 1") {
		t.Fatalf("a gap: %+v", e)
	}
	for name, cs := range map[string]*mcp.ClientSession{"another agent": bob, "another org": eve} {
		if e := toolErr(t, appendPart(cs, 1, parts[1])); e.Code != "not_found" || e.Field != "uploadId" {
			t.Fatalf("%s's append: %+v", name, e)
		}
		if e := toolErr(t, call(t, cs, kt.ToolUploadFinish, map[string]any{"uploadId": id})); e.Code != "not_found" {
			t.Fatalf("%s's finish: %+v", name, e)
		}
	}
	if e := toolErr(t, call(t, as, kt.ToolUploadFinish, map[string]any{"uploadId": id})); e.Code != "invalid_argument" || !strings.Contains(e.Message, "next index 1") {
		t.Fatalf("finish of an incomplete upload: %+v", e)
	}
	ok[knowledge.UploadAppendResult](t, appendPart(as, 1, parts[1]))
	if r := ok[knowledge.UploadAppendResult](t, appendPart(as, 2, parts[2])); r.ReceivedBytes != int64(total) || r.NextIndex != 3 {
		t.Fatalf("last part: %+v", r)
	}
	if e := toolErr(t, call(t, as, kt.ToolUploadAppend, map[string]any{"uploadId": id, "content": "x"})); e.Code != "invalid_argument" || e.Field != "index" {
		t.Fatalf("an append without index: %+v", e)
	}
	doc := ok[knowledge.DocumentResult](t, call(t, as, kt.ToolUploadFinish, map[string]any{"uploadId": id}))
	if doc.Title != "Runbook" || len(doc.Sections) != 2 || doc.Replayed {
		t.Fatalf("finish: %+v", doc)
	}
	again := ok[knowledge.DocumentResult](t, call(t, as, kt.ToolUploadFinish, map[string]any{"uploadId": id}))
	if !again.Replayed || again.ID != doc.ID {
		t.Fatalf("finish again: %+v", again)
	}
	got := ok[knowledge.Entry](t, call(t, as, kt.ToolGet, map[string]any{"id": doc.Sections[1].ID}))
	if !strings.Contains(got.Body, "Watch the backlog gauge.") {
		t.Fatalf("the second section holds %q", got.Body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range auditRows(t, b, org) {
		if r.agent == alice.id {
			names = append(names, r.name+":"+r.outcome)
		}
		if strings.Contains(r.text, "queue workers") {
			t.Fatalf("an audit record holds a part's content: %s", r.text)
		}
	}
	want := []string{
		"document_upload_start:invalid_argument", "document_upload_start:ok",
		"document_upload_append:ok", "document_upload_append:ok", "document_upload_append:invalid_argument",
		"document_upload_finish:invalid_argument",
		"document_upload_append:ok", "document_upload_append:ok", "document_upload_append:invalid_argument",
		"document_upload_finish:ok", "document_upload_finish:ok", "get_knowledge:ok",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("alice's audit records:\n%v\nwant\n%v", names, want)
	}
	var finish *auditRow
	for _, r := range auditRows(t, b, org) {
		if r.name == kt.ToolUploadFinish && r.outcome == "ok" && finish == nil {
			finish = &r
		}
	}
	if !slices.Contains(finish.ids, doc.ID) || !slices.Contains(finish.ids, doc.Sections[0].ID) {
		t.Fatalf("the finish's record names %v, not the document %v and its sections", finish.ids, doc.ID)
	}
}
