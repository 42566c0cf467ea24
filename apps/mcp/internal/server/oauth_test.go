package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/oauth"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/oauth/oauthtest"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// oauthSetup runs the server as an OAuth resource server of a real issuer
// made by the test (keys, metadata and JWKS over HTTP).
func oauthSetup(t *testing.T, vars ...string) (*bundle, *oauthtest.Issuer) {
	t.Helper()
	is := oauthtest.NewIssuer(t)
	return oauthSetupWith(t, is, vars...), is
}

func oauthSetupWith(t *testing.T, is *oauthtest.Issuer, vars ...string) *bundle {
	t.Helper()
	b := setup(t, setupOpts{cacheTTL: time.Minute, config: func(c *server.Config) {
		e := appenv.New(appenv.Vars(append([]string{"MCP_OAUTH_ISSUER", is.URL}, vars...)...))
		c.OAuth = oauth.ReadConfig(e)
		if err := e.Err(); err != nil {
			t.Fatal(err)
		}
	}})
	return b
}

func (b *bundle) jwtClaims(org uuid.UUID, sub, scope string) oauthtest.Claims {
	return oauthtest.Claims{"aud": b.url + server.PathMCP, "sub": sub, "org_id": org.String(), "scope": scope}
}

func TestOAuthResourceServer(t *testing.T) {
	t.Parallel()
	b, is := oauthSetup(t)
	org := b.org("acme")
	kn := b.agent(org, "scout", allScopes, 0) // an operator's token of the same agent

	// RFC 9728 metadata names the authorization server.
	res, err := http.Get(b.url + server.PathMetadata + server.PathMCP)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		Scopes               []string `json:"scopes_supported"`
	}
	json.NewDecoder(res.Body).Decode(&meta)
	res.Body.Close()
	if res.StatusCode != 200 || meta.Resource != b.url+server.PathMCP || !slices.Equal(meta.AuthorizationServers, []string{is.URL}) || !slices.Equal(meta.Scopes, tenancy.Catalogue) {
		t.Fatalf("metadata: %d %+v", res.StatusCode, meta)
	}
	// The 401 points at it, so a client can start the flow.
	ch := b.post("", initializeBody).Header.Get("WWW-Authenticate")
	if !strings.Contains(ch, `resource_metadata="`+b.url+server.PathMetadata+server.PathMCP+`"`) || !strings.Contains(ch, `scope="knowledge:read knowledge:write"`) {
		t.Errorf("401 challenge %q", ch)
	}

	// An access token of the issuer is the agent its subject names.
	read := is.Token(b.jwtClaims(org, "scout", "openid knowledge:read"))
	cs, err := b.connect(read)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := toolNames(t, cs); !slices.Equal(got, []string{kt.ToolGet, kt.ToolList, kt.ToolRelations, kt.ToolSearch}) {
		t.Errorf("tools of a knowledge:read token: %v", got)
	}
	// A write it has no scope for: 403 with the scope to step up to.
	res = b.post(read, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_knowledge","arguments":{"title":"t","body":"b"}}}`)
	ch = res.Header.Get("WWW-Authenticate")
	if res.StatusCode != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="knowledge:write"`) ||
		!strings.Contains(ch, `resource_metadata="`+b.url+server.PathMetadata+server.PathMCP+`"`) {
		t.Errorf("store with a read token: %d %q", res.StatusCode, ch)
	}
	// With the scope, the entry is the agent's, and the kn_ token of the
	// same agent sees it as its own.
	write := is.Token(b.jwtClaims(org, "scout", "knowledge:read knowledge:write"))
	ws, err := b.connect(write)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	entry := ok[struct {
		ID string `json:"id"`
	}](t, call(t, ws, kt.ToolStore, map[string]any{"title": "OAuth works", "body": "stored with an access token"}))
	ks, err := b.connect(kn.token)
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	full := ok[struct {
		CreatedByAgentID string `json:"createdByAgentId"`
	}](t, call(t, ks, kt.ToolGet, map[string]any{"id": entry.ID}))
	if full.CreatedByAgentID != kn.id.String() {
		t.Errorf("entry stored with the access token is by %q, want the agent %s", full.CreatedByAgentID, kn.id)
	}

	// Refusals: 401 with error="invalid_token", one body for every reason.
	other := oauthtest.NewIssuer(t)
	for name, tok := range map[string]string{
		"wrong audience":  is.Token(oauthtest.Claims{"aud": "https://elsewhere.example.com/mcp", "sub": "scout", "org_id": org.String()}),
		"expired":         is.Token(with(b.jwtClaims(org, "scout", "knowledge:read"), "exp", time.Now().Add(-time.Hour).Unix(), "iat", time.Now().Add(-2*time.Hour).Unix())),
		"another issuer":  other.Token(b.jwtClaims(org, "scout", "knowledge:read")),
		"alg none":        is.Unsigned(b.jwtClaims(org, "scout", "knowledge:read")),
		"unknown agent":   is.Token(b.jwtClaims(org, "newcomer", "knowledge:read")),
		"another org":     is.Token(b.jwtClaims(uuid.New(), "scout", "knowledge:read")),
		"garbage kn-like": "kn_garbage",
	} {
		res := b.post(tok, initializeBody)
		ch := res.Header.Get("WWW-Authenticate")
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(ch, `error="invalid_token"`) {
			t.Errorf("%s: %d %q, want 401 invalid_token", name, res.StatusCode, ch)
		}
	}
	agents, err := b.tenancy.ListAgents(context.Background(), org)
	if err != nil || len(agents) != 1 {
		t.Errorf("agents of the org: %v %v; no token may create one without MCP_OAUTH_CREATE_AGENTS", agents, err)
	}
}

func with(c oauthtest.Claims, kv ...any) oauthtest.Claims {
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

func TestOAuthCreatesAgentsOnFirstSightWhenConfigured(t *testing.T) {
	t.Parallel()
	b, is := oauthSetup(t, "MCP_OAUTH_CREATE_AGENTS", "true", "MCP_OAUTH_AGENT_CLAIM", "client_id")
	org := b.org("acme")
	claims := b.jwtClaims(org, "ignored", "knowledge:read")
	claims["client_id"] = "builder-7"
	cs, err := b.connect(is.Token(claims))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call(t, cs, kt.ToolSearch, map[string]any{"query": "anything"})
	agents, err := b.tenancy.ListAgents(context.Background(), org)
	if err != nil || len(agents) != 1 || agents[0].Name != "builder-7" {
		t.Fatalf("agents after the first token: %+v %v", agents, err)
	}
}

func TestOAuthIssuerDownAnswers503(t *testing.T) {
	t.Parallel()
	is := oauthtest.NewIssuer(t)
	is.Down.Store(true) // from the server's start: no key was ever fetched
	b := oauthSetupWith(t, is)
	org := b.org("acme")
	b.agent(org, "scout", allScopes, 0)
	res := b.post(is.Token(b.jwtClaims(org, "scout", "knowledge:read")), initializeBody)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("issuer down: %d (Retry-After %q), want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// A kn_ token does not depend on the issuer.
	if res := b.post(b.agent(org, "other", allScopes, 0).token, initializeBody); res.StatusCode != http.StatusOK {
		t.Errorf("kn_ token while the issuer is down: %d", res.StatusCode)
	}
}

// TestOAuthOverStdio: with MCP_PUBLIC_URL set (the audience), --stdio takes
// an access token in KNOWLEDGE_TOKEN like a kn_ token.
func TestOAuthOverStdio(t *testing.T) {
	t.Parallel()
	is := oauthtest.NewIssuer(t)
	const public = "https://mcp.example.com"
	b := setup(t, setupOpts{config: func(c *server.Config) {
		e := appenv.New(appenv.Vars("MCP_OAUTH_ISSUER", is.URL))
		c.OAuth = oauth.ReadConfig(e)
		c.PublicURL = public
		if err := e.Err(); err != nil {
			t.Fatal(err)
		}
	}})
	org := b.org("acme")
	b.agent(org, "scout", allScopes, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	claims := oauthtest.Claims{"aud": public + server.PathMCP, "sub": "scout", "org_id": org.String(), "scope": "knowledge:read"}
	wrong := oauthtest.Claims{"aud": "https://other.example.com" + server.PathMCP, "sub": "scout", "org_id": org.String(), "scope": "knowledge:read"}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second) // bounds a wrongly accepted token's session
	defer wcancel()
	unused, _ := mcp.NewInMemoryTransports()
	if err := b.srv.ServeStdio(wctx, is.Token(wrong), unused); err == nil || !strings.Contains(err.Error(), "invalid_token") {
		t.Errorf("access token for another resource over stdio: %v", err)
	}
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- b.srv.ServeStdio(ctx, is.Token(claims), st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := toolNames(t, cs); !slices.Contains(got, kt.ToolSearch) || slices.Contains(got, kt.ToolStore) {
		t.Errorf("tools of a knowledge:read access token over stdio: %v", got)
	}
	cs.Close()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Error("stdio server did not stop when the client closed")
	}
}
