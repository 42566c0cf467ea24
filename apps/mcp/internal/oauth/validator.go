package oauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Agents finds the agent an access token's subject names (tenancy).
type Agents interface {
	AgentByName(ctx context.Context, orgID uuid.UUID, name string, create bool) (*tenancy.Agent, bool, error)
}

// ErrUnavailable wraps what keeps a token from being checked that is no
// fault of the token (the issuer's keys or the agent store unreachable):
// the HTTP edge answers 503, the client retries.
var ErrUnavailable = errors.New("oauth: token verification is unavailable")

// tokenIDSpace is the UUIDv5 namespace of the ids an OAuth token gets in
// the audit trail (tenancy.Principal.TokenID).
var tokenIDSpace = uuid.MustParse("6f6a0b1e-3c57-4f5e-9a43-7c1f0e5d2b90")

// Validator validates access tokens of the configured issuer. Safe for
// concurrent use. It implements authn.TokenVerifier.
type Validator struct {
	cfg      Config
	agents   Agents
	keys     *keySource
	parser   *jwt.Parser
	audience atomic.Pointer[string]
	logger   *slog.Logger
	now      func() time.Time
}

// New returns a validator for cfg (cfg.Enabled() must be true) and starts
// fetching the issuer's keys in the background. client nil: a client with
// no timeout of its own (every request has cfg.HTTPTimeout).
func New(cfg Config, agents Agents, client *http.Client, logger *slog.Logger) *Validator {
	if logger == nil {
		logger = slog.Default()
	}
	if client == nil {
		client = &http.Client{}
	}
	v := &Validator{cfg: cfg, agents: agents, logger: logger, now: time.Now}
	v.keys = &keySource{
		issuer: cfg.Issuer, jwksURL: cfg.JWKSURL, client: client,
		timeout: cfg.HTTPTimeout, refresh: cfg.JWKSRefresh, gap: minRefetchGap,
		now: time.Now, logger: logger,
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.ClockSkew),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	v.keys.start()
	return v
}

// SetAudience sets the resource URL tokens must name in aud (the MCP
// endpoint's public URL, known once the server listens).
func (v *Validator) SetAudience(resource string) {
	if old := v.audience.Swap(&resource); old == nil || *old != resource {
		v.logger.Info("oauth: accepting access tokens", "issuer", v.cfg.Issuer, "audience", resource,
			"org_claim", v.cfg.OrgClaim, "agent_claim", v.cfg.AgentClaim, "scope_claim", v.cfg.ScopeClaim, "create_agents", v.cfg.CreateAgents)
	}
}

// Issuer is the configured issuer.
func (v *Validator) Issuer() string { return v.cfg.Issuer }

// refuse is a refusal of a token that may not be genuine: the same 401 as
// any bad token, the reason only logged.
func (v *Validator) refuse(ctx context.Context, reason string, args ...any) error {
	v.logger.InfoContext(ctx, "oauth token refused", append([]any{"reason", reason}, args...)...)
	return fmt.Errorf("oauth: %s: %w", reason, errs.ErrUnauthenticated)
}

// tell is the refusal of a genuine token (its signature verified): the
// error carries a tenancy.TokenRefusal the holder is told; the log says the
// same, with what only operators may see (args).
func (v *Validator) tell(ctx context.Context, refusal error, args ...any) error {
	v.logger.InfoContext(ctx, "oauth token refused", append([]any{"reason", refusal.Error()}, args...)...)
	return refusal
}

// refuseClaims is the refusal of a genuine token whose registered claims
// failed the parser's checks (err wraps jwt.ErrTokenInvalidClaims): it
// names the claim. A claim of the wrong type stays the generic refusal.
func (v *Validator) refuseClaims(ctx context.Context, err error, claims jwt.MapClaims) error {
	at := func(get func() (*jwt.NumericDate, error)) string {
		if d, e := get(); e == nil && d != nil {
			return d.Time.UTC().Format(time.RFC3339)
		}
		return "?"
	}
	switch {
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		iss, _ := claims.GetIssuer()
		return v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedIssuer,
			"the access token's issuer (iss) is not this server's authorization server, "+v.cfg.Issuer), "iss", iss)
	case errors.Is(err, jwt.ErrTokenExpired):
		// The moment it stopped being accepted, as a cached token's
		// expiry is worded (its ExpiresAt includes the skew too).
		if exp, e := claims.GetExpirationTime(); e == nil && exp != nil {
			return v.tell(ctx, tenancy.TokenExpired(exp.Time.Add(v.cfg.ClockSkew)))
		}
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedNoExpiry, "the access token has no expiry (exp); this server accepts only tokens that expire"))
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedNotYetValid,
			"the access token is not valid before "+at(claims.GetNotBefore)+" (nbf); check the clocks of the issuer and this server"))
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedNotYetValid,
			"the access token was issued in the future, at "+at(claims.GetIssuedAt)+" (iat); check the clocks of the issuer and this server"))
	}
	return v.refuse(ctx, err.Error())
}

// LooksLikeJWT tells whether raw has the shape of a compact JWS (three
// base64url parts); anything else is not this validator's to judge.
func LooksLikeJWT(raw string) bool {
	return strings.Count(raw, ".") == 2 && !strings.HasPrefix(raw, "kn_")
}

