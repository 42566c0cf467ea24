package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// post sends one raw JSON-RPC message to /mcp.
func (b *bundle) post(token, body string) *http.Response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+server.PathMCP, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestUnauthenticatedRequestsGet401WithChallenge(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cacheTTL: time.Hour}) // the cache must not keep revoked or expired tokens alive here
	org := b.org("acme")
	good := b.agent(org, "a", allScopes, 0)
	revoked := b.token(good, allScopes, 0)
	expiring := b.token(good, allScopes, time.Second)
	// Warm the cache with both, so the test shows the cache does not hide
	// expiry; revocation is bounded by the TTL (tested separately).
	for _, tok := range []string{good.token, expiring.token} {
		if res := b.post(tok, initializeBody); res.StatusCode != http.StatusOK {
			t.Fatalf("valid token refused: %d", res.StatusCode)
		}
	}
	if _, err := b.tenancy.RevokeToken(context.Background(), &org, revoked.tokenID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the 1 s expiry

	// A token that looks real but names another secret.
	forged := good.token[:len(good.token)-4] + "AAAA"
	if forged == good.token {
		forged = good.token[:len(good.token)-4] + "BBBB"
	}
	cases := map[string]string{
		"missing": "",
		"garbage": "not-a-token",
		"unknown": "kn_" + org.String() + "_00000000-0000-4000-8000-000000000000_c2VjcmV0c2VjcmV0c2VjcmV0",
		"forged":  forged,
		"revoked": revoked.token,
		"expired": expiring.token,
	}
	for name, tok := range cases {
		res := b.post(tok, initializeBody)
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, res.StatusCode)
			continue
		}
		// Without an OAuth issuer the challenge names no metadata: a
		// client must not start an OAuth flow it cannot finish.
		ch := res.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(ch, "Bearer ") || strings.Contains(ch, "resource_metadata") {
			t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge without resource_metadata", name, ch)
		}
		if presented := name != "missing"; presented != strings.Contains(ch, `error="invalid_token"`) {
			t.Errorf("%s: WWW-Authenticate %q: error=\"invalid_token\" must be there exactly when a token was presented", name, ch)
		}
		body, _ := io.ReadAll(res.Body)
		if name != "missing" && !strings.Contains(string(body), "invalid_token") {
			t.Errorf("%s: body %q does not say invalid_token", name, body)
		}
	}
	// The go-sdk client sees the refusal as a connection error.
	if _, err := b.connect(revoked.token); err == nil {
		t.Error("client connected with a revoked token")
	}
	if res := b.post(good.token, initializeBody); res.StatusCode != http.StatusOK {
		t.Errorf("good token: %d", res.StatusCode)
	}
}

