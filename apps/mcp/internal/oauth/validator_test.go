package oauth

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/oauth/oauthtest"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// fakeAgents is an agent store of one org.
type fakeAgents struct {
	mu     sync.Mutex
	org    uuid.UUID
	byName map[string]uuid.UUID
	err    error
}

func (f *fakeAgents) AgentByName(_ context.Context, org uuid.UUID, name string, create bool) (*tenancy.Agent, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, false, f.err
	}
	if org != f.org {
		return nil, false, errs.ErrNotFound
	}
	if id, ok := f.byName[name]; ok {
		return &tenancy.Agent{ID: id, OrgID: org, Name: name}, false, nil
	}
	if !create {
		return nil, false, errs.ErrNotFound
	}
	id := uuid.New()
	f.byName[name] = id
	return &tenancy.Agent{ID: id, OrgID: org, Name: name}, true, nil
}

const resource = "https://mcp.example.com/mcp"

type fixture struct {
	is     *oauthtest.Issuer
	v      *Validator
	agents *fakeAgents
	org    uuid.UUID
	scout  uuid.UUID
}

func newFixture(t *testing.T, adjust func(*Config)) *fixture {
	t.Helper()
	is := oauthtest.NewIssuer(t)
	org, scout := uuid.New(), uuid.New()
	agents := &fakeAgents{org: org, byName: map[string]uuid.UUID{"scout": scout}}
	e := appenv.New(appenv.Vars("MCP_OAUTH_ISSUER", is.URL))
	cfg := ReadConfig(e)
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.Default()
	}
	v := New(cfg, agents, nil, logger)
	v.SetAudience(resource)
	return &fixture{is: is, v: v, agents: agents, org: org, scout: scout}
}