// VerifyToken validates raw and returns who it speaks for. A refusal wraps
// errs.ErrUnauthenticated; ErrUnavailable means it could not be judged.
func (v *Validator) VerifyToken(ctx context.Context, raw string) (*tenancy.Principal, error) {
	aud := v.audience.Load()
	if aud == nil || *aud == "" {
		return nil, v.refuse(ctx, "the server's resource URL (the audience) is not known: set MCP_PUBLIC_URL")
	}
	claims := jwt.MapClaims{}
	var keyErr error
	_, err := v.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		keys, err := v.keys.lookup(ctx, kid)
		if err != nil {
			keyErr = err
			return nil, err
		}
		alg := t.Method.Alg()
		var vks []jwt.VerificationKey
		for _, k := range keys {
			if a := string(k.Marshal().ALG); a != "" && a != alg {
				continue // a key bound to another algorithm
			}
			vks = append(vks, publicKey(k))
		}
		switch len(vks) {
		case 0:
			keyErr = errNoKey
			return nil, errNoKey
		case 1:
			return vks[0], nil
		}
		return jwt.VerificationKeySet{Keys: vks}, nil
	})
	if errors.Is(keyErr, errIssuerUnavailable) {
		v.logger.WarnContext(ctx, "oauth token not checked: the issuer's keys are unavailable", "err", keyErr)
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, keyErr)
	}
	if err != nil {
		if errors.Is(err, jwt.ErrTokenInvalidClaims) {
			// The parser checks the claims only once the signature has
			// verified: the token is genuine, its holder may learn why.
			return nil, v.refuseClaims(ctx, err, claims)
		}
		return nil, v.refuse(ctx, err.Error())
	}
	// RFC 9068 and the MCP spec: the token must be meant for this
	// resource. A trailing slash is tolerated (oauthex.MatchesResource).
	auds, _ := claims.GetAudience()
	if !oauthex.MatchesResource(auds, *aud) {
		return nil, v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedAudience,
			"the access token is for another resource (aud); this resource is "+*aud+": ask the authorization server for a token with resource="+*aud),
			"aud", strings.Join(auds, " "), "resource", *aud)
	}
	// The subject claims: the holder learns which claim names no agent,
	// never whether the org exists (the same words for either).
	noAgent := "the access token's claims " + v.cfg.OrgClaim + " and " + v.cfg.AgentClaim + " name no agent of this server"
	orgText, _ := claims[v.cfg.OrgClaim].(string)
	orgID, err := uuid.Parse(orgText)
	if err != nil {
		return nil, v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedSubject, "the access token's claim "+v.cfg.OrgClaim+" is not an org id (a UUID)"))
	}
	name, _ := claims[v.cfg.AgentClaim].(string)
	if strings.TrimSpace(name) == "" {
		return nil, v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedSubject, "the access token's claim "+v.cfg.AgentClaim+" (the agent) is missing or empty"))
	}
	agent, created, err := v.agents.AgentByName(ctx, orgID, name, v.cfg.CreateAgents)
	var ve *errs.Error
	switch {
	case errors.Is(err, errs.ErrNotFound) && v.cfg.CreateAgents:
		return nil, v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedSubject, noAgent), "log_reason", "the org does not exist", "org", orgID.String())
	case errors.Is(err, errs.ErrNotFound):
		return nil, v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedSubject, noAgent+" (an operator creates it: ctl agent create)"),
			"log_reason", "no agent of the org has this name (create it with ctl agent create, or set MCP_OAUTH_CREATE_AGENTS=true)",
			"org", orgID.String(), "agent_name", name)
	case errors.As(err, &ve) && ve.Code == errs.CodeInvalidArgument:
		return nil, v.tell(ctx, tenancy.RefuseToken(tenancy.RefusedSubject, "the access token's claim "+v.cfg.AgentClaim+" is not a usable agent name: "+ve.Message),
			"org", orgID.String())
	case err != nil:
		return nil, fmt.Errorf("%w: agent look-up: %v", ErrUnavailable, err)
	}
	if created {
		v.logger.InfoContext(ctx, "oauth: agent created on first sight", "org", orgID.String(), "agent", agent.ID.String(), "agent_name", name)
	}
	p := &tenancy.Principal{OrgID: orgID, AgentID: agent.ID, Scopes: v.scopes(claims), TokenID: tokenID(v.cfg.Issuer, claims, raw)}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		// The parser's leeway applies to a cached token too (authn checks
		// ExpiresAt on every use).
		t := exp.Time.Add(v.cfg.ClockSkew)
		p.ExpiresAt = &t
	}
	return p, nil
}

// scopes reads the scope claim (a space-separated string, RFC 8693 / 9068,
// or an array of strings) and keeps the scopes of this server's catalogue;
// others (openid, profile, another API's) are ignored.
func (v *Validator) scopes(claims jwt.MapClaims) []string {
	var list []string
	switch s := claims[v.cfg.ScopeClaim].(type) {
	case string:
		list = strings.Fields(s)
	case []any:
		for _, x := range s {
			if str, ok := x.(string); ok {
				list = append(list, str)
			}
		}
	}
	out := []string{}
	for _, s := range list {
		if slices.Contains(tenancy.Catalogue, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// tokenID names the token in the audit trail: from its jti when it has
// one, else from its hash (the same token, the same id).
func tokenID(issuer string, claims jwt.MapClaims, raw string) uuid.UUID {
	if jti, _ := claims["jti"].(string); jti != "" {
		return uuid.NewSHA1(tokenIDSpace, []byte(issuer+"\x00"+jti))
	}
	h := sha256.Sum256([]byte(raw))
	return uuid.NewSHA1(tokenIDSpace, h[:])
}
