package tenancy

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"

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

// unauthenticated is a refused token. The reason is for the logs of the
// server that asked; its caller learns only that the token was refused.
func unauthenticated(reason string) error {
	return &errs.Error{Code: errs.CodeUnauthenticated, Message: reason + ": invalid or expired token"}
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
