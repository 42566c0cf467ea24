// Package ratelimit keeps MCP calls fair under load: limits per agent and
// per org, for reads and writes separately, counted in Redis with GCRA
// (one script for a call's limits: one round trip), so every replica
// shares one budget.
//
// A batch agent storing thousands of entries must not slow down the
// interactive agents of its org: its own limit stops it before it spends
// the org's budget (a call pays every budget or none: one refused by its
// agent's limit costs the org nothing, and one refused by the org's costs
// the agent nothing), and writes never spend the reads' budget.
//
// The limiter is an accelerator of fairness, not a guard of data: when Redis
// (or the settings in PostgreSQL) cannot be read in time, calls are let
// through (fail open), logged and counted, rather than refused for lack of a
// limiter.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/pgfeed"
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
	// SettingsTTL is how long an agent's settings are served before they
	// are read again, in the background (default 5 s), while the change
	// feed is down: a changed limit then applies on every replica within
	// it and one look-up. With the feed connected (Connected), a change
	// applies when it commits, and settings read under it are served for
	// FedSettingsTTL.
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
	rdb      redis.UniversalClient
	settings Settings
	o        Options

	mu         sync.Mutex
	cache      map[[2]uuid.UUID]cached
	refreshing map[[2]uuid.UUID]bool
	lastWarn   time.Time
	// The change feed (Connected, Notify): a read it does not cover may
	// have missed a change.
	cov pgfeed.Coverage
	// redisDownUntil: after a Redis failure the limiter lets calls through
	// without asking Redis for a second, so an outage (a dial that fails
	// after retries, a hung server) costs one call the timeout, not each.
	redisDownUntil time.Time
}

type cached struct {
	agent, org map[string]*int // by kind
	at         time.Time
	// fed: the change feed was connected from before the read started
	// and brought nothing while it ran, so any later change reaches this
	// entry.
	fed bool
}

// FedSettingsTTL is how long settings read while the change feed
// (tenancy.RateLimitsChannel, pgfeed) is connected are served before they
// are read again in the background: the feed says when they change. Read
// every SettingsTTL instead, the settings of a fleet of busy agents cost
// a statement per agent every 5 s (on a Citus cluster a routed one through
// the coordinator: docs/mcp.md).
const FedSettingsTTL = 10 * time.Minute

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
	return &Limiter{rdb: rdb, settings: settings, o: o, cache: map[[2]uuid.UUID]cached{}, refreshing: map[[2]uuid.UUID]bool{}}
}

// Preload loads the limits' script into Redis (into every master of a
// Redis Cluster), so that the first call's EVALSHA finds it: a server on a
// Redis that never ran the script (a new one, or one restarted) would
// otherwise pay its first call a second round trip. Best effort, within a
// second: a Redis down now is met again, with its fallbacks, by the calls.
func (l *Limiter) Preload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return admitScript.Load(ctx, l.rdb).Err()
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
	// Read holds the values of the keys Allow was asked to read, in their
	// order (nil for a key that does not exist), when Redis answered:
	// Read is nil when it did not (down, slow: the caller reads again or
	// goes without) or the call was refused.
	Read [][]byte
}

// admitScript is GCRA (the arithmetic of github.com/go-redis/redis_rate,
// on Redis's clock) over every limit of a call at once, the agent's first:
// the call is allowed only when every limit allows it, and only then does
// each budget pay for it, so a call refused at one level costs the other
// nothing.
//
// KEYS: the limits' keys, of one org (one hash tag, KeyTag: one slot of a
// Redis Cluster). ARGV: each limit's burst, rate and period (s).
// Answer: {1}, or {0, the refusing limit's index (from 1), its
// retry-after in seconds as a string}.
var admitScript = redis.NewScript(`
local now = redis.call("TIME")
now = (now[1] - 1483228800) + (now[2] / 1000000)
local tats = {}
for i = 1, #KEYS do
  local burst, rate, period = tonumber(ARGV[3*i - 2]), tonumber(ARGV[3*i - 1]), tonumber(ARGV[3*i])
  local interval = period / rate
  local tat = tonumber(redis.call("GET", KEYS[i]) or now)
  local new_tat = math.max(tat, now) + interval
  local diff = now - (new_tat - interval * burst)
  if diff < 0 then
    return {0, i, tostring(-diff)}
  end
  tats[i] = new_tat
end
for i = 1, #KEYS do
  redis.call("SET", KEYS[i], tostring(tats[i]), "EX", math.ceil(tats[i] - now))
end
return {1}
`)

// Allow takes one call of kind (tenancy.RateRead or RateWrite) from the
// agent's budget and its org's, and reads the keys in read (the store's
// idempotence record: see Decision.Read), all in one pipelined round trip
// (on a Redis Cluster, one per node the keys are on, at once).
func (l *Limiter) Allow(ctx context.Context, org, agent uuid.UUID, kind string, read ...string) Decision {
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
	type limit struct {
		level string
		per   int
	}
	var (
		limits []limit
		keys   = make([]string, 0, 2)
		args   = make([]any, 0, 6)
	)
	tag := KeyTag(org)
	for _, c := range []struct {
		level, key string
		limit      *int
	}{
		{"agent", "rate:" + tag + ":agent:" + agent.String() + ":" + kind, agentLimit},
		{"org", "rate:" + tag + ":org:" + kind, orgLimit},
	} {
		if c.limit == nil {
			continue
		}
		limits = append(limits, limit{c.level, *c.limit})
		keys = append(keys, c.key)
		args = append(args, burst(*c.limit), *c.limit, 60)
	}
	if len(keys) == 0 && len(read) == 0 {
		return Decision{Allowed: true} // unlimited, nothing to read: no round trip
	}
	res, got, err := l.admit(ctx, keys, args, read)
	if err != nil {
		l.mu.Lock()
		l.redisDownUntil = time.Now().Add(time.Second)
		l.mu.Unlock()
		l.failOpen("redis", err)
		return Decision{Allowed: true}
	}
	if len(res) > 0 && res[0] != int64(1) {
		i, _ := res[1].(int64)
		secs, _ := res[2].(string)
		retry, _ := strconv.ParseFloat(secs, 64)
		if i < 1 || int(i) > len(limits) {
			l.failOpen("redis", fmt.Errorf("rate limit script answered %v", res))
			return Decision{Allowed: true}
		}
		lim := limits[i-1]
		if l.o.Observer != nil {
			l.o.Observer.Limited(lim.level, kind)
		}
		return Decision{Level: lim.level, PerMinute: lim.per, RetryAfter: time.Duration(retry * float64(time.Second))}
	}
	return Decision{Allowed: true, Read: got}
}

