package authn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

type fakeTokens struct {
	calls int
	p     *tenancy.Principal
	err   error
}

func (f *fakeTokens) VerifyToken(context.Context, string) (*tenancy.Principal, error) {
	f.calls++
	return f.p, f.err
}

func TestCacheBoundsRevocationAndHonoursExpiry(t *testing.T) {
	t.Parallel()
	now := time.Now()
	exp := now.Add(10 * time.Second)
	f := &fakeTokens{p: &tenancy.Principal{OrgID: uuid.New(), AgentID: uuid.New(), ExpiresAt: &exp}}
	v := NewVerifier(f, 5*time.Second, 0, nil)
	v.now = func() time.Time { return now }
	ctx := context.Background()

	for range 3 {
		if _, err := v.Verify(ctx, "tok"); err != nil {
			t.Fatal(err)
		}
	}
	if f.calls != 1 {
		t.Fatalf("%d look-ups within the TTL, want 1", f.calls)
	}
	// Revoked: the cached answer lasts until the TTL, then the refusal shows.
	f.p, f.err = nil, fmt.Errorf("revoked token: %w", errs.ErrUnauthenticated)
	now = now.Add(4 * time.Second)
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatalf("within TTL: %v", err)
	}
	now = now.Add(time.Second)
	if _, err := v.Verify(ctx, "tok"); !errors.Is(err, ErrInvalidToken) || !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("after TTL: %v", err)
	}
	// Failures are not cached.
	v.Verify(ctx, "tok")
	if f.calls != 3 {
		t.Fatalf("failures cached: %d calls", f.calls)
	}
	// Expiry beats the cache.
	soon := now.Add(2 * time.Second)
	f.p, f.err = &tenancy.Principal{ExpiresAt: &soon}, nil
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	now = soon // within the TTL of the cached answer
	if _, err := v.Verify(ctx, "tok"); !errors.Is(err, ErrInvalidToken) || Reason(err) == nil || Reason(err).Reason != tenancy.RefusedExpired {
		t.Fatalf("expired but cached: %v, want an expired refusal with its reason", err)
	}
	// A verifier's reason reaches the caller; a refusal without one stays
	// the generic answer.
	f.p, f.err = nil, tenancy.RefuseToken(tenancy.RefusedRevoked, "revoked")
	if _, err := v.Verify(ctx, "revoked"); !errors.Is(err, ErrInvalidToken) || err.Error() != "invalid_token: revoked" {
		t.Fatalf("revoked: %v", err)
	}
	f.err = fmt.Errorf("wrong secret: %w", errs.ErrUnauthenticated)
	if _, err := v.Verify(ctx, "forged"); err != ErrInvalidToken || Reason(err) != nil {
		t.Fatalf("forged: %v, want ErrInvalidToken itself", err)
	}
	// Store errors are not auth failures and say nothing about the store.
	f.err = errors.New("dial tcp: connection refused")
	if _, err := v.Verify(ctx, "other"); err == nil || errors.Is(err, auth.ErrInvalidToken) || err.Error() != ErrUnavailable.Error() {
		t.Fatalf("store down: %v", err)
	}
	if _, err := v.Verify(ctx, ""); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("empty token: %v", err)
	}
}
