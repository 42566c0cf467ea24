package authn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// fakeTokens answers look-ups as told; hold makes them wait (a slow
// token store) until released.
type fakeTokens struct {
	mu    sync.Mutex
	calls int
	p     *tenancy.Principal
	err   error
	hold  chan struct{}
}

func (f *fakeTokens) VerifyToken(ctx context.Context, _ string) (*tenancy.Principal, error) {
	f.mu.Lock()
	f.calls++
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.p, f.err
}

func (f *fakeTokens) set(p *tenancy.Principal, err error) {
	f.mu.Lock()
	f.p, f.err = p, err
	f.mu.Unlock()
}

func (f *fakeTokens) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// settled waits until no refresh of v runs.
func settled(t *testing.T, v *Verifier) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		v.mu.Lock()
		busy := false
		for _, e := range v.m {
			busy = busy || e.refreshing
		}
		v.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("a refresh did not end within 5 s")
}

// The cache: a check is served for at most the TTL; from half of it on the
// call is served at once while a look-up refreshes the check in the
// background (no call waits for the store), and a refresh that finds the
// token revoked drops it; without the revocation feed, the TTL bounds how
// long a revoked token works.
func TestCacheBoundsRevocationAndHonoursExpiry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	exp := clock().Add(time.Hour)
	f := &fakeTokens{p: &tenancy.Principal{OrgID: uuid.New(), AgentID: uuid.New(), ExpiresAt: &exp}}
	v := NewVerifier(f, 5*time.Second, 0, nil)
	v.now = clock
	ctx := context.Background()

	for range 3 {
		if _, err := v.Verify(ctx, "tok"); err != nil {
			t.Fatal(err)
		}
	}
	if f.count() != 1 {
		t.Fatalf("%d look-ups within the TTL, want 1", f.count())
	}
	// Past half the TTL a call is served from the cache while the store
	// is asked again: the store hangs, the call does not wait for it.
	advance(3 * time.Second)
	f.mu.Lock()
	f.hold = make(chan struct{})
	f.mu.Unlock()
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatalf("a call while its check is refreshed: %v", err)
	}
	// Revoked meanwhile: the refresh drops the check, the next call is refused.
	f.set(nil, fmt.Errorf("revoked token: %w", errs.ErrUnauthenticated))
	f.mu.Lock()
	close(f.hold)
	f.hold = nil
	f.mu.Unlock()
	settled(t, v)
	if _, err := v.Verify(ctx, "tok"); !errors.Is(err, ErrInvalidToken) || !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("after the refresh found it revoked: %v", err)
	}
	// Failures are not cached.
	before := f.count()
	v.Verify(ctx, "tok")
	if f.count() != before+1 {
		t.Fatalf("failures cached: %d calls", f.count()-before)
	}
	// A refresh that cannot reach the store keeps the check, but never
	// past the TTL: then the call waits for a look-up, and is refused.
	f.set(&tenancy.Principal{OrgID: uuid.New()}, nil)
	if _, err := v.Verify(ctx, "tok2"); err != nil {
		t.Fatal(err)
	}
	f.set(nil, errors.New("dial tcp: connection refused"))
	advance(4 * time.Second)
	if _, err := v.Verify(ctx, "tok2"); err != nil {
		t.Fatalf("within the TTL, the store down: %v", err)
	}
	settled(t, v)
	f.set(nil, fmt.Errorf("revoked token: %w", errs.ErrUnauthenticated))
	advance(time.Second)
	if _, err := v.Verify(ctx, "tok2"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked, its check past the TTL: %v", err)
	}
	// Expiry beats the cache.
	soon := clock().Add(2 * time.Second)
	f.set(&tenancy.Principal{ExpiresAt: &soon}, nil)
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Second) // within the TTL of the cached answer
	if _, err := v.Verify(ctx, "tok"); !errors.Is(err, ErrInvalidToken) || Reason(err) == nil || Reason(err).Reason != tenancy.RefusedExpired {
		t.Fatalf("expired but cached: %v, want an expired refusal with its reason", err)
	}
	// A verifier's reason reaches the caller; a refusal without one stays
	// the generic answer.
	f.set(nil, tenancy.RefuseToken(tenancy.RefusedRevoked, "revoked"))
	if _, err := v.Verify(ctx, "revoked"); !errors.Is(err, ErrInvalidToken) || err.Error() != "invalid_token: revoked" {
		t.Fatalf("revoked: %v", err)
	}
	f.set(nil, fmt.Errorf("wrong secret: %w", errs.ErrUnauthenticated))
	if _, err := v.Verify(ctx, "forged"); err != ErrInvalidToken || Reason(err) != nil {
		t.Fatalf("forged: %v, want ErrInvalidToken itself", err)
	}
	// Store errors are not auth failures and say nothing about the store.
	f.set(nil, errors.New("dial tcp: connection refused"))
	if _, err := v.Verify(ctx, "other"); err == nil || errors.Is(err, auth.ErrInvalidToken) || err.Error() != ErrUnavailable.Error() {
		t.Fatalf("store down: %v", err)
	}
	if _, err := v.Verify(ctx, ""); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("empty token: %v", err)
	}
}
