package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

func gateServer() *Server {
	return &Server{cfg: Config{CallTimeout: time.Minute, MaxBodyBytes: 1 << 20},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: newMetrics()}
}

// The gate checks a call's scope unless the HTTP scope gate checked that
// very call (method, tool) in the same request: a mark for another call, or
// none (stdio), and the gate refuses as it always does.
func TestGateChecksWhatTheEdgeDidNot(t *testing.T) {
	t.Parallel()
	s := gateServer()
	reader := &tenancy.Principal{OrgID: uuid.New(), AgentID: uuid.New(), Scopes: []string{tenancy.ScopeKnowledgeRead}}
	store := call{path: toolPath, name: kt.ToolStore}
	search := call{path: toolPath, name: kt.ToolSearch}
	for _, tc := range []struct {
		name    string
		checked scopeChecked
		ran     bool
	}{
		{"checked at the edge", scopeChecked{store.key(): {}}, true},
		{"another call checked", scopeChecked{search.key(): {}}, false},
		{"nothing checked (stdio)", nil, false},
	} {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: kt.ToolStore, Arguments: json.RawMessage(`{}`)}}
		if tc.checked != nil {
			ti := authn.TokenInfo(reader)
			ti.Extra[scopeCheckedKey] = tc.checked
			req.Extra = &mcp.RequestExtra{TokenInfo: ti}
		}
		ran := false
		next := func(context.Context, string, mcp.Request) (mcp.Result, error) {
			ran = true
			return &mcp.CallToolResult{}, nil
		}
		res, err := s.gate(context.Background(), reader, toolPath, toolPath.method, req, next)
		if err != nil || ran != tc.ran {
			t.Errorf("%s: ran %v, %v; want ran %v", tc.name, ran, err, tc.ran)
		}
		if r, _ := res.(*mcp.CallToolResult); !tc.ran && (r == nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "insufficient_scope")) {
			t.Errorf("%s: answer %+v, want the insufficient_scope tool error", tc.name, res)
		}
	}
}

// The HTTP scope gate reads the body once and marks, in the request's token
// info, exactly the calls whose scope it checked and found granted: the
// tool calls and resource reads (a completion is left to the gate).
func TestScopeGateMarksWhatItChecked(t *testing.T) {
	t.Parallel()
	s := gateServer()
	reader := &tenancy.Principal{OrgID: uuid.New(), AgentID: uuid.New(), Scopes: []string{tenancy.ScopeKnowledgeRead}}
	var got scopeChecked
	bearer := auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return authn.TokenInfo(reader), nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	h := bearer(s.scopeGate("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = auth.TokenInfoFromContext(r.Context()).Extra[scopeCheckedKey].(scopeChecked)
	})))
	post := func(body string) int {
		got = nil
		r := httptest.NewRequest(http.MethodPost, PathMCP, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer kn_x")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_knowledge","arguments":{"query":"q"}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"knowledge://stats"}},` +
		`{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"knowledge://{id}"},"argument":{"name":"id","value":"a"}}},` +
		`{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`
	if code := post(batch); code != http.StatusOK {
		t.Fatalf("batch: status %d", code)
	}
	want := scopeChecked{
		{"tools/call", kt.ToolSearch, ""}:           {},
		{"resources/read", "", "knowledge://stats"}: {},
	}
	if len(got) != len(want) {
		t.Fatalf("marked %v, want %v", got, want)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("marked %v, want %v", got, want)
		}
	}
	// A refused call: 403, and the request goes no further.
	if code := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_knowledge","arguments":{"title":"t","body":"b"}}}`); code != http.StatusForbidden || got != nil {
		t.Errorf("store with a read token: status %d, marked %v", code, got)
	}
}