func (f *fixture) claims(extra oauthtest.Claims) oauthtest.Claims {
	c := oauthtest.Claims{"aud": resource, "sub": "scout", "org_id": f.org.String(), "scope": "openid knowledge:read knowledge:write"}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func refused(t *testing.T, name string, err error) {
	t.Helper()
	if !errors.Is(err, errs.ErrUnauthenticated) {
		t.Errorf("%s: err %v, want a refusal (ErrUnauthenticated)", name, err)
	}
}

func TestValidTokenMapsToOrgAgentAndScopes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	exp := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	p, err := f.v.VerifyToken(ctx, f.is.Token(f.claims(oauthtest.Claims{"exp": exp.Unix()})))
	if err != nil {
		t.Fatal(err)
	}
	if p.OrgID != f.org || p.AgentID != f.scout || !slices.Equal(p.Scopes, []string{"knowledge:read", "knowledge:write"}) {
		t.Errorf("principal %+v", p)
	}
	if p.ExpiresAt == nil || !p.ExpiresAt.Equal(exp.Add(DefaultClockSkew)) || p.TokenID == uuid.Nil {
		t.Errorf("expiry %v token id %v", p.ExpiresAt, p.TokenID)
	}
	// An array of scopes; a trailing slash on aud; configured claim names.
	f2 := newFixture(t, func(c *Config) { c.OrgClaim, c.AgentClaim, c.ScopeClaim = "https://fleet/org", "client_id", "scp" })
	p, err = f2.v.VerifyToken(ctx, f2.is.Token(oauthtest.Claims{
		"aud": []string{"other", resource + "/"}, "client_id": "scout", "sub": "ignored",
		"https://fleet/org": f2.org.String(), "scp": []string{"knowledge:read", "knowledge:delete", "email"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if p.AgentID != f2.scout || !slices.Equal(p.Scopes, []string{"knowledge:read", "knowledge:delete"}) {
		t.Errorf("configured claims: %+v", p)
	}
	// An ES256 key works as well as RS256.
	f.v.keys.gap = 0 // a new key id is fetched at once
	f.is.Rotate(oauthtest.NewKey(t, "ES256"), false)
	if _, err := f.v.VerifyToken(ctx, f.is.Token(f.claims(nil))); err != nil {
		t.Errorf("ES256 token: %v", err)
	}
}

func TestBadTokensAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	other := oauthtest.NewIssuer(t) // another issuer, its own keys
	now := time.Now()
	cases := map[string]string{
		"wrong audience":                     f.is.Token(f.claims(oauthtest.Claims{"aud": "https://other.example.com/mcp"})),
		"no audience":                        f.is.Token(f.claims(oauthtest.Claims{"aud": nil})),
		"expired":                            f.is.Token(f.claims(oauthtest.Claims{"exp": now.Add(-2 * time.Minute).Unix(), "iat": now.Add(-time.Hour).Unix()})),
		"no expiry":                          f.is.Token(f.claims(oauthtest.Claims{"exp": nil})),
		"not yet valid":                      f.is.Token(f.claims(oauthtest.Claims{"nbf": now.Add(5 * time.Minute).Unix()})),
		"issued in the future":               f.is.Token(f.claims(oauthtest.Claims{"iat": now.Add(5 * time.Minute).Unix()})),
		"another issuer":                     other.Token(f.claims(nil)),
		"another issuer's key claiming ours": other.TokenWith(oauthtest.NewKey(t, "RS256"), f.claims(oauthtest.Claims{"iss": f.is.URL})),
		"alg none":                           f.is.Unsigned(f.claims(nil)),
		"tampered":                           tamper(f.is.Token(f.claims(nil))),
		"no org":                             f.is.Token(f.claims(oauthtest.Claims{"org_id": nil})),
		"org not a uuid":                     f.is.Token(f.claims(oauthtest.Claims{"org_id": "acme"})),
		"another org":                        f.is.Token(f.claims(oauthtest.Claims{"org_id": uuid.NewString()})),
		"no subject":                         f.is.Token(f.claims(oauthtest.Claims{"sub": nil})),
		"unknown agent":                      f.is.Token(f.claims(oauthtest.Claims{"sub": "newcomer"})),
		"not a jwt":                          "abc.def.ghi",
	}
	// HS256 signed with the issuer's published key material as the
	// secret: the classic algorithm confusion.
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(f.claims(oauthtest.Claims{"iss": f.is.URL, "exp": now.Add(time.Hour).Unix()})))
	if s, err := hs.SignedString([]byte("public key bytes")); err == nil {
		cases["alg HS256"] = s
	}
	for name, tok := range cases {
		p, err := f.v.VerifyToken(ctx, tok)
		if p != nil {
			t.Errorf("%s: accepted as %+v", name, p)
		}
		refused(t, name, err)
	}
	if len(f.agents.byName) != 1 {
		t.Errorf("an agent was created without MCP_OAUTH_CREATE_AGENTS: %v", f.agents.byName)
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	c := []byte(parts[1])
	c[len(c)/2] ^= 1
	parts[1] = string(c)
	return strings.Join(parts, ".")
}

func TestAgentsCreatedOnFirstSightOnlyWhenConfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.CreateAgents = true })
	ctx := context.Background()
	p1, err := f.v.VerifyToken(ctx, f.is.Token(f.claims(oauthtest.Claims{"sub": "newcomer"})))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := f.v.VerifyToken(ctx, f.is.Token(f.claims(oauthtest.Claims{"sub": "newcomer"})))
	if err != nil || p2.AgentID != p1.AgentID || p1.AgentID == f.scout {
		t.Fatalf("second token of the subject: %+v %v (first %v)", p2, err, p1.AgentID)
	}
	if _, err := f.v.VerifyToken(ctx, f.is.Token(f.claims(oauthtest.Claims{"sub": "x", "org_id": uuid.NewString()}))); err == nil {
		t.Error("a token of an org that does not exist was accepted")
	}
	// The agent store down is no fault of the token.
	f.agents.err = errors.New("connection refused")
	if _, err := f.v.VerifyToken(ctx, f.is.Token(f.claims(nil))); !errors.Is(err, ErrUnavailable) {
		t.Errorf("agent store down: %v, want ErrUnavailable", err)
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.v.keys.gap = 50 * time.Millisecond
	ctx := context.Background()
	old := f.is.Token(f.claims(nil))
	if _, err := f.v.VerifyToken(ctx, old); err != nil {
		t.Fatal(err)
	}
	fetches := f.is.JWKSFetches.Load()

	// The issuer adds a key and signs with it: the unknown kid makes the
	// server fetch the set again, once.
	time.Sleep(60 * time.Millisecond)
	f.is.Rotate(oauthtest.NewKey(t, "RS256"), false)
	rotated := f.is.Token(f.claims(nil))
	for range 3 {
		if _, err := f.v.VerifyToken(ctx, rotated); err != nil {
			t.Fatalf("token of the new key: %v", err)
		}
	}
	if got := f.is.JWKSFetches.Load() - fetches; got != 1 {
		t.Errorf("JWKS fetched %d times for a rotation, want 1", got)
	}
	if _, err := f.v.VerifyToken(ctx, old); err != nil {
		t.Errorf("token of the old key while it is still published: %v", err)
	}

	// The issuer retires every old key; a token of a key it never
	// published makes the set be fetched again, after which the old key
	// is gone too.
	time.Sleep(60 * time.Millisecond)
	f.is.Rotate(oauthtest.NewKey(t, "ES256"), true)
	refused(t, "key never published", func() error {
		_, err := f.v.VerifyToken(ctx, f.is.TokenWith(oauthtest.NewKey(t, "RS256"), f.claims(nil)))
		return err
	}())
	refused(t, "retired key", func() error { _, err := f.v.VerifyToken(ctx, old); return err }())
	if _, err := f.v.VerifyToken(ctx, f.is.Token(f.claims(nil))); err != nil {
		t.Errorf("token of the newest key: %v", err)
	}

	// A flood of made-up key ids costs the issuer one fetch per gap.
	f.v.keys.gap = time.Hour
	time.Sleep(60 * time.Millisecond)
	before := f.is.JWKSFetches.Load()
	for range 20 {
		_, err := f.v.VerifyToken(ctx, f.is.TokenWith(oauthtest.NewKey(t, "ES256"), f.claims(nil)))
		refused(t, "made-up kid", err)
	}
	if got := f.is.JWKSFetches.Load() - before; got > 1 {
		t.Errorf("20 made-up key ids fetched the JWKS %d times, want at most 1", got)
	}
}

func TestStaleKeysRefreshInTheBackground(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.v.keys.refresh, f.v.keys.gap = 100*time.Millisecond, 10*time.Millisecond
	ctx := context.Background()
	tok := f.is.Token(f.claims(nil))
	if _, err := f.v.VerifyToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	before := f.is.JWKSFetches.Load()
	time.Sleep(150 * time.Millisecond)
	f.is.Down.Store(true) // stale keys keep working while the issuer is down
	if _, err := f.v.VerifyToken(ctx, tok); err != nil {
		t.Fatalf("stale key while the issuer is down: %v", err)
	}
	f.is.Down.Store(false)
	time.Sleep(50 * time.Millisecond)
	if _, err := f.v.VerifyToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for f.is.JWKSFetches.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("stale keys were never refreshed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIssuerDownIsUnavailableNotInvalid(t *testing.T) {
	t.Parallel()
	is := oauthtest.NewIssuer(t)
	is.Down.Store(true)
	org := uuid.New()
	v := New(Config{Issuer: is.URL, Algorithms: Supported, OrgClaim: "org_id", AgentClaim: "sub", ScopeClaim: "scope",
		JWKSRefresh: time.Minute, HTTPTimeout: time.Second},
		&fakeAgents{org: org, byName: map[string]uuid.UUID{"scout": uuid.New()}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	v.keys.gap = 20 * time.Millisecond
	v.SetAudience(resource)
	tok := is.Token(oauthtest.Claims{"aud": resource, "sub": "scout", "org_id": org.String()})
	time.Sleep(30 * time.Millisecond)
	if _, err := v.VerifyToken(context.Background(), tok); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("issuer down: %v, want ErrUnavailable", err)
	}
	is.Down.Store(false)
	time.Sleep(30 * time.Millisecond)
	if _, err := v.VerifyToken(context.Background(), tok); err != nil {
		t.Fatalf("issuer back: %v", err)
	}
	// A request's own deadline bounds its wait for a fetch.
	hung := oauthtest.NewIssuer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	v2 := New(Config{Issuer: "http://10.255.255.1", Algorithms: Supported, OrgClaim: "org_id", AgentClaim: "sub", ScopeClaim: "scope",
		JWKSRefresh: time.Minute, HTTPTimeout: 10 * time.Second}, &fakeAgents{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	v2.SetAudience(resource)
	start := time.Now()
	if _, err := v2.VerifyToken(ctx, hung.Token(oauthtest.Claims{"aud": resource, "iss": "http://10.255.255.1"})); !errors.Is(err, ErrUnavailable) {
		t.Errorf("unreachable issuer: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("waited %s past the request's 50ms deadline", d)
	}
}

func TestDiscoveryOrderAndIssuerCheck(t *testing.T) {
	t.Parallel()
	// An OpenID Connect provider without RFC 8414 metadata.
	is := oauthtest.NewIssuer(t)
	is.MetadataPath = "/.well-known/openid-configuration"
	org := uuid.New()
	v := New(Config{Issuer: is.URL, Algorithms: Supported, OrgClaim: "org_id", AgentClaim: "sub", ScopeClaim: "scope",
		JWKSRefresh: time.Minute, HTTPTimeout: time.Second},
		&fakeAgents{org: org, byName: map[string]uuid.UUID{"scout": uuid.New()}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	v.SetAudience(resource)
	if _, err := v.VerifyToken(context.Background(), is.Token(oauthtest.Claims{"aud": resource, "sub": "scout", "org_id": org.String()})); err != nil {
		t.Fatalf("OIDC discovery: %v", err)
	}
	got := metadataURLs("https://login.example.com/realms/fleet")
	want := []string{
		"https://login.example.com/.well-known/oauth-authorization-server/realms/fleet",
		"https://login.example.com/.well-known/openid-configuration/realms/fleet",
		"https://login.example.com/realms/fleet/.well-known/openid-configuration",
	}
	if !slices.Equal(got, want) {
		t.Errorf("metadata URLs %v, want %v", got, want)
	}
	// Metadata naming another issuer is not trusted.
	_, err := discover(context.Background(), http.DefaultClient, time.Second, is.URL+"/")
	if err == nil || !strings.Contains(err.Error(), "names issuer") {
		t.Errorf("metadata of another issuer: %v", err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	e := appenv.New(appenv.Vars())
	if c := ReadConfig(e); c.Enabled() || e.Err() != nil {
		t.Errorf("default: enabled %v, err %v", c.Enabled(), e.Err())
	}
	e = appenv.New(appenv.Vars("MCP_OAUTH_ISSUER", "https://login.example.com/", "MCP_OAUTH_ALGORITHMS", "RS256, ES256,RS256"))
	c := ReadConfig(e)
	if e.Err() != nil || !slices.Equal(c.Algorithms, []string{"RS256", "ES256"}) || c.Issuer != "https://login.example.com/" || c.CreateAgents {
		t.Errorf("%+v %v", c, e.Err())
	}
	for _, bad := range [][]string{
		{"MCP_OAUTH_ISSUER", "http://login.example.com"},
		{"MCP_OAUTH_ISSUER", "login.example.com"},
		{"MCP_OAUTH_ALGORITHMS", "none"},
		{"MCP_OAUTH_ALGORITHMS", "HS256"},
		{"MCP_OAUTH_JWKS_URL", "https://login.example.com/jwks"}, // without an issuer
		{"MCP_OAUTH_CREATE_AGENTS", "maybe"},
	} {
		vars := []string{"MCP_OAUTH_ISSUER", "https://login.example.com"}
		if bad[0] == "MCP_OAUTH_ISSUER" || bad[0] == "MCP_OAUTH_JWKS_URL" {
			vars = nil
		}
		e := appenv.New(appenv.Vars(append(vars, bad...)...))
		ReadConfig(e)
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%q: %v, want an error naming the variable", bad[0], bad[1], err)
		}
	}
}
