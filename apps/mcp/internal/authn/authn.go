// Package authn verifies the bearer tokens of MCP callers against the
// tenancy package and carries the verified principal through a request.
//
// Verified tokens are cached, so that a call waits for no database read
// (docs/mcp.md, "Authentication"):
//
//   - A token's check is served from the cache for at most the TTL
//     (MCP_TOKEN_CACHE_TTL, default 5 s), and from half of it on, the
//     call that finds it is served while one look-up refreshes it in the
//     background: a token in use is checked again every half TTL, and no
//     call of it waits.
//   - Revocations are pushed (Listen): tenancy names every token it
//     revokes on a PostgreSQL notification channel in the revoking
//     transaction, and the server drops its checks the moment they
//     commit. While that feed is connected, a check it covers is served
//     for up to FedTTL (10 minutes) and refreshed in the background as
//     above once a minute (FedRefresh) instead of every half TTL, so an
//     agent that thinks for minutes between calls does not wait either,
//     and a token in constant use costs one look-up a minute; when the
//     feed is down, every check falls back to the TTL.
//
// So a revoked token stops working at once, and within the TTL (plus the
// feed's heartbeat, pgfeed.HeartbeatInterval + pgfeed.HeartbeatTimeout, when its
// connection dies unseen) whatever happens to the feed. Expiry is checked
// on every use, cached or not. Failures are never cached, and the cache is
// keyed by a SHA-256 of the token so the process never keeps a token's
// text as a map key.
package authn

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/pgfeed"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// TokenVerifier is what authn needs from tenancy.
type TokenVerifier interface {
	VerifyToken(ctx context.Context, raw string) (*tenancy.Principal, error)
}

// DefaultCacheTTL bounds how long a revoked token keeps working.
const DefaultCacheTTL = 5 * time.Second

// MaxCacheTTL is the largest TTL the server accepts from its configuration.
const MaxCacheTTL = 30 * time.Second

// maxEntries bounds the cache; past it, the cache is swept and, if still
// full, emptied (a burst of distinct valid tokens only costs look-ups).
const maxEntries = 10000

// ErrInvalidToken is what callers see for a refused token that may not be
// genuine; it says nothing about why (missing, malformed, unknown and
// forged look the same). Every refusal matches it with errors.Is,
// including those that tell a reason (Reason).
var ErrInvalidToken = fmt.Errorf("%s: %w", Refusal, auth.ErrInvalidToken)

// Generic is the error_description of every refusal without a reason to
// tell: one text whatever check failed.
const Generic = "the bearer token is missing, malformed or unknown"

// Refusal is the text of a refusal without a reason to tell.
const Refusal = "invalid_token: " + Generic

// refused is a refusal of a genuine token: its text says why.
type refused struct{ r *tenancy.TokenRefusal }

func (e refused) Error() string   { return "invalid_token: " + e.r.Description }
func (e refused) Unwrap() []error { return []error{ErrInvalidToken, e.r} }

// refusal is the refusal of err (an unauthenticated error of a verifier):
// with the reason it carries, or the generic ErrInvalidToken.
func refusal(err error) error {
	var r *tenancy.TokenRefusal
	if errors.As(err, &r) {
		return refused{r}
	}
	return ErrInvalidToken
}

