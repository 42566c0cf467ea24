// Package ratelimit keeps MCP calls fair under load: limits per agent and
// per org, for reads and writes separately, counted in Redis with GCRA
// (github.com/go-redis/redis_rate), so every replica shares one budget.
//
// A batch agent storing thousands of entries must not slow down the
// interactive agents of its org: its own limit stops it before it spends
// the org's budget (the agent's limit is checked first, and a call refused
// there costs the org nothing), and writes never spend the reads' budget.
//
// The limiter is an accelerator of fairness, not a guard of data: when Redis
// (or the settings in PostgreSQL) cannot be read in time, calls are let
// through (fail open), logged and counted, rather than refused for lack of a
// limiter.
package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Defaults per minute, for orgs and agents without a setting of their own.
// An agent's defaults allow an interactive agent every call it could
// reasonably make (20 searches and 10 stores a second, sustained) and a
// batch writer thousands of entries an hour; an org's allow ten such
// agents at full speed.
const (
	DefaultAgentReads  = 1200
	DefaultAgentWrites = 600
	DefaultOrgReads    = 12000
	DefaultOrgWrites   = 6000
)

// Limits are per-minute limits; nil is unlimited.
type Limits struct {
	AgentReads, AgentWrites, OrgReads, OrgWrites *int
}

// DefaultLimits are the package defaults.
func DefaultLimits() Limits {
	v := func(n int) *int { return &n }
	return Limits{v(DefaultAgentReads), v(DefaultAgentWrites), v(DefaultOrgReads), v(DefaultOrgWrites)}
}

// Settings reads the operators' settings (tenancy.Service).
type Settings interface {
	RateLimitsFor(ctx context.Context, orgID, agentID uuid.UUID) ([]tenancy.RateLimit, error)
}

// Observer is told what the limiter decided (metrics).
type Observer interface {
	Limited(level, kind string)
	FailedOpen(reason string)
}

// Options configure a Limiter; zero values mean the documented defaults.
type Options struct {
	Defaults Limits
	// SettingsTTL is how long an agent's settings are cached (default 5 s):
	// the delay before a changed limit applies on every replica.
	SettingsTTL time.Duration
	// Timeout bounds the limiter's work on one call (default 250 ms): the
	// settings look-up and the Redis round trips. Past it, the call goes
	// through (fail open).
	Timeout  time.Duration
	Observer Observer
	Logger   *slog.Logger
}

// Limiter decides whether a call may run. Safe for concurrent use.
type Limiter struct {
	rl       *redis_rate.Limiter
	settings Settings
	o        Options

	mu       sync.Mutex
	cache    map[[2]uuid.UUID]cached
	lastWarn time.Time
	// redisDownUntil: after a Redis failure the limiter lets calls through
	// without asking Redis for a second, so an outage (a dial that fails
	// after retries, a hung server) costs one call the timeout, not each.
	redisDownUntil time.Time
}

type cached struct {
	agent, org map[string]*int // by kind
	at         time.Time
}

