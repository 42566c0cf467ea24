package server

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/oauth"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/appenv/knowledgeenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Defaults of the configuration.
const (
	DefaultAddr         = "127.0.0.1:8080"
	DefaultMaxBodyBytes = 1 << 20 // a 32,000-character body escaped as JSON fits many times over
	// DefaultMaxDocumentBodyBytes is the body limit of the calls of
	// store_document (knowledge tools' LargeBody): its 1 MiB of content
	// (knowledge.MaxDocumentBytes) as a JSON string, even when every
	// other byte needs a two-byte escape (\n, \"), with room to spare.
	DefaultMaxDocumentBodyBytes = 4 << 20
	DefaultCallTimeout          = 30 * time.Second
	DefaultShutdownTimeout      = 25 * time.Second
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
	Addr         string // MCP_ADDR
	PublicURL    string // MCP_PUBLIC_URL: base URL clients use; default http://<bound address>
	DatabaseURL  string // DATABASE_URL
	RedisURL     string // REDIS_URL
	MaxBodyBytes int64  // MCP_MAX_BODY_BYTES
	// MaxDocumentBodyBytes (MCP_MAX_DOCUMENT_BODY_BYTES) is the body limit
	// of a request whose every message calls a tool taking a document
	// (store_document); at least MaxBodyBytes.
	MaxDocumentBodyBytes int64
	CallTimeout          time.Duration // MCP_CALL_TIMEOUT
	TokenCacheTTL        time.Duration // MCP_TOKEN_CACHE_TTL: the revocation bound
	TokenTimeout         time.Duration // MCP_TOKEN_LOOKUP_TIMEOUT: deadline of one token look-up
	MaxInFlight          int           // MCP_MAX_INFLIGHT: MCP requests served at once; beyond, 503
	DBWait               time.Duration // MCP_DB_WAIT: longest wait of a call for a database connection
	// RateLimits (MCP_RATE_AGENT_READS, MCP_RATE_AGENT_WRITES,
	// MCP_RATE_ORG_READS, MCP_RATE_ORG_WRITES: calls a minute, or
	// "unlimited") apply to orgs and agents without settings of their own
	// (ctl ratelimit).
	RateLimits      ratelimit.Limits
	ShutdownTimeout time.Duration // MCP_SHUTDOWN_TIMEOUT
	// Logging: LOG_LEVEL and LOG_FORMAT, or MCP_LOG_LEVEL and
	// MCP_LOG_FORMAT for this app alone (appenv.Env.Logger).
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
	// QueryEmbedBudget (SEARCH_EMBED_BUDGET; 0, unset: the service's
	// default, 1s): how long a search waits for its query vector before
	// answering from the lexical lists (knowledge.Options.QueryEmbedBudget).
	QueryEmbedBudget time.Duration
	// Audit tunes the audit trail's writer (audit.go).
	Audit AuditConfig
	// OAuth (MCP_OAUTH_*): JWT access tokens of an OAuth issuer beside
	// the kn_ tokens; off without MCP_OAUTH_ISSUER (oauth.Config).
	OAuth oauth.Config
	// StagesFile (MCP_STAGES_FILE): where the end-to-end benchmark's stage
	// clock writes each call's stages and round trips (apps/mcp/bench;
	// one call at a time); "": off.
	StagesFile string
}

// ConfigFromEnv reads the configuration; every variable is optional. Bad
// values are reported together, each naming its variable (appenv).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := appenv.New(getenv)
	c := ReadConfig(e)
	return c, e.Err()
}

// ReadConfig reads the configuration through e, which collects the errors.
func ReadConfig(e *appenv.Env) Config {
	c := Config{
		Addr:                 e.String("MCP_ADDR", DefaultAddr),
		PublicURL:            strings.TrimRight(e.String("MCP_PUBLIC_URL", ""), "/"),
		DatabaseURL:          e.String("DATABASE_URL", db.DefaultURL),
		RedisURL:             e.String("REDIS_URL", db.DefaultRedisURL),
		MaxBodyBytes:         int64(e.Int("MCP_MAX_BODY_BYTES", DefaultMaxBodyBytes, 64<<10, 64<<20)),
		MaxDocumentBodyBytes: int64(e.Int("MCP_MAX_DOCUMENT_BODY_BYTES", DefaultMaxDocumentBodyBytes, 64<<10, 64<<20)),
		CallTimeout:          e.Duration("MCP_CALL_TIMEOUT", DefaultCallTimeout, time.Second, 10*time.Minute),
		TokenCacheTTL:        e.Duration("MCP_TOKEN_CACHE_TTL", authn.DefaultCacheTTL, 0, authn.MaxCacheTTL),
		TokenTimeout:         e.Duration("MCP_TOKEN_LOOKUP_TIMEOUT", authn.DefaultLookupTimeout, 50*time.Millisecond, 30*time.Second),
		MaxInFlight:          e.Int("MCP_MAX_INFLIGHT", DefaultMaxInFlight, 1, 100000),
		DBWait:               e.Duration("MCP_DB_WAIT", DefaultDBWait, 10*time.Millisecond, time.Minute),
		RateLimits:           ratelimit.DefaultLimits(),
		ShutdownTimeout:      e.Duration("MCP_SHUTDOWN_TIMEOUT", DefaultShutdownTimeout, time.Second, 10*time.Minute),
		TextSearchConfig:     knowledgeenv.TextSearchConfig(e),
		VectorCalibration:    knowledgeenv.VectorCalibration(e),
		QueryEmbedBudget:     knowledgeenv.QueryEmbedBudget(e),
		Audit:                readAuditConfig(e),
		OAuth:                oauth.ReadConfig(e),
		StagesFile:           e.String("MCP_STAGES_FILE", ""),
	}
	rate := func(name string, dst **int) {
		v := e.String(name, "")
		if v == "" {
			return
		}
		n, ok := tenancy.ParseLimit(v)
		if !ok || (n != nil && (*n < 1 || *n > tenancy.MaxRatePerMinute)) {
			e.Fail(name, fmt.Sprintf("must be calls a minute from 1 to %d, or unlimited", tenancy.MaxRatePerMinute))
			return
		}
		*dst = nil
		if n != nil {
			per := int(*n)
			*dst = &per
		}
	}
	rate("MCP_RATE_AGENT_READS", &c.RateLimits.AgentReads)
	rate("MCP_RATE_AGENT_WRITES", &c.RateLimits.AgentWrites)
	rate("MCP_RATE_ORG_READS", &c.RateLimits.OrgReads)
	rate("MCP_RATE_ORG_WRITES", &c.RateLimits.OrgWrites)
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		e.Fail("MCP_ADDR", "must be host:port, such as 127.0.0.1:8080 (:0 picks a free port)")
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			e.Fail("MCP_PUBLIC_URL", "must be an absolute http(s) URL such as https://mcp.example.com")
		}
	}
	return c
}