// admit sends the limits' script (when there are limits) and the reads
// in one pipeline: the script's answer, and the values read (nil for a
// key that does not exist). A script Redis does not hold yet (NOSCRIPT:
// after a restart) is sent whole once more, which loads it.
func (l *Limiter) admit(ctx context.Context, keys []string, args []any, read []string) ([]any, [][]byte, error) {
	for attempt := 0; ; attempt++ {
		pipe := l.rdb.Pipeline()
		var script *redis.Cmd
		switch {
		case len(keys) == 0:
		case attempt == 0:
			script = admitScript.EvalSha(ctx, pipe, keys, args...)
		default:
			script = admitScript.Eval(ctx, pipe, keys, args...)
		}
		gets := make([]*redis.StringCmd, len(read))
		for i, k := range read {
			gets[i] = pipe.Get(ctx, k)
		}
		pipe.Exec(ctx) // each command's error is read below
		var res []any
		if script != nil {
			var err error
			res, err = script.Slice()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			if len(res) == 0 || (res[0] != int64(1) && len(res) != 3) {
				return nil, nil, fmt.Errorf("rate limit script answered %v", res)
			}
		}
		got := make([][]byte, len(read))
		for i, g := range gets {
			b, err := g.Bytes()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				return nil, nil, err
			default:
				got[i] = b
			}
		}
		return res, got, nil
	}
}

// KeyTag is org's Redis Cluster hash tag: the limits' keys named with it
// sit in one slot, so that one script may take them all.
func KeyTag(org uuid.UUID) string { return "{" + org.String() + "}" }

// burst is the burst of a limit of n calls a minute: ten seconds' worth
// (at least 1), smooth enough that a flood is cut within seconds, loose
// enough that an agent's short bursts (a few searches at once) pass.
func burst(n int) int { return max(1, n/6) }

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

// settingsFor returns the agent's settings. Once read they are served from
// the cache: past SettingsTTL the call is served with them while one
// look-up refreshes them in the background, so no call waits for
// PostgreSQL but an agent's first (or one idle for ten TTLs).
func (l *Limiter) settingsFor(ctx context.Context, org, agent uuid.UUID) cached {
	key := [2]uuid.UUID{org, agent}
	now := time.Now()
	l.mu.Lock()
	c, ok := l.cache[key]
	age := now.Sub(c.at)
	ttl := l.o.SettingsTTL
	if ok && c.fed && l.cov.Up() {
		ttl = FedSettingsTTL
	}
	refresh := ok && age >= ttl && age < 10*ttl && !l.refreshing[key]
	if refresh {
		l.refreshing[key] = true
	}
	l.mu.Unlock()
	if l.settings == nil || (ok && age < ttl) {
		return c
	}
	if refresh {
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settingsRefreshTimeout)
			defer cancel()
			l.readSettings(ctx, key, c)
			l.mu.Lock()
			delete(l.refreshing, key)
			l.mu.Unlock()
		}()
		return c
	}
	if ok && age < 10*ttl {
		return c // being refreshed
	}
	return l.readSettings(ctx, key, c)
}

// settingsRefreshTimeout bounds a refresh of an agent's settings in the
// background.
const settingsRefreshTimeout = 2 * time.Second

// readSettings reads the agent's settings into the cache; on failure it
// keeps what it knew (or the defaults).
func (l *Limiter) readSettings(ctx context.Context, key [2]uuid.UUID, old cached) cached {
	l.mu.Lock()
	mark := l.cov.Start()
	l.mu.Unlock()
	rows, err := l.settings.RateLimitsFor(ctx, key[0], key[1])
	if err != nil {
		// A limiter that cannot read its settings must not refuse calls.
		l.failOpen("settings", err)
		return old
	}
	c := cached{agent: map[string]*int{}, org: map[string]*int{}, at: time.Now()}
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
	c.fed = l.cov.Covers(mark)
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

// Channel is pgfeed.Subscriber's: the rate limits' changes.
func (l *Limiter) Channel() string { return tenancy.RateLimitsChannel }

// Notify is pgfeed.Subscriber's: an org's settings changed; the next call
// of each of its agents reads them again.
func (l *Limiter) Notify(payload string) {
	org, err := tenancy.ParseRateLimitsChange(payload)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cov.Event()
	if err != nil {
		l.o.Logger.Error("rate limits feed: unreadable notification; dropping every cached setting", "payload", payload, "err", err)
		clear(l.cache)
		return
	}
	for k := range l.cache {
		if k[0] == org {
			delete(l.cache, k)
		}
	}
}

// Connected is pgfeed.Subscriber's. Lost, no setting is covered by the
// feed any more: changes may come while it is away.
func (l *Limiter) Connected(up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cov.Connected(up)
	if !up {
		for k, c := range l.cache {
			c.fed = false
			l.cache[k] = c
		}
	}
}
