// Package oauthtest is a real OAuth authorization server's token side for
// tests: real keys, RFC 8414 metadata and a JWKS served over HTTP by
// httptest, key rotation, and signed access tokens.
package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Key is one signing key of the issuer.
type Key struct {
	ID     string
	Alg    string // RS256 or ES256
	signer crypto.Signer
}

// NewKey makes a fresh key for alg (RS256 or ES256).
func NewKey(t testing.TB, alg string) *Key {
	t.Helper()
	var s crypto.Signer
	var err error
	switch alg {
	case "RS256":
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("oauthtest: no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &Key{ID: uuid.NewString(), Alg: alg, signer: s}
}

// Issuer is an authorization server on httptest.
type Issuer struct {
	t   testing.TB
	srv *httptest.Server
	URL string // the issuer identifier: the server's base URL

	mu   sync.Mutex
	keys []*Key // published in the JWKS
	sign *Key   // signs new tokens

	// MetadataPath is where the RFC 8414 metadata is served
	// (/.well-known/oauth-authorization-server by default; set
	// /.well-known/openid-configuration for an OIDC-only provider).
	MetadataPath string
	// JWKSFetches counts the key set's requests.
	JWKSFetches atomic.Int64
	// Down makes every request answer 503.
	Down atomic.Bool
}

// NewIssuer starts an issuer with one RS256 key.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{t: t, MetadataPath: "/.well-known/oauth-authorization-server"}
	is.srv = httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.srv.Close)
	is.URL = is.srv.URL
	k := NewKey(t, "RS256")
	is.keys, is.sign = []*Key{k}, k
	return is
}

func (is *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	if is.Down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	is.mu.Lock()
	path := is.MetadataPath
	is.mu.Unlock()
	switch r.URL.Path {
	case path:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                is.URL,
			"jwks_uri":                              is.URL + "/jwks",
			"authorization_endpoint":                is.URL + "/authorize",
			"token_endpoint":                        is.URL + "/token",
			"response_types_supported":              []string{"code"},
			"code_challenge_methods_supported":      []string{"S256"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	case "/jwks":
		is.JWKSFetches.Add(1)
		is.mu.Lock()
		keys := append([]*Key(nil), is.keys...)
		is.mu.Unlock()
		set := jwkset.JWKSMarshal{}
		for _, k := range keys {
			j, err := jwkset.NewJWKFromKey(k.signer.Public(), jwkset.JWKOptions{
				Metadata: jwkset.JWKMetadataOptions{KID: k.ID, ALG: jwkset.ALG(k.Alg), USE: jwkset.UseSig},
			})
			if err != nil {
				is.t.Error(err)
				return
			}
			set.Keys = append(set.Keys, j.Marshal())
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

// Rotate publishes k and signs new tokens with it; with retire, the old
// keys leave the JWKS.
func (is *Issuer) Rotate(k *Key, retire bool) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if retire {
		is.keys = nil
	}
	is.keys = append(is.keys, k)
	is.sign = k
}

// Claims are a token's claims; Token fills iss, iat and exp when absent.
type Claims = jwt.MapClaims

// Token signs claims with the current key (kid in the header). iss, iat
// and exp default to the issuer, now and in an hour.
func (is *Issuer) Token(c Claims) string {
	is.mu.Lock()
	k := is.sign
	is.mu.Unlock()
	return is.TokenWith(k, c)
}

// TokenWith signs claims with k, published or not.
func (is *Issuer) TokenWith(k *Key, c Claims) string {
	is.t.Helper()
	full := Claims{"iss": is.URL, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "jti": uuid.NewString()}
	for n, v := range c {
		if v == nil {
			delete(full, n) // an explicit nil leaves the claim out
			continue
		}
		full[n] = v
	}
	var m jwt.SigningMethod = jwt.SigningMethodRS256
	if k.Alg == "ES256" {
		m = jwt.SigningMethodES256
	}
	tok := jwt.NewWithClaims(m, full)
	tok.Header["kid"] = k.ID
	tok.Header["typ"] = "at+jwt"
	s, err := tok.SignedString(k.signer)
	if err != nil {
		is.t.Fatal(err)
	}
	return s
}

// Unsigned is the same token with alg "none" and no signature.
func (is *Issuer) Unsigned(c Claims) string {
	is.t.Helper()
	full := Claims{"iss": is.URL, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for n, v := range c {
		full[n] = v
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, full).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		is.t.Fatal(err)
	}
	return s
}
