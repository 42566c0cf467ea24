package tenancy

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// tokenPrefix marks our tokens so secret scanners and humans recognise them.
const tokenPrefix = "kn_"

// token is kn_ + base64url(org id | token id | 32-byte secret). The ids are
// not secret; they make verification a primary-key look-up in the right org.
type token struct {
	org, id uuid.UUID
	secret  [32]byte
}

func newToken(org uuid.UUID) (*token, error) {
	t := &token{org: org, id: uuid.New()}
	if _, err := rand.Read(t.secret[:]); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *token) String() string {
	b := make([]byte, 0, 64)
	b = append(b, t.org[:]...)
	b = append(b, t.id[:]...)
	b = append(b, t.secret[:]...)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func (t *token) hash() []byte {
	h := sha256.Sum256(t.secret[:])
	return h[:]
}

func (t *token) matches(stored []byte) bool {
	return subtle.ConstantTimeCompare(t.hash(), stored) == 1
}

// unauthenticated is a refused token that may not be genuine (malformed,
// unknown, a wrong secret). The reason is for the logs of the server that
// asked; its caller learns only that the token was refused, so a guesser
// learns nothing about which tokens exist.
func unauthenticated(reason string) error {
	return &errs.Error{Code: errs.CodeUnauthenticated, Message: reason + ": invalid or expired token"}
}

// Reasons of a TokenRefusal (docs/mcp.md, "Authentication", lists them).
const (
	RefusedRevoked     = "revoked"
	RefusedExpired     = "expired"
	RefusedNoExpiry    = "no_expiry"
	RefusedNotYetValid = "not_yet_valid"
	RefusedAudience    = "audience"
	RefusedIssuer      = "issuer"
	RefusedSubject     = "subject"
)

// TokenRefusal is why a genuine token was refused: its secret (or, for an
// access token, its issuer's signature) verified, so whoever presents it
// holds it, and telling them why (revoked, expired, meant for another
// resource) lets an agent ask for a new token instead of checking its
// configuration, while a guesser, who holds no genuine token, never sees
// one. It travels as the cause of an unauthenticated *errs.Error
// (RefuseToken); the edge finds it with errors.As.
type TokenRefusal struct {
	// Reason is one of the Refused* words.
	Reason string
	// Description says what failed and what to do, for the holder (it is
	// RFC 6750's error_description): printable ASCII, no quote or
	// backslash, so it needs no escaping in a WWW-Authenticate header.
	Description string
}

func (r *TokenRefusal) Error() string { return r.Description }

// RefuseToken is the refusal of a genuine token for reason; description
// is cleaned to what an error_description may hold.
func RefuseToken(reason, description string) error {
	r := &TokenRefusal{Reason: reason, Description: cleanDescription(description)}
	return &errs.Error{Code: errs.CodeUnauthenticated, Message: r.Description, Err: r}
}

// TokenExpired is the refusal of a genuine token that stopped being
// accepted at at. The verifiers and the MCP server's token cache word it
// alike, so a token that expires while cached reads as it would uncached.
func TokenExpired(at time.Time) error {
	return RefuseToken(RefusedExpired, "the bearer token expired at "+at.UTC().Format(time.RFC3339)+"; a new token is needed")
}

// cleanDescription keeps the characters RFC 6750 allows in an
// error_description (%x20-21 / %x23-5B / %x5D-7E): a quote becomes an
// apostrophe, anything else outside the set a question mark.
func cleanDescription(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c == '"':
			b[i] = '\''
		case c == '\\' || c < 0x20 || c > 0x7e:
			b[i] = '?'
		}
	}
	return string(b)
}

func parseToken(raw string) (*token, error) {
	rest, ok := strings.CutPrefix(raw, tokenPrefix)
	if !ok {
		return nil, unauthenticated("malformed token")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != 64 {
		return nil, unauthenticated("malformed token")
	}
	t := &token{}
	copy(t.org[:], b[:16])
	copy(t.id[:], b[16:32])
	copy(t.secret[:], b[32:])
	return t, nil
}