// Reason returns the reason err (a refusal of Verify) may tell the
// token's holder, or nil when it must stay the generic answer.
func Reason(err error) *tenancy.TokenRefusal {
	var r *tenancy.TokenRefusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// ErrUnavailable is returned when the token store cannot be reached or does
// not answer within the verifier's deadline. The HTTP edge answers it with
// 503 and Retry-After: the token may well be good, so clients must retry
// rather than re-authenticate.
var ErrUnavailable = errors.New("unavailable: token verification is unavailable, retry later")

// DefaultLookupTimeout bounds one token look-up in PostgreSQL. A look-up is
// one primary-key read (well under a millisecond when healthy), so a second
// is already an outage; the default leaves room for a slow replica while
// staying far inside any client's patience.
const DefaultLookupTimeout = 2 * time.Second

// FedTTL is how long a check covered by the revocation feed is served.
const FedTTL = 10 * time.Minute

// FedRefresh is how often a check covered by the revocation feed is looked
// up again while its token is in use: a revocation reaches it through the
// feed, so the look-up only records the token's use (last_used_at, written
// at most once a minute) and catches what the feed cannot say (the token's
// row gone with its org). Every half TTL, as without the feed, a fleet of
// agents cost the token store two statements per token every 2.5 s, most
// of the calls' database work on a Citus coordinator (docs/mcp.md).
const FedRefresh = time.Minute

type entry struct {
	p       *tenancy.Principal
	fetched time.Time // when its look-up started
	// fed: the revocation feed was connected from before the look-up
	// started and no revocation arrived while it ran, so any later one
	// reaches this entry.
	fed        bool
	refreshing bool
}

// Verifier verifies tokens with a cache. Safe for concurrent use.
type Verifier struct {
	v       TokenVerifier
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time
	logger  *slog.Logger

	mu sync.Mutex
	m  map[[32]byte]*entry
	// The revocation feed (Listen): a look-up it does not cover may have
	// read the token before a revocation it did not see.
	cov pgfeed.Coverage
}

// NewVerifier returns a Verifier on v. ttl <= 0 disables the cache;
// timeout bounds each look-up in v (<= 0: DefaultLookupTimeout), because a
// hung database must cost a caller a prompt 503, not a request that never
// ends (the look-up runs before any call deadline applies).
func NewVerifier(v TokenVerifier, ttl, timeout time.Duration, logger *slog.Logger) *Verifier {
	if logger == nil {
		logger = slog.Default()
	}
	if timeout <= 0 {
		timeout = DefaultLookupTimeout
	}
	return &Verifier{v: v, ttl: ttl, timeout: timeout, now: time.Now, logger: logger, m: map[[32]byte]*entry{}}
}

// Verify returns the principal of raw, or an error wrapping ErrInvalidToken
// (refused; Reason tells whether the holder may learn why) or
// ErrUnavailable (the token store is unreachable or did not answer within
// the look-up deadline).
func (v *Verifier) Verify(ctx context.Context, raw string) (*tenancy.Principal, error) {
	if raw == "" {
		return nil, ErrInvalidToken
	}
	if v.ttl <= 0 {
		p, _, err := v.lookup(ctx, raw)
		return p, err
	}
	key := sha256.Sum256([]byte(raw))
	now := v.now()
	v.mu.Lock()
	e, ok := v.m[key]
	if ok {
		age := now.Sub(e.fetched)
		limit, refreshAt := v.ttl, v.ttl/2
		if e.fed && v.cov.Up() {
			limit, refreshAt = FedTTL, max(refreshAt, FedRefresh)
		}
		if age < limit {
			p := e.p
			refresh := age >= refreshAt && !e.refreshing
			if refresh {
				e.refreshing = true
			}
			v.mu.Unlock()
			if p.ExpiresAt != nil && !now.Before(*p.ExpiresAt) {
				return nil, refusal(tenancy.TokenExpired(*p.ExpiresAt))
			}
			if refresh {
				go v.refresh(context.WithoutCancel(ctx), key, raw)
			}
			return p, nil
		}
	}
	v.mu.Unlock()
	p, fed, err := v.lookup(ctx, raw)
	if err != nil {
		return nil, err
	}
	v.store(key, p, now, fed)
	return p, nil
}

// lookup asks the token store, within the look-up deadline; fed says
// whether the revocation feed covers what it read.
func (v *Verifier) lookup(ctx context.Context, raw string) (*tenancy.Principal, bool, error) {
	v.mu.Lock()
	mark := v.cov.Start()
	v.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, v.timeout)
	p, err := v.v.VerifyToken(lctx, raw)
	cancel()
	if errors.Is(err, errs.ErrUnauthenticated) {
		return nil, false, refusal(err)
	}
	if err != nil {
		v.logger.ErrorContext(ctx, "token verification failed", "err", err, "timeout", v.timeout.String())
		return nil, false, ErrUnavailable
	}
	v.mu.Lock()
	fed := v.cov.Covers(mark)
	v.mu.Unlock()
	return p, fed, nil
}