func TestRevokedTokenStopsWorkingWithinTheCacheTTL(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	b := setup(t, setupOpts{cacheTTL: ttl})
	org := b.org("acme")
	a := b.agent(org, "a", allScopes, 0)
	cs := b.session(a)
	call(t, cs, kt.ToolSearch, map[string]any{"query": "warm the cache"})
	revokedAt := time.Now()
	if _, err := b.tenancy.RevokeToken(context.Background(), nil, a.tokenID); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolSearch, Arguments: map[string]any{"query": "x"}})
		if err != nil {
			if !strings.Contains(err.Error(), "Unauthorized") && !strings.Contains(err.Error(), "invalid_token") {
				t.Fatalf("refusal does not say unauthorized: %v", err)
			}
			break
		}
		if time.Since(revokedAt) > ttl+time.Second {
			t.Fatalf("revoked token still works %s after revocation (TTL %s)", time.Since(revokedAt), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNoProtectedResourceMetadataWithoutAnIssuer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// Nor the endpoints clients fall back to (the 2025-03-26 spec's
	// defaults at this origin): their answer says what to do instead.
	for _, p := range []string{server.PathMetadata, server.PathMetadata + server.PathMCP,
		"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/register", "/authorize", "/token"} {
		res, err := http.Get(b.url + p)
		if p == "/register" || p == "/token" {
			res, err = http.Post(b.url+p, "application/json", strings.NewReader(`{"redirect_uris":["http://127.0.0.1:1/cb"]}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "names none") || !strings.Contains(string(body), "ctl token create") {
			t.Errorf("%s: %d %s, want 404 saying no authorization server is named and how to get a token", p, res.StatusCode, body)
		}
	}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func templateNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rt := range res.ResourceTemplates {
		names = append(names, rt.URITemplate)
	}
	slices.Sort(names)
	return names
}

func TestToolsListedPerScope(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	cases := []struct {
		scopes    []string
		tools     []string
		templates []string
	}{
		{[]string{tenancy.ScopeKnowledgeRead}, []string{kt.ToolGet, kt.ToolList, kt.ToolRelations, kt.ToolSearch}, []string{kt.TaskTemplate, kt.EntryTemplate}},
		{[]string{tenancy.ScopeKnowledgeWrite}, []string{kt.ToolUploadAppend, kt.ToolUploadFinish, kt.ToolUploadStart, kt.ToolLink, kt.ToolStoreDocument, kt.ToolStore, kt.ToolSupersede, kt.ToolUnlink}, nil},
		{[]string{tenancy.ScopeKnowledgeDelete}, []string{kt.ToolForget}, nil},
		{allScopes, []string{kt.ToolUploadAppend, kt.ToolUploadFinish, kt.ToolUploadStart, kt.ToolForget, kt.ToolGet, kt.ToolLink, kt.ToolList, kt.ToolRelations, kt.ToolSearch, kt.ToolStoreDocument, kt.ToolStore, kt.ToolSupersede, kt.ToolUnlink}, []string{kt.TaskTemplate, kt.EntryTemplate}},
	}
	for i, c := range cases {
		a := b.agent(org, "agent-"+string(rune('a'+i)), c.scopes, 0)
		cs := b.session(a)
		if got := toolNames(t, cs); !slices.Equal(got, c.tools) {
			t.Errorf("%v: tools %v, want %v", c.scopes, got, c.tools)
		}
		if got := templateNames(t, cs); !slices.Equal(got, c.templates) {
			t.Errorf("%v: resource templates %v, want %v", c.scopes, got, c.templates)
		}
	}
}

func TestCallsWithoutTheScopeAreRefusedNamingIt(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org := b.org("acme")
	reader := b.agent(org, "reader", []string{tenancy.ScopeKnowledgeRead}, 0)
	writer := b.agent(org, "writer", []string{tenancy.ScopeKnowledgeWrite}, 0)
	entry := b.store(b.session(writer), map[string]any{"title": "t", "body": "b"})

	checks := []struct {
		who   agent
		scope string
		do    func(cs *mcp.ClientSession) error
	}{
		{reader, tenancy.ScopeKnowledgeWrite, func(cs *mcp.ClientSession) error {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolStore, Arguments: map[string]any{"title": "t", "body": "b"}})
			return err
		}},
		{reader, tenancy.ScopeKnowledgeWrite, func(cs *mcp.ClientSession) error {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolSupersede, Arguments: map[string]any{"oldId": entry.ID, "newId": entry.ID}})
			return err
		}},
		{writer, tenancy.ScopeKnowledgeRead, func(cs *mcp.ClientSession) error {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolSearch, Arguments: map[string]any{"query": "t"}})
			return err
		}},
		{writer, tenancy.ScopeKnowledgeRead, func(cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://" + entry.ID.String()})
			return err
		}},
	}
	for i, c := range checks {
		err := c.do(b.session(c.who))
		if err == nil || !strings.Contains(err.Error(), "insufficient_scope") || !strings.Contains(err.Error(), c.scope) {
			t.Errorf("check %d: got %v, want an insufficient_scope error naming %s", i, err, c.scope)
		}
	}

	// On the wire: HTTP 403 with the RFC 6750 challenge.
	res := b.post(reader.token, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"store_knowledge","arguments":{"title":"t","body":"b"}}}`)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", res.StatusCode)
	}
	ch := res.Header.Get("WWW-Authenticate")
	if !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="knowledge:write"`) || strings.Contains(ch, "resource_metadata=") {
		t.Errorf("WWW-Authenticate %q", ch)
	}
	var rpc struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
			Data struct {
				Error kt.ErrorBody `json:"error"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&rpc); err != nil {
		t.Fatal(err)
	}
	if rpc.ID != 7 || rpc.Error.Code != kt.ErrorCodeForbidden || rpc.Error.Data.Error.Code != "forbidden" || rpc.Error.Data.Error.RequiredScope != "knowledge:write" {
		t.Errorf("body %+v", rpc)
	}
}
