package ratelimit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/pgfeed"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// age makes the cached settings of org's agent look read d ago.
func (l *Limiter) age(org, agent uuid.UUID, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]uuid.UUID{org, agent}
	c := l.cache[k]
	c.at = c.at.Add(-d)
	l.cache[k] = c
}

// settled waits until no background read of l runs.
func settled(t *testing.T, l *Limiter) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		busy := len(l.refreshing) > 0
		l.mu.Unlock()
		if !busy {
			return
		}
	}
	t.Fatal("a background read did not end within 5 s")
}

// While the change feed is connected, settings read under it are served
// past SettingsTTL without a read (up to FedSettingsTTL); a change of the
// org's drops them at once, and the next call reads them again; the feed
// lost, SettingsTTL applies again.
func TestFedSettingsServedUntilTheyChange(t *testing.T) {
	t.Parallel()
	org, other, agent := uuid.New(), uuid.New(), uuid.New()
	var reads atomic.Int32
	per := 60
	l := New(nil, settingsFunc(func(context.Context, uuid.UUID, uuid.UUID) ([]tenancy.RateLimit, error) {
		reads.Add(1)
		return []tenancy.RateLimit{{Scope: tenancy.RateScopeOrg, Kind: tenancy.RateRead, PerMinute: n(per)}}, nil
	}), Options{SettingsTTL: 5 * time.Second})
	ctx := context.Background()
	l.Connected(true)
	for _, o := range []uuid.UUID{org, other} {
		l.settingsFor(ctx, o, agent)
	}
	if reads.Load() != 2 {
		t.Fatalf("%d reads for two agents' first calls", reads.Load())
	}
	l.age(org, agent, time.Minute)
	if c := l.settingsFor(ctx, org, agent); *c.org[tenancy.RateRead] != 60 {
		t.Fatalf("settings %+v", c.org)
	}
	settled(t, l)
	if reads.Load() != 2 {
		t.Fatalf("read again a minute later, the feed connected: %d reads, want 2", reads.Load())
	}
	per = 7
	l.Notify(org.String())
	if c := l.settingsFor(ctx, org, agent); *c.org[tenancy.RateRead] != 7 {
		t.Fatalf("after the change was notified: %+v, want 7", c.org)
	}
	l.settingsFor(ctx, other, agent)
	if reads.Load() != 3 {
		t.Fatalf("%d reads: the changed org's once more, the other org's not", reads.Load())
	}
	l.Connected(false)
	l.age(other, agent, 6*time.Second)
	l.settingsFor(ctx, other, agent)
	settled(t, l)
	if reads.Load() != 4 {
		t.Fatalf("the feed lost, past SettingsTTL: %d reads, want 4", reads.Load())
	}
}

// Through PostgreSQL: tenancy's SetRateLimit notifies the org on
// tenancy.RateLimitsChannel when it commits, and a limiter on the feed
// (pgfeed) serves the new limit at the next call, not after its TTL.
func TestRateLimitChangeReachesTheLimiter(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	owner := tenancy.New(d.Pool)
	o, err := owner.CreateOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	a, err := owner.CreateAgent(ctx, o.ID, "a")
	if err != nil {
		t.Fatal(err)
	}
	app := d.AppPool(t)
	l := New(nil, tenancy.New(app), Options{SettingsTTL: time.Hour})
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go pgfeed.Listen(lctx, pgfeed.Connector(app.Config().ConnConfig), 5*time.Second, nil, l)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		up := l.cov.Up()
		l.mu.Unlock()
		if up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the feed did not connect within 10 s")
		}
	}
	if c := l.settingsFor(ctx, o.ID, a.ID); len(c.org) != 0 || !c.fed {
		t.Fatalf("before any setting: %+v", c)
	}
	if _, err := owner.SetRateLimit(ctx, o.ID, tenancy.RateLimit{Scope: tenancy.RateScopeOrg, Kind: tenancy.RateWrite, PerMinute: n(9)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c := l.settingsFor(ctx, o.ID, a.ID); c.org[tenancy.RateWrite] != nil && *c.org[tenancy.RateWrite] == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new limit was not served within 5 s of its commit (the TTL is an hour)")
		}
	}
	if _, err := owner.ClearRateLimit(ctx, o.ID, tenancy.RateLimit{Scope: tenancy.RateScopeOrg, Kind: tenancy.RateWrite}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c := l.settingsFor(ctx, o.ID, a.ID); c.org[tenancy.RateWrite] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cleared limit was still served 5 s after its commit")
		}
	}
}
