package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/oauth/oauthtest"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// refusal reads a 401: the error_description of its challenge and of its
// JSON body, which must agree.
func refusal(t *testing.T, name string, res *http.Response) string {
	t.Helper()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("%s: status %d, want 401", name, res.StatusCode)
		return ""
	}
	ch := res.Header.Get("WWW-Authenticate")
	_, after, ok := strings.Cut(ch, `error_description="`)
	inHeader, _, closed := strings.Cut(after, `"`)
	if !ok || !closed || !strings.Contains(ch, `error="invalid_token"`) {
		t.Errorf("%s: WWW-Authenticate %q, want error=\"invalid_token\" and an error_description", name, ch)
	}
	var body struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	data, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(data, &body); err != nil || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: body %q (%s), want JSON: %v", name, data, res.Header.Get("Content-Type"), err)
	}
	if body.Error != "invalid_token" || body.Description != inHeader {
		t.Errorf("%s: body %q, challenge's error_description %q: they must agree", name, data, inHeader)
	}
	return inHeader
}

// A genuine kn_ token (its secret verifies) that is revoked or expired is
// refused with its reason, cached or not; unknown, malformed and forged
// tokens get one generic answer. Over HTTP and in stdio's start-up error.
func TestRefusalOfAGenuineTokenSaysWhy(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cacheTTL: time.Hour})
	org := b.org("acme")
	good := b.agent(org, "a", allScopes, 0)
	revoked := b.token(good, allScopes, 0)
	expiring := b.token(good, allScopes, time.Second)
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	expired := testfactory.Token(context.Background(), t, b.db.Pool, &testfactory.TokenOpts{OrgID: org, AgentID: good.id, ExpiresAt: &past})
	revokedExpired := testfactory.Token(context.Background(), t, b.db.Pool, &testfactory.TokenOpts{OrgID: org, AgentID: good.id, ExpiresAt: &past, RevokedAt: &past})
	if res := b.post(expiring.token, initializeBody); res.StatusCode != http.StatusOK { // cached from here
		t.Fatalf("valid token refused: %d", res.StatusCode)
	}
	if _, err := b.tenancy.RevokeToken(context.Background(), &org, revoked.tokenID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past expiring's 1 s

	want := map[string]string{
		"revoked":              "the bearer token was revoked at ",
		"expired":              "the bearer token expired at " + past.UTC().Format(time.RFC3339) + "; a new token is needed",
		"expired while cached": "the bearer token expired at ",
		"revoked and expired":  "the bearer token was revoked at " + past.UTC().Format(time.RFC3339),
	}
	tokens := map[string]string{
		"revoked":              revoked.token,
		"expired":              expired.Text,
		"expired while cached": expiring.token,
		"revoked and expired":  revokedExpired.Text,
	}
	for name, tok := range tokens {
		if got := refusal(t, name, b.post(tok, initializeBody)); !strings.HasPrefix(got, want[name]) {
			t.Errorf("%s: error_description %q, want it to start %q", name, got, want[name])
		}
	}

	// Whoever does not hold the secret learns nothing: a revoked or expired
	// token's id with a wrong secret reads as an unknown token.
	forge := func(tok string) string {
		if f := tok[:len(tok)-4] + "AAAA"; f != tok {
			return f
		}
		return tok[:len(tok)-4] + "BBBB"
	}
	for name, tok := range map[string]string{
		"garbage":        "not-a-token",
		"kn garbage":     "kn_garbage",
		"unknown":        unknownToken(org),
		"forged":         forge(good.token),
		"forged revoked": forge(revoked.token),
		"forged expired": forge(expired.Text),
	} {
		if got := refusal(t, name, b.post(tok, initializeBody)); got != authn.Generic {
			t.Errorf("%s: error_description %q, want the generic %q", name, got, authn.Generic)
		}
	}

	// stdio says the same at start-up.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, tok := range tokens {
		unused, _ := mcp.NewInMemoryTransports()
		err := b.srv.ServeStdio(ctx, tok, unused)
		if err == nil || !strings.HasPrefix(err.Error(), "KNOWLEDGE_TOKEN: invalid_token: "+want[name]) {
			t.Errorf("stdio, %s: %v, want it to start %q", name, err, "KNOWLEDGE_TOKEN: invalid_token: "+want[name])
		}
	}
	unused, _ := mcp.NewInMemoryTransports()
	if err := b.srv.ServeStdio(ctx, forge(revoked.token), unused); err == nil || err.Error() != "KNOWLEDGE_TOKEN: "+authn.ErrInvalidToken.Error() {
		t.Errorf("stdio, forged: %v, want the generic refusal", err)
	}
}

