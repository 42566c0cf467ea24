package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
)

// The nil UUID given as any id is refused as what it is, a UUID that names
// nothing, on the argument that holds it: decoded, it would read as no id
// at all, and the answer was "is required" though an id was given. An id
// left out is still "required".
func TestNilUUIDIsRefusedAsNilNotMissing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	cs := b.session(b.agent(org, "a", allScopes, 0))
	e := b.store(cs, map[string]any{"title": "an entry", "body": "its body"})
	id, nilID := e.ID.String(), uuid.Nil.String()
	up := ok[map[string]any](t, call(t, cs, kt.ToolUploadStart, map[string]any{"title": "doc", "totalBytes": 10}))
	upload, _ := up["uploadId"].(string)

	cases := []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{kt.ToolGet, map[string]any{"id": nilID}, "id"},
		{kt.ToolForget, map[string]any{"id": nilID, "reason": "r"}, "id"},
		{kt.ToolSupersede, map[string]any{"oldId": nilID, "newId": id}, "oldId"},
		{kt.ToolSupersede, map[string]any{"oldId": id, "newId": nilID}, "newId"},
		{kt.ToolStore, map[string]any{"title": "t", "body": "b", "taskRef": map[string]any{"taskId": nilID, "kind": "produced"}}, "taskRef.taskId"},
		{kt.ToolStore, map[string]any{"title": "t", "body": "b", "clientToken": nilID}, "clientToken"},
		{kt.ToolSearch, map[string]any{"query": "q", "documentId": nilID}, "documentId"},
		{kt.ToolList, map[string]any{"documentId": nilID}, "documentId"},
		{kt.ToolList, map[string]any{"authorAgentId": nilID}, "authorAgentId"},
		{kt.ToolList, map[string]any{"taskId": nilID}, "taskId"},
		{kt.ToolLink, map[string]any{"fromId": nilID, "toId": id, "type": "RELATES_TO"}, "fromId"},
		{kt.ToolLink, map[string]any{"fromId": id, "toId": nilID, "type": "RELATES_TO"}, "toId"},
		{kt.ToolUnlink, map[string]any{"fromId": nilID, "toId": id, "type": "RELATES_TO"}, "fromId"},
		{kt.ToolUnlink, map[string]any{"fromId": id, "toId": nilID, "type": "RELATES_TO"}, "toId"},
		{kt.ToolRelations, map[string]any{"id": nilID}, "id"},
		{kt.ToolStoreDocument, map[string]any{"title": "d", "content": "# A\n\ntext", "clientToken": nilID}, "clientToken"},
		{kt.ToolUploadAppend, map[string]any{"uploadId": nilID, "index": 0, "content": "0123456789"}, "uploadId"},
		{kt.ToolUploadFinish, map[string]any{"uploadId": nilID}, "uploadId"},
		{kt.ToolUploadFinish, map[string]any{"uploadId": upload, "clientToken": nilID}, "clientToken"},
	}
	for _, c := range cases {
		e := toolErr(t, call(t, cs, c.tool, c.args))
		if e.Code != "invalid_argument" || e.Field != c.field || !strings.Contains(e.Message, "must be a non-nil UUID") {
			t.Errorf("%s %v: got %+v, want invalid_argument on %s: must be a non-nil UUID", c.tool, c.args, e, c.field)
		}
	}
	// Resources: knowledge://{id} and knowledge://tasks/{taskId} alike.
	for uri, field := range map[string]string{"knowledge://" + nilID: "id", "knowledge://tasks/" + nilID: "taskId"} {
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		var re *jsonrpc.Error
		var body kt.ErrorPayload
		if !errors.As(err, &re) || json.Unmarshal(re.Data, &body) != nil || body.Error.Field != field || !strings.Contains(body.Error.Message, "must be a non-nil UUID") {
			t.Errorf("read %s: %v, want invalid_argument on %s: must be a non-nil UUID", uri, err, field)
		}
	}
	// An id left out is missing, not nil.
	for _, tool := range []string{kt.ToolGet, kt.ToolRelations} {
		if e := toolErr(t, call(t, cs, tool, map[string]any{})); e.Field != "id" || !strings.Contains(e.Message, "is required") {
			t.Errorf("%s without an id: %+v, want id is required", tool, e)
		}
	}
}
