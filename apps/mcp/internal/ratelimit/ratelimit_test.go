package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

type settingsFunc func(ctx context.Context, org, agent uuid.UUID) ([]tenancy.RateLimit, error)

func (f settingsFunc) RateLimitsFor(ctx context.Context, org, agent uuid.UUID) ([]tenancy.RateLimit, error) {
	return f(ctx, org, agent)
}

type counts struct {
	mu      sync.Mutex
	limited map[string]int
	open    map[string]int
}

func (c *counts) Limited(level, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limited[level+"/"+kind]++
}

func (c *counts) FailedOpen(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[reason]++
}

func n(v int) *int { return &v }

// The resolution of limits (agent's own > org's each-agent > default) and
// GCRA's answer, against a real Redis.
func TestLimiterResolvesAndCounts(t *testing.T) {
	t.Parallel()
	r := testenv.LeaseRedis(t)
	org, agent, vip := uuid.New(), uuid.New(), uuid.New()
	rows := []tenancy.RateLimit{
		{Scope: tenancy.RateScopeAgent, Kind: tenancy.RateWrite, PerMinute: n(6)},               // each agent: burst 1
		{Scope: tenancy.RateScopeAgent, AgentID: &vip, Kind: tenancy.RateWrite, PerMinute: nil}, // vip: unlimited
	}
	var failSettings bool
	c := &counts{limited: map[string]int{}, open: map[string]int{}}
	l := New(r.Client, settingsFunc(func(_ context.Context, _, a uuid.UUID) ([]tenancy.RateLimit, error) {
		if failSettings {
			return nil, errors.New("postgres down")
		}
		var out []tenancy.RateLimit
		for _, row := range rows {
			if row.AgentID == nil || *row.AgentID == a {
				out = append(out, row)
			}
		}
		return out, nil
	}), Options{Defaults: Limits{AgentReads: n(6)}, Observer: c})
	ctx := context.Background()

	if d := l.Allow(ctx, org, agent, tenancy.RateWrite); !d.Allowed {
		t.Fatalf("first write refused: %+v", d)
	}
	d := l.Allow(ctx, org, agent, tenancy.RateWrite)
	if d.Allowed || d.Level != "agent" || d.PerMinute != 6 || d.RetryAfter <= 0 || d.RetryAfter > 10*time.Second {
		t.Fatalf("second write: %+v, want refused by the agent's 6/min with a retry within 10 s", d)
	}
	for range 5 {
		if d := l.Allow(ctx, org, vip, tenancy.RateWrite); !d.Allowed {
			t.Fatalf("vip (own setting: unlimited) refused: %+v", d)
		}
	}
	// Reads: no setting, the default applies.
	l.Allow(ctx, org, vip, tenancy.RateRead)
	if d := l.Allow(ctx, org, vip, tenancy.RateRead); d.Allowed {
		t.Fatal("the default read limit does not apply")
	}
	// Settings unreadable: a fresh agent falls back to the defaults, and it
	// is counted.
	failSettings = true
	other := uuid.New()
	l.Allow(ctx, org, other, tenancy.RateRead)
	if d := l.Allow(ctx, org, other, tenancy.RateRead); d.Allowed {
		t.Fatal("defaults do not apply when the settings cannot be read")
	}
	if c.open["settings"] != 2 || c.limited["agent/write"] != 1 || c.limited["agent/read"] != 2 {
		t.Fatalf("counts: limited %v, fail open %v", c.limited, c.open)
	}
}