// An access token whose signature verifies names the claim that failed;
// one whose signature does not (another issuer's key, alg none, a changed
// payload) gets the generic answer.
func TestRefusalOfAGenuineAccessTokenNamesTheClaim(t *testing.T) {
	t.Parallel()
	b, is := oauthSetup(t)
	org := b.org("acme")
	b.agent(org, "scout", allScopes, 0)
	now := time.Now().Truncate(time.Second)
	claims := func(kv ...any) oauthtest.Claims { return with(b.jwtClaims(org, "scout", "knowledge:read"), kv...) }

	for name, c := range map[string]struct {
		tok  string
		want string
	}{
		"expired": {is.Token(claims("exp", now.Add(-time.Hour).Unix(), "iat", now.Add(-2*time.Hour).Unix())),
			"the bearer token expired at " + now.Add(-time.Hour+30*time.Second).UTC().Format(time.RFC3339) + "; a new token is needed"},
		"no expiry":      {is.Token(claims("exp", nil)), "the access token has no expiry (exp)"},
		"not yet valid":  {is.Token(claims("nbf", now.Add(time.Hour).Unix())), "the access token is not valid before " + now.Add(time.Hour).UTC().Format(time.RFC3339) + " (nbf)"},
		"issued later":   {is.Token(claims("iat", now.Add(time.Hour).Unix())), "the access token was issued in the future, at " + now.Add(time.Hour).UTC().Format(time.RFC3339) + " (iat)"},
		"wrong audience": {is.Token(claims("aud", "https://elsewhere.example.com/mcp")), "the access token is for another resource (aud); this resource is " + b.url + "/mcp"},
		"wrong issuer":   {is.Token(claims("iss", "https://login.example.com/other-tenant")), "the access token's issuer (iss) is not this server's authorization server, " + is.URL},
		"unknown agent":  {is.Token(claims("sub", "newcomer")), "the access token's claims org_id and sub name no agent of this server"},
		"unknown org":    {is.Token(with(b.jwtClaims(uuid.New(), "scout", "knowledge:read"))), "the access token's claims org_id and sub name no agent of this server"},
		"org not a uuid": {is.Token(claims("org_id", "acme")), "the access token's claim org_id is not an org id"},
	} {
		if got := refusal(t, name, b.post(c.tok, initializeBody)); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: error_description %q, want it to start %q", name, got, c.want)
		}
	}

	expired := claims("exp", now.Add(-time.Hour).Unix(), "iat", now.Add(-2*time.Hour).Unix())
	genuine := is.Token(expired)
	parts := strings.Split(genuine, ".")
	tampered := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	for name, tok := range map[string]string{
		"another issuer's key": oauthtest.NewIssuer(t).Token(with(expired, "iss", is.URL)),
		"alg none":             is.Unsigned(expired),
		"bad signature":        tampered,
	} {
		if got := refusal(t, name, b.post(tok, initializeBody)); got != authn.Generic {
			t.Errorf("%s: error_description %q, want the generic %q", name, got, authn.Generic)
		}
	}
}

// unknownToken is a well-formed kn_ token of org that was never issued.
func unknownToken(org uuid.UUID) string {
	id := uuid.New()
	b := append(append(org[:], id[:]...), make([]byte, 32)...)
	rand.Read(b[32:])
	return "kn_" + base64.RawURLEncoding.EncodeToString(b)
}