// refresh looks raw up again in the background: a refusal drops its
// check (the next call is refused), an outage keeps it until its limit.
func (v *Verifier) refresh(ctx context.Context, key [32]byte, raw string) {
	start := v.now()
	p, fed, err := v.lookup(ctx, raw)
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[key]
	switch {
	case errors.Is(err, ErrInvalidToken):
		delete(v.m, key)
	case !ok:
	case err != nil:
		e.refreshing = false
	default:
		v.m[key] = &entry{p: p, fetched: start, fed: fed}
	}
}

func (v *Verifier) store(key [32]byte, p *tenancy.Principal, fetched time.Time, fed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.m) >= maxEntries {
		now := v.now()
		for k, e := range v.m {
			if now.Sub(e.fetched) >= v.ttl && !(e.fed && v.cov.Up() && now.Sub(e.fetched) < FedTTL) {
				delete(v.m, k)
			}
		}
		if len(v.m) >= maxEntries {
			clear(v.m)
		}
	}
	v.m[key] = &entry{p: p, fetched: fetched, fed: fed}
}

// principalKey is the TokenInfo.Extra key of the verified principal.
const principalKey = "principal"

// Verified is the go-sdk's auth.TokenVerifier for requests the server's own
// authentication middleware has already verified: it hands the principal
// that middleware put in the request's context to auth.RequireBearerToken,
// which is what makes the SDK carry it as the request's TokenInfo. Verifying
// once, in our middleware, is what lets an outage answer 503 + Retry-After
// and a refusal answer our 401 (the SDK's middleware answers 500 for the
// one and its own reason-specific text for the other, whether or not the
// token is genuine).
func Verified(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
	p := PrincipalFrom(r.Context())
	if p == nil {
		return nil, ErrInvalidToken
	}
	ti := TokenInfo(p)
	// Expiry was checked by Verify a moment ago; leaving it to the SDK too
	// would let a token expiring in between get the SDK's own 401 text.
	ti.Expiration = time.Time{}
	return ti, nil
}

// TokenInfo describes p for the go-sdk.
func TokenInfo(p *tenancy.Principal) *auth.TokenInfo {
	ti := &auth.TokenInfo{
		Scopes: p.Scopes,
		UserID: p.OrgID.String() + "/" + p.AgentID.String(),
		Extra:  map[string]any{principalKey: p},
	}
	if p.ExpiresAt != nil {
		ti.Expiration = *p.ExpiresAt
	}
	return ti
}

// FromTokenInfo returns the principal a TokenInfo carries, or nil.
func FromTokenInfo(ti *auth.TokenInfo) *tenancy.Principal {
	if ti == nil {
		return nil
	}
	p, _ := ti.Extra[principalKey].(*tenancy.Principal)
	return p
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *tenancy.Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// PrincipalFrom returns the principal of the call, or nil.
func PrincipalFrom(ctx context.Context) *tenancy.Principal {
	p, _ := ctx.Value(ctxKey{}).(*tenancy.Principal)
	return p
}

// Dispatch sends each token to the verifier that can judge it: the OAuth
// validator for tokens IsOAuth says are its own (JWT access tokens of the
// configured issuer), the tenancy tokens (kn_...) otherwise. Both answer
// alike: a refusal wraps errs.ErrUnauthenticated, anything else is an
// outage, so the cache, the deadline and the HTTP answers above are one.
type Dispatch struct {
	Own     TokenVerifier
	OAuth   TokenVerifier
	IsOAuth func(raw string) bool
}

// VerifyToken implements TokenVerifier.
func (d Dispatch) VerifyToken(ctx context.Context, raw string) (*tenancy.Principal, error) {
	if d.OAuth != nil && d.IsOAuth(raw) {
		return d.OAuth.VerifyToken(ctx, raw)
	}
	return d.Own.VerifyToken(ctx, raw)
}
