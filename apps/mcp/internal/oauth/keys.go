package oauth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
)

// errNoKey: the issuer's current key set has no key for the token (a
// refusal: the token was not signed by the issuer, or by a key it retired).
var errNoKey = errors.New("no key of the issuer's key set matches the token")

// errIssuerUnavailable: the key set could not be fetched (an outage of the
// issuer, not a fault of the token).
var errIssuerUnavailable = errors.New("the issuer's keys cannot be fetched")

// keySource keeps the issuer's signing keys. Readers never wait for a
// fetch they do not need: fresh keys are used at once, stale ones are used
// while a refresh runs in the background, and only a token naming a key id
// the set lacks (or the first token of all) waits for a fetch, bounded by
// its own context. One fetch runs at a time; it is not cancelled by the
// request that started it, so a slow issuer is still read once.
type keySource struct {
	issuer  string
	jwksURL string // configured or discovered
	client  *http.Client
	timeout time.Duration
	refresh time.Duration
	gap     time.Duration
	now     func() time.Time
	logger  *slog.Logger

	mu        sync.Mutex
	keys      []jwkset.JWK
	fetchedAt time.Time     // last success
	attempt   time.Time     // last attempt
	lastErr   error         // of the last attempt
	inflight  chan struct{} // closed when the running fetch ends
}

// lookup returns the keys a token with key id kid (may be empty) can be
// checked with.
func (s *keySource) lookup(ctx context.Context, kid string) ([]jwkset.JWK, error) {
	s.mu.Lock()
	match := matching(s.keys, kid)
	now := s.now()
	fresh := !s.fetchedAt.IsZero() && now.Sub(s.fetchedAt) < s.refresh
	recent := !s.attempt.IsZero() && now.Sub(s.attempt) < s.gap
	s.mu.Unlock()
	if len(match) > 0 {
		if !fresh && !recent {
			s.start() // refresh in the background; the stale keys serve meanwhile
		}
		return match, nil
	}
	// A key id the set lacks: the issuer may have rotated. Fetch, unless a
	// fetch was attempted a moment ago (a flood of made-up key ids costs
	// the issuer one request per gap).
	if !recent {
		select {
		case <-s.start():
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", errIssuerUnavailable, ctx.Err())
		}
	} else if ch := s.running(); ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", errIssuerUnavailable, ctx.Err())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if match := matching(s.keys, kid); len(match) > 0 {
		return match, nil
	}
	if s.lastErr != nil {
		// The last fetch failed: the key may well exist; say so rather
		// than refuse a token that may be good.
		return nil, fmt.Errorf("%w: %v", errIssuerUnavailable, s.lastErr)
	}
	return nil, errNoKey
}

func (s *keySource) running() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// start begins a fetch unless one runs, and returns its done channel.
func (s *keySource) start() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight != nil {
		return s.inflight
	}
	ch := make(chan struct{})
	s.inflight = ch
	s.attempt = s.now()
	go func() {
		defer close(ch)
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.timeout) // discovery + JWKS
		keys, err := s.fetch(ctx)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inflight, s.lastErr = nil, err
		if err != nil {
			s.logger.Warn("oauth: cannot fetch the issuer's keys", "issuer", s.issuer, "err", err)
			return
		}
		s.keys, s.fetchedAt = keys, s.now()
	}()
	return ch
}

// fetch discovers the JWKS URL when needed and reads the key set.
func (s *keySource) fetch(ctx context.Context) ([]jwkset.JWK, error) {
	s.mu.Lock()
	jwksURL := s.jwksURL
	s.mu.Unlock()
	if jwksURL == "" {
		u, err := discover(ctx, s.client, s.timeout, s.issuer)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.jwksURL, jwksURL = u, u
		s.mu.Unlock()
	}
	var set jwkset.JWKSMarshal
	if err := getJSON(ctx, s.client, s.timeout, jwksURL, &set); err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", jwksURL, err)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for _, m := range set.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			// One key of a type we cannot use (or a malformed one) does
			// not make the others unusable.
			s.logger.Warn("oauth: a key of the issuer's set is skipped", "kid", m.KID, "err", err)
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("JWKS %s holds no usable key", jwksURL)
	}
	return keys, nil
}

// matching returns the signing keys with key id kid (every signing key
// when kid is empty).
func matching(keys []jwkset.JWK, kid string) []jwkset.JWK {
	var out []jwkset.JWK
	for _, k := range keys {
		m := k.Marshal()
		if m.USE != "" && m.USE != jwkset.UseSig {
			continue
		}
		if kid == "" || m.KID == kid {
			out = append(out, k)
		}
	}
	return out
}

// publicKey is the verification key of k (the public half if the set
// wrongly published a private key).
func publicKey(k jwkset.JWK) any {
	key := k.Key()
	if s, ok := key.(crypto.Signer); ok {
		return s.Public()
	}
	return key
}

// discover finds the issuer's jwks_uri from its metadata, trying the
// well-known locations in the MCP authorization spec's order (RFC 8414
// with path insertion, OpenID Connect Discovery with insertion, then with
// appending). The metadata's issuer must be the configured one exactly
// (RFC 8414 section 3.3).
func discover(ctx context.Context, c *http.Client, timeout time.Duration, issuer string) (string, error) {
	var tried []string
	for _, u := range metadataURLs(issuer) {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		err := getJSON(ctx, c, timeout, u, &meta)
		var se statusError
		if errors.As(err, &se) && se >= 400 && se < 500 {
			tried = append(tried, u)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("metadata %s: %w", u, err)
		}
		if meta.Issuer != issuer {
			return "", fmt.Errorf("metadata %s names issuer %q, not MCP_OAUTH_ISSUER %q", u, meta.Issuer, issuer)
		}
		if msg := checkURL(meta.JWKSURI); msg != "" {
			return "", fmt.Errorf("metadata %s: jwks_uri %s", u, msg)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("no authorization server metadata at %s (set MCP_OAUTH_JWKS_URL to skip discovery)", strings.Join(tried, ", "))
}

func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.Trim(u.Path, "/")
	at := func(p string) string {
		v := *u
		v.Path = p
		return v.String()
	}
	if path == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}
	}
	return []string{
		at("/.well-known/oauth-authorization-server/" + path),
		at("/.well-known/openid-configuration/" + path),
		at("/" + path + "/.well-known/openid-configuration"),
	}
}

type statusError int

func (e statusError) Error() string { return fmt.Sprintf("HTTP status %d", int(e)) }

// getJSON reads one JSON document of at most 1 MiB within timeout.
func getJSON(ctx context.Context, c *http.Client, timeout time.Duration, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
		return statusError(res.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxMetadataBodySize)).Decode(v); err != nil {
		return fmt.Errorf("not a JSON document: %w", err)
	}
	return nil
}
