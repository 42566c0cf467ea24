package authn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/pgfeed"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// eventually polls cond every 10 ms for up to limit.
func eventually(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// With the revocation feed, a revoked token is refused as soon as its
// revocation commits, long before the cache's TTL (30 s here), one token
// or every token of an org; without it, checks fall back to the TTL.
func TestRevocationFeedDropsChecksAtOnce(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	owner := tenancy.New(d.Pool)
	org, err := owner.CreateOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string) string {
		a, err := owner.CreateAgent(ctx, org.ID, name)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := owner.IssueToken(ctx, org.ID, a.ID, []string{tenancy.ScopeKnowledgeRead}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tok.Token
	}
	first, second := issue("a"), issue("b")
	app := d.AppPool(t)
	v := NewVerifier(tenancy.New(app), MaxCacheTTL, 0, nil)
	lctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { v.Listen(lctx, pgfeed.Connector(app.Config().ConnConfig)); close(stopped) }()
	if !eventually(10*time.Second, func() bool { v.mu.Lock(); defer v.mu.Unlock(); return v.cov.Up() }) {
		t.Fatal("the feed did not connect within 10 s")
	}
	p, err := v.Verify(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, second); err != nil {
		t.Fatal(err)
	}
	v.mu.Lock()
	fed := len(v.m) == 2
	for _, e := range v.m {
		fed = fed && e.fed
	}
	v.mu.Unlock()
	if !fed {
		t.Fatal("checks made while the feed is connected are not covered by it")
	}

	if _, err := owner.RevokeToken(ctx, nil, p.TokenID); err != nil {
		t.Fatal(err)
	}
	var refused error
	if !eventually(5*time.Second, func() bool { _, refused = v.Verify(ctx, first); return refused != nil }) {
		t.Fatal("a revoked token still works 5 s after its revocation, with the feed connected")
	}
	if !errors.Is(refused, ErrInvalidToken) || Reason(refused) == nil || Reason(refused).Reason != tenancy.RefusedRevoked {
		t.Fatalf("revoked: %v, want the revoked refusal", refused)
	}
	if _, err := v.Verify(ctx, second); err != nil {
		t.Fatalf("another token of the org: %v", err)
	}
	if _, err := owner.RevokeOrgTokens(ctx, org.ID); err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, func() bool { _, err := v.Verify(ctx, second); return errors.Is(err, ErrInvalidToken) }) {
		t.Fatal("a token of an org whose tokens were all revoked still works 5 s later")
	}

	// Feed lost: no check is covered by it any more.
	third := issue("c")
	if _, err := v.Verify(ctx, third); err != nil {
		t.Fatal(err)
	}
	stop()
	<-stopped
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cov.Up() {
		t.Fatal("the feed is still marked connected after Listen returned")
	}
	for _, e := range v.m {
		if e.fed {
			t.Fatal("a check is still covered by a lost feed")
		}
	}
}

// While the feed covers a check, a call is served from the cache past the
// TTL (an agent thinking for minutes between calls does not wait for the
// token store), up to FedTTL; once the feed is lost, the TTL applies again.
func TestFedChecksOutliveTheTTL(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := &fakeTokens{p: &tenancy.Principal{OrgID: uuid.New(), TokenID: uuid.New()}}
	v := NewVerifier(f, 5*time.Second, 0, nil)
	v.now = func() time.Time { return now }
	v.feed(true)
	ctx := context.Background()
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.hold = make(chan struct{}) // the store hangs: only a background refresh may wait
	f.mu.Unlock()
	now = now.Add(time.Minute)
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatalf("a minute later, covered by the feed: %v", err)
	}
	f.mu.Lock()
	close(f.hold)
	f.hold = nil
	f.mu.Unlock()
	settled(t, v)
	v.feed(false)
	f.set(nil, tenancy.RefuseToken(tenancy.RefusedRevoked, "revoked"))
	now = now.Add(time.Minute)
	if _, err := v.Verify(ctx, "tok"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("the feed lost, past the TTL: %v, want the store's refusal", err)
	}
	now = now.Add(FedTTL)
	v.feed(true)
	f.set(&tenancy.Principal{}, nil)
	if _, err := v.Verify(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(FedTTL)
	before := f.count()
	v.Verify(ctx, "x")
	if f.count() != before+1 {
		t.Fatal("a check past FedTTL was served without a look-up")
	}
}

// While the feed covers a check, a token in use is looked up again once a
// minute (FedRefresh), not every half TTL: the feed brings revocations, and
// the look-up only records the token's use. Without the feed, every half
// TTL as before.
func TestFedChecksRefreshOnceAMinute(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := &fakeTokens{p: &tenancy.Principal{OrgID: uuid.New(), TokenID: uuid.New()}}
	v := NewVerifier(f, 5*time.Second, 0, nil)
	v.now = func() time.Time { return now }
	v.feed(true)
	ctx := context.Background()
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	start := now
	for _, at := range []time.Duration{3 * time.Second, 30 * time.Second, FedRefresh - time.Second} {
		now = start.Add(at)
		if _, err := v.Verify(ctx, "tok"); err != nil {
			t.Fatal(err)
		}
		settled(t, v)
		if f.count() != 1 {
			t.Fatalf("%v after its look-up, covered by the feed: %d look-ups, want 1", at, f.count())
		}
	}
	now = start.Add(FedRefresh)
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	settled(t, v)
	if f.count() != 2 {
		t.Fatalf("a minute after its look-up: %d look-ups, want 2 (one refresh)", f.count())
	}

	v.feed(false)
	start = now
	now = start.Add(3 * time.Second) // past half the TTL, the feed lost
	if _, err := v.Verify(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	settled(t, v)
	if f.count() != 3 {
		t.Fatalf("past half the TTL without the feed: %d look-ups, want 3", f.count())
	}
}
