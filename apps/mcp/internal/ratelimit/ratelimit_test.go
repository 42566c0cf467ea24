package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

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

// roundTrips counts a client's round trips to Redis (a command or a
// pipeline each).
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// A call's limits (the agent's and the org's) and the keys it asks to read
// cost one round trip, and a call pays every budget or none: refused by
// its org's limit it costs its agent nothing.
func TestAllowIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	r := testenv.LeaseRedis(t)
	trips := &roundTrips{}
	r.Client.AddHook(trips)
	org, agent, other := uuid.New(), uuid.New(), uuid.New()
	l := New(r.Client, nil, Options{Defaults: Limits{AgentWrites: n(600), OrgWrites: n(6)}})
	ctx := context.Background()
	record := "idem:k.store:" + org.String() + ":x"
	r.Client.Set(ctx, record, "the record", time.Minute)
	if d := l.Allow(ctx, org, agent, tenancy.RateWrite, record, "idem:k.store:"+org.String()+":missing"); !d.Allowed ||
		len(d.Read) != 2 || string(d.Read[0]) != "the record" || d.Read[1] != nil {
		t.Fatalf("first call: %+v", d)
	}
	agentKey := "rate:" + KeyTag(org) + ":agent:" + other.String() + ":" + tenancy.RateWrite
	before := trips.n.Load()
	d := l.Allow(ctx, org, other, tenancy.RateWrite, record)
	if trips.n.Load()-before != 1 {
		t.Errorf("%d round trips for a call's limits and its read, want 1", trips.n.Load()-before)
	}
	if d.Allowed || d.Level != "org" || d.PerMinute != 6 || d.Read != nil || d.RetryAfter <= 0 || d.RetryAfter > 10*time.Second {
		t.Fatalf("second call of the org: %+v, want refused by the org's 6/min", d)
	}
	if v := r.Client.Get(ctx, agentKey).Val(); v != "" {
		t.Errorf("a call the org refused spent its agent's budget: %q", v)
	}
}
