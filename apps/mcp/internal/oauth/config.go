// Package oauth makes the MCP server an OAuth 2.1 resource server (the MCP
// authorization spec) beside its own kn_ tokens: it validates JWT access
// tokens of one configured issuer (RFC 9068 style: signature by a key of
// the issuer's JWKS, iss, aud = this resource, exp, nbf, an algorithm
// allow-list) and maps their claims to an org, an agent and scopes.
//
// The issuer's JWKS is found by discovery (RFC 8414, then OpenID Connect
// Discovery, in the order the MCP authorization spec gives), kept in
// memory, refreshed when older than MCP_OAUTH_JWKS_REFRESH (the stale keys
// keep working while the refresh runs) and at once when a token names a
// key id the set does not have (key rotation), at most once every
// minRefetchGap. An issuer that cannot be reached makes tokens that need
// a fetch answer "unavailable" (HTTP 503), never "invalid".
package oauth

import (
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv"
)

// Supported are the signing algorithms a token may use: asymmetric ones
// only. "none" and the HMAC algorithms (whose key would be a shared
// secret, never a published JWKS) are refused whatever the configuration.
var Supported = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Defaults of the configuration.
const (
	DefaultOrgClaim     = "org_id"
	DefaultAgentClaim   = "sub"
	DefaultScopeClaim   = "scope"
	DefaultClockSkew    = 30 * time.Second
	DefaultJWKSRefresh  = 15 * time.Minute
	DefaultHTTPTimeout  = 5 * time.Second
	minRefetchGap       = 10 * time.Second
	maxMetadataBodySize = 1 << 20
)

// Config is the resource server's configuration (docs/mcp.md, "OAuth").
type Config struct {
	// Issuer (MCP_OAUTH_ISSUER): the authorization server whose access
	// tokens are accepted; empty: OAuth is off, only kn_ tokens work.
	Issuer string
	// JWKSURL (MCP_OAUTH_JWKS_URL): the issuer's key set; empty: found by
	// discovery from Issuer.
	JWKSURL string
	// Algorithms (MCP_OAUTH_ALGORITHMS, comma-separated): the allow-list,
	// a subset of Supported; default all of Supported.
	Algorithms []string
	// OrgClaim, AgentClaim, ScopeClaim (MCP_OAUTH_ORG_CLAIM,
	// MCP_OAUTH_AGENT_CLAIM, MCP_OAUTH_SCOPE_CLAIM): the claims holding
	// the org id (a UUID), the agent's name and the scopes (a
	// space-separated string, or an array of strings).
	OrgClaim, AgentClaim, ScopeClaim string
	// CreateAgents (MCP_OAUTH_CREATE_AGENTS): a subject the org has no
	// agent of becomes one on first sight; false: such a token is refused
	// until an operator creates the agent (ctl agent create --name).
	CreateAgents bool
	// ClockSkew (MCP_OAUTH_CLOCK_SKEW): leeway on exp, nbf and iat.
	ClockSkew time.Duration
	// JWKSRefresh (MCP_OAUTH_JWKS_REFRESH): keys older than this are
	// fetched again.
	JWKSRefresh time.Duration
	// HTTPTimeout (MCP_OAUTH_HTTP_TIMEOUT): deadline of one discovery or
	// JWKS request.
	HTTPTimeout time.Duration
}

// Enabled tells whether an issuer is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// ReadConfig reads the configuration through e, which collects the errors,
// each naming its variable.
func ReadConfig(e *appenv.Env) Config {
	c := Config{
		Issuer:       strings.TrimSpace(e.String("MCP_OAUTH_ISSUER", "")),
		JWKSURL:      strings.TrimSpace(e.String("MCP_OAUTH_JWKS_URL", "")),
		OrgClaim:     e.String("MCP_OAUTH_ORG_CLAIM", DefaultOrgClaim),
		AgentClaim:   e.String("MCP_OAUTH_AGENT_CLAIM", DefaultAgentClaim),
		ScopeClaim:   e.String("MCP_OAUTH_SCOPE_CLAIM", DefaultScopeClaim),
		CreateAgents: e.Bool("MCP_OAUTH_CREATE_AGENTS", false),
		ClockSkew:    e.Duration("MCP_OAUTH_CLOCK_SKEW", DefaultClockSkew, 0, 5*time.Minute),
		JWKSRefresh:  e.Duration("MCP_OAUTH_JWKS_REFRESH", DefaultJWKSRefresh, time.Minute, 24*time.Hour),
		HTTPTimeout:  e.Duration("MCP_OAUTH_HTTP_TIMEOUT", DefaultHTTPTimeout, 100*time.Millisecond, time.Minute),
		Algorithms:   slices.Clone(Supported),
	}
	if v := e.String("MCP_OAUTH_ALGORITHMS", ""); v != "" {
		c.Algorithms = nil
		for a := range strings.SplitSeq(v, ",") {
			a = strings.TrimSpace(a)
			if !slices.Contains(Supported, a) {
				e.Fail("MCP_OAUTH_ALGORITHMS", "takes "+strings.Join(Supported, ", ")+" (asymmetric algorithms only; \"none\" and HMAC are never accepted), got "+quote(a))
				continue
			}
			if !slices.Contains(c.Algorithms, a) {
				c.Algorithms = append(c.Algorithms, a)
			}
		}
	}
	if c.Issuer != "" {
		if err := checkURL(c.Issuer); err != "" {
			e.Fail("MCP_OAUTH_ISSUER", err)
		}
	}
	if c.JWKSURL != "" {
		if err := checkURL(c.JWKSURL); err != "" {
			e.Fail("MCP_OAUTH_JWKS_URL", err)
		}
		if c.Issuer == "" {
			e.Fail("MCP_OAUTH_JWKS_URL", "needs MCP_OAUTH_ISSUER (the issuer whose keys it holds)")
		}
	}
	for name, v := range map[string]string{"MCP_OAUTH_ORG_CLAIM": c.OrgClaim, "MCP_OAUTH_AGENT_CLAIM": c.AgentClaim, "MCP_OAUTH_SCOPE_CLAIM": c.ScopeClaim} {
		if strings.TrimSpace(v) == "" {
			e.Fail(name, "must name a claim")
		}
	}
	return c
}

func quote(s string) string { return `"` + s + `"` }

// checkURL accepts an absolute https URL, or http on a loopback host (a
// local issuer in development and tests); it returns the rule broken.
func checkURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "must be an absolute https URL without query or fragment, such as https://login.example.com/realms/fleet"
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if isLoopback(u.Hostname()) {
			return ""
		}
	}
	return "must be an https URL (http only on a loopback host), got " + quote(raw)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