// New returns a Limiter on rdb; settings may be nil (defaults only).
func New(rdb redis.UniversalClient, settings Settings, o Options) *Limiter {
	if o.SettingsTTL <= 0 {
		o.SettingsTTL = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Limiter{rl: redis_rate.NewLimiter(rdb), settings: settings, o: o, cache: map[[2]uuid.UUID]cached{}}
}

// Decision is the limiter's answer for one call.
type Decision struct {
	Allowed bool
	// Level is the limit that refused the call: "agent" or "org".
	Level string
	// PerMinute is that limit.
	PerMinute int
	// RetryAfter is when the same call would be allowed.
	RetryAfter time.Duration
}

// Allow takes one call of kind (tenancy.RateRead or RateWrite) from the
// agent's budget and then from its org's.
func (l *Limiter) Allow(ctx context.Context, org, agent uuid.UUID, kind string) Decision {
	l.mu.Lock()
	down := time.Now().Before(l.redisDownUntil)
	l.mu.Unlock()
	if down {
		l.failOpen("redis", nil)
		return Decision{Allowed: true}
	}
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	agentLimit, orgLimit := l.limits(ctx, org, agent, kind)
	for _, c := range []struct {
		level string
		key   string
		limit *int
	}{
		{"agent", fmt.Sprintf("mcp:%s:agent:%s:%s", org, agent, kind), agentLimit},
		{"org", fmt.Sprintf("mcp:%s:org:%s", org, kind), orgLimit},
	} {
		if c.limit == nil {
			continue
		}
		res, err := l.rl.Allow(ctx, c.key, gcra(*c.limit))
		if err != nil {
			l.mu.Lock()
			l.redisDownUntil = time.Now().Add(time.Second)
			l.mu.Unlock()
			l.failOpen("redis", err)
			return Decision{Allowed: true}
		}
		if res.Allowed == 0 {
			if l.o.Observer != nil {
				l.o.Observer.Limited(c.level, kind)
			}
			return Decision{Level: c.level, PerMinute: *c.limit, RetryAfter: res.RetryAfter}
		}
	}
	return Decision{Allowed: true}
}

// gcra is a limit of n calls a minute with a burst of ten seconds' worth
// (at least 1): smooth enough that a flood is cut within seconds, loose
// enough that an agent's short bursts (a few searches at once) pass.
func gcra(n int) redis_rate.Limit {
	return redis_rate.Limit{Rate: n, Period: time.Minute, Burst: max(1, n/6)}
}

// limits resolves the agent's and the org's limit of kind: the agent's own
// setting, else the org's default for its agents, else the server's.
func (l *Limiter) limits(ctx context.Context, org, agent uuid.UUID, kind string) (agentLimit, orgLimit *int) {
	c := l.settingsFor(ctx, org, agent)
	agentLimit, orgLimit = l.o.Defaults.AgentReads, l.o.Defaults.OrgReads
	if kind == tenancy.RateWrite {
		agentLimit, orgLimit = l.o.Defaults.AgentWrites, l.o.Defaults.OrgWrites
	}
	if v, ok := c.agent[kind]; ok {
		agentLimit = v
	}
	if v, ok := c.org[kind]; ok {
		orgLimit = v
	}
	return agentLimit, orgLimit
}

func (l *Limiter) settingsFor(ctx context.Context, org, agent uuid.UUID) cached {
	key := [2]uuid.UUID{org, agent}
	now := time.Now()
	l.mu.Lock()
	c, ok := l.cache[key]
	l.mu.Unlock()
	if (ok && now.Sub(c.at) < l.o.SettingsTTL) || l.settings == nil {
		return c
	}
	rows, err := l.settings.RateLimitsFor(ctx, org, agent)
	if err != nil {
		// Keep what we knew (or the defaults): a limiter that cannot read
		// its settings must not refuse calls.
		l.failOpen("settings", err)
		return c
	}
	c = cached{agent: map[string]*int{}, org: map[string]*int{}, at: now}
	for _, r := range rows { // the agent's own row beats the org's default for agents
		switch {
		case r.Scope == tenancy.RateScopeOrg:
			c.org[r.Kind] = r.PerMinute
		case r.AgentID != nil:
			c.agent[r.Kind] = r.PerMinute
		default:
			if _, set := c.agent[r.Kind]; !set {
				c.agent[r.Kind] = r.PerMinute
			}
		}
	}
	l.mu.Lock()
	if len(l.cache) >= 10000 {
		clear(l.cache)
	}
	l.cache[key] = c
	l.mu.Unlock()
	return c
}

// failOpen counts every call let through for lack of a limiter and logs at
// most one line every 10 s, so an outage does not flood the logs.
func (l *Limiter) failOpen(reason string, err error) {
	if l.o.Observer != nil {
		l.o.Observer.FailedOpen(reason)
	}
	l.mu.Lock()
	warn := err != nil && time.Since(l.lastWarn) >= 10*time.Second
	if warn {
		l.lastWarn = time.Now()
	}
	l.mu.Unlock()
	if warn {
		l.o.Logger.Warn("rate limiter unavailable: letting calls through", "reason", reason, "err", err)
	}
}
