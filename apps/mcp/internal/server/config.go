package server

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Defaults of the configuration.
const (
	DefaultAddr            = "127.0.0.1:8080"
	DefaultMaxBodyBytes    = 1 << 20 // a 32,000-character body escaped as JSON fits many times over
	DefaultCallTimeout     = 30 * time.Second
	DefaultShutdownTimeout = 25 * time.Second
	// DefaultMaxInFlight bounds the MCP requests one process serves at
	// once. Beyond it a request is answered 503 at once instead of queueing
	// for a database connection: a flood from one client then costs the
	// others a retry, not every connection of the pool and unbounded memory.
	DefaultMaxInFlight = 64
	// DefaultDBWait bounds how long a call waits for a database
	// connection once the pool is busy: long enough to ride out a burst,
	// far inside MCP_CALL_TIMEOUT.
	DefaultDBWait = 2 * time.Second
)

// Config is the server's configuration; ConfigFromEnv documents each field's
// variable. docs/mcp.md has the table.
type Config struct {
	Addr          string        // MCP_ADDR
	PublicURL     string        // MCP_PUBLIC_URL: base URL clients use; default http://<bound address>
	DatabaseURL   string        // DATABASE_URL
	RedisURL      string        // REDIS_URL
	MaxBodyBytes  int64         // MCP_MAX_BODY_BYTES
	CallTimeout   time.Duration // MCP_CALL_TIMEOUT
	TokenCacheTTL time.Duration // MCP_TOKEN_CACHE_TTL: the revocation bound
	TokenTimeout  time.Duration // MCP_TOKEN_LOOKUP_TIMEOUT: deadline of one token look-up
	MaxInFlight   int           // MCP_MAX_INFLIGHT: MCP requests served at once; beyond, 503
	DBWait        time.Duration // MCP_DB_WAIT: longest wait of a call for a database connection
	// RateLimits (MCP_RATE_AGENT_READS, MCP_RATE_AGENT_WRITES,
	// MCP_RATE_ORG_READS, MCP_RATE_ORG_WRITES: calls a minute, or
	// "unlimited") apply to orgs and agents without settings of their own
	// (ctl ratelimit).
	RateLimits      ratelimit.Limits
	ShutdownTimeout time.Duration // MCP_SHUTDOWN_TIMEOUT
	LogLevel        slog.Level    // MCP_LOG_LEVEL: debug, info, warn, error
	LogFormat       string        // MCP_LOG_FORMAT: json or text
	// TextSearchConfig (SEARCH_TEXT_CONFIG, default english) analyses the
	// queries of orgs whose lexical index does not exist yet; an indexed
	// org's queries use the configuration its index was built with. It
	// must be the worker's, which builds the indexes. run checks it
	// against the database at start.
	TextSearchConfig string
	// VectorCalibration (SEARCH_COSINE_FLOOR, SEARCH_COSINE_FULL): the
	// embedding model's cosine scale for the calibrated score; nil: the
	// measured or default one of the model (knowledge.CalibrationFor).
	VectorCalibration *knowledge.VectorCalibration
	// QueryEmbedBudget (SEARCH_EMBED_BUDGET, default 1s): how long a
	// search waits for its query vector before answering from the lexical
	// lists (knowledge.Options.QueryEmbedBudget).
	QueryEmbedBudget time.Duration
}

// ConfigFromEnv reads the configuration; every variable is optional.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Addr:             cmp.Or(getenv("MCP_ADDR"), DefaultAddr),
		PublicURL:        strings.TrimRight(getenv("MCP_PUBLIC_URL"), "/"),
		DatabaseURL:      cmp.Or(getenv("DATABASE_URL"), db.DefaultURL),
		RedisURL:         cmp.Or(getenv("REDIS_URL"), db.DefaultRedisURL),
		MaxBodyBytes:     DefaultMaxBodyBytes,
		CallTimeout:      DefaultCallTimeout,
		TokenCacheTTL:    authn.DefaultCacheTTL,
		TokenTimeout:     authn.DefaultLookupTimeout,
		MaxInFlight:      DefaultMaxInFlight,
		DBWait:           DefaultDBWait,
		RateLimits:       ratelimit.DefaultLimits(),
		ShutdownTimeout:  DefaultShutdownTimeout,
		LogFormat:        cmp.Or(getenv("MCP_LOG_FORMAT"), "json"),
		TextSearchConfig: cmp.Or(strings.TrimSpace(getenv(knowledge.EnvTextSearchConfig)), knowledge.DefaultTextSearchConfig),
		QueryEmbedBudget: knowledge.DefaultQueryEmbedBudget,
	}
	var errs []string
	bad := func(name, rule string) { errs = append(errs, name+": "+rule) }
	if cal, err := knowledge.VectorCalibrationFromEnv(getenv); err != nil {
		errs = append(errs, err.Error())
	} else {
		c.VectorCalibration = cal
	}
	if v := getenv("MCP_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 64<<10 || n > 64<<20 {
			bad("MCP_MAX_BODY_BYTES", "must be a byte count from 65536 to 67108864")
		}
		c.MaxBodyBytes = n
	}
	dur := func(name string, dst *time.Duration, min, max time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < min || d > max {
			bad(name, fmt.Sprintf("must be a duration from %s to %s, such as 5s", min, max))
			return
		}
		*dst = d
	}
	dur("MCP_CALL_TIMEOUT", &c.CallTimeout, time.Second, 10*time.Minute)
	dur("MCP_TOKEN_CACHE_TTL", &c.TokenCacheTTL, 0, authn.MaxCacheTTL)
	dur("MCP_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout, time.Second, 10*time.Minute)
	dur("MCP_TOKEN_LOOKUP_TIMEOUT", &c.TokenTimeout, 50*time.Millisecond, 30*time.Second)
	dur("MCP_DB_WAIT", &c.DBWait, 10*time.Millisecond, time.Minute)
	dur(knowledge.EnvQueryEmbedBudget, &c.QueryEmbedBudget, 10*time.Millisecond, time.Minute)
	if v := getenv("MCP_MAX_INFLIGHT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			bad("MCP_MAX_INFLIGHT", "must be an integer from 1 to 100000")
		}
		c.MaxInFlight = n
	}
	rate := func(name string, dst **int) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		if v == "unlimited" {
			*dst = nil
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > tenancy.MaxRatePerMinute {
			bad(name, fmt.Sprintf("must be calls a minute from 1 to %d, or unlimited", tenancy.MaxRatePerMinute))
			return
		}
		*dst = &n
	}
	rate("MCP_RATE_AGENT_READS", &c.RateLimits.AgentReads)
	rate("MCP_RATE_AGENT_WRITES", &c.RateLimits.AgentWrites)
	rate("MCP_RATE_ORG_READS", &c.RateLimits.OrgReads)
	rate("MCP_RATE_ORG_WRITES", &c.RateLimits.OrgWrites)
	if v := getenv("MCP_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			bad("MCP_LOG_LEVEL", "must be debug, info, warn or error")
		}
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		bad("MCP_LOG_FORMAT", "must be json or text")
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("MCP_PUBLIC_URL", "must be an absolute http(s) URL such as https://mcp.example.com")
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}
