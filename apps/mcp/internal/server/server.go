// Package server wires the MCP server of the knowledge module: the go-sdk
// server with the knowledge tools, bearer-token auth, per-token scopes, the
// Streamable HTTP endpoint (stateless) and its operational endpoints, and
// the stdio mode.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/later"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/oauth"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/pgfeed"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Version is reported in the MCP initialize answer.
const Version = "0.1.0"

// Pinger is a dependency /readyz checks.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Deps are the server's dependencies.
type Deps struct {
	Knowledge kt.Service
	Tokens    authn.TokenVerifier
	// Ready lists the dependencies /readyz checks, by name.
	Ready  map[string]Pinger
	Logger *slog.Logger
	// Redis keeps the rate limiters' counters; nil: no rate limits.
	Redis redis.UniversalClient
	// RateSettings are the operators' rate limit settings (tenancy);
	// nil: Config.RateLimits for everyone.
	RateSettings ratelimit.Settings
	// DBSlots is the size of the database pool: calls beyond it wait at
	// most Config.DBWait for a connection. 0: no bound.
	DBSlots int
	// RerankMetrics, the knowledge service's rerank observer, is served
	// on /metrics; nil: none.
	RerankMetrics *RerankMetrics
	// Audit stores the audit trail (audit.go); nil: no audit trail.
	Audit AuditSink
	// Agents finds (and creates) the agents OAuth tokens name
	// (Config.OAuth); nil: Tokens, when it can.
	Agents oauth.Agents
	// Stages is the benchmark's stage clock (MCP_STAGES_FILE); nil: off.
	Stages *stages.Recorder
	// Feed opens the connection of the notification feed (pgfeed): token
	// revocations and rate-limit changes; nil: no feed, a revocation takes
	// effect within Config.TokenCacheTTL and a changed limit within the
	// limiter's SettingsTTL.
	Feed func(context.Context) (*pgx.Conn, error)
}

// Server is one MCP server. Start it once; Shutdown drains it.
type Server struct {
	cfg      Config
	deps     Deps
	logger   *slog.Logger
	verifier *authn.Verifier
	metrics  *metrics
	// slots bounds the MCP requests in flight (Config.MaxInFlight).
	slots chan struct{}
	// dbSlots bounds the calls using the database pool (Deps.DBSlots).
	dbSlots chan struct{}
	// limiter applies the rate limits; nil without Deps.Redis.
	limiter *ratelimit.Limiter
	// audit writes the audit trail; nil without Deps.Audit.
	audit *auditor
	// later runs what the calls' answers need not wait for, after them:
	// their records (audit, metrics, log line) and, through
	// knowledge.WithAfter, the record of a store's answer and the
	// embeddings queue's hand-over. Shutdown runs what is left before it
	// closes the audit writer (closeRecords).
	later *later.Queue
	// oauth validates OAuth access tokens; nil without Config.OAuth.
	oauth *oauth.Validator

	mu        sync.Mutex
	http      *http.Server
	ln        net.Listener
	publicURL string
	done      chan struct{} // closed when Serve has returned
	serveErr  error         // set before done is closed
}

// New returns a server; it does not listen yet.
func New(cfg Config, deps Deps) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	s := &Server{
		cfg:     cfg,
		deps:    deps,
		logger:  deps.Logger,
		metrics: newMetrics(),
		slots:   make(chan struct{}, max(cfg.MaxInFlight, 1)),
	}
	tokens := deps.Tokens
	if cfg.OAuth.Enabled() {
		agents := deps.Agents
		if agents == nil {
			agents, _ = deps.Tokens.(oauth.Agents)
		}
		s.oauth = oauth.New(cfg.OAuth, agents, nil, deps.Logger)
		if cfg.PublicURL != "" { // else known in Start
			s.oauth.SetAudience(cfg.PublicURL + PathMCP)
		}
		tokens = authn.Dispatch{Own: deps.Tokens, OAuth: s.oauth, IsOAuth: oauth.LooksLikeJWT}
	}
	s.verifier = authn.NewVerifier(tokens, cfg.TokenCacheTTL, cfg.TokenTimeout, deps.Logger)
	if deps.DBSlots > 0 {
		s.dbSlots = make(chan struct{}, deps.DBSlots)
	}
	if deps.RerankMetrics != nil {
		s.metrics.reg.MustRegister(deps.RerankMetrics.collectors()...)
	}
	s.audit = s.newAuditor(deps.Audit)
	s.later = later.New(later.DefaultSize, laterWorkers)
	if deps.Redis != nil {
		s.limiter = ratelimit.New(deps.Redis, deps.RateSettings, ratelimit.Options{
			Defaults: cfg.RateLimits,
			Observer: s.metrics,
			Logger:   deps.Logger,
		})
	}
	return s
}

// principalFunc resolves who makes an MCP request.
type principalFunc func(ctx context.Context, req mcp.Request) (*tenancy.Principal, error)

// newMCPServer builds the go-sdk server with the tools, resources and two
// receiving middlewares: the one that resolves the principal and filters
// the lists, then the gate every call that touches data passes (gate.go).
func (s *Server) newMCPServer(resolve principalFunc) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentfleet-knowledge", Title: "Agent fleet knowledge", Version: Version}, &mcp.ServerOptions{
		Instructions: instructions,
		// The SDK's session chatter at DEBUG, a client's protocol mistake
		// at WARN (sdklog.go).
		Logger: newSDKLogger(s.logger),
		// Declares the completions capability: ids of the resource
		// templates and of tool arguments, tags, agents (kt.Completion).
		CompletionHandler: kt.Completion(s.deps.Knowledge, kt.Options{Logger: s.logger}),
		// Every answer is a tenant's: knowledge of one org, a tool list
		// filtered by one token's scopes. The protocol's default cache
		// scope is "public" (any intermediary may serve it to anyone);
		// ours is "private", and never fresh (entries change, tokens are
		// revoked).
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.CacheScope, c.TTLMs = "private", 0
		},
	})
	kt.Register(srv, s.deps.Knowledge, kt.Options{Logger: s.logger})
	srv.AddReceivingMiddleware(s.callMiddleware(resolve), s.gateMiddleware())
	return srv
}

const instructions = `This server is the shared memory of your organisation's agent fleet.
Search it (search_knowledge) before working on a topic; store what you learn (store_knowledge) so others can reuse it, and read the similar entries its answer lists; when knowledge changes, correct it with supersede_knowledge (the old entry stays as history); erase with forget_knowledge only what must not be read at all (a secret, personal data).
Read a whole entry with get_knowledge or the resource knowledge://{id}, browse with list_knowledge, the entries linked to a task with knowledge://tasks/{taskId}, and what your organisation holds with knowledge://stats. search_knowledge and list_knowledge answer as of a past time with asOf.
Tool errors start with a stable code (invalid_argument, not_found, forbidden, conflict, cycle, quota_exceeded, rate_limited, unavailable, internal) followed by the argument at fault and the rule.`

// Start listens on the configured address and serves in the background. It
// returns the bound address (useful with port 0).
func (s *Server) Start(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return "", errors.New("server already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.publicURL = s.cfg.PublicURL
	if s.publicURL == "" {
		s.publicURL = "http://" + ln.Addr().String()
	}
	if s.oauth != nil {
		s.oauth.SetAudience(s.publicURL + PathMCP)
	}
	s.listen(ctx)
	s.http = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.cfg.CallTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.done = make(chan struct{})
	hs, done := s.http, s.done
	go func() {
		err := hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.serveErr = err
		close(done)
	}()
	// What serves where, in the one start-up line an operator looks for.
	s.logger.Info("mcp server listening", "addr", ln.Addr().String(), "endpoint", s.publicURL+PathMCP,
		"health", s.publicURL+"/healthz", "ready", s.publicURL+"/readyz", "metrics", s.publicURL+"/metrics")
	return ln.Addr().String(), nil
}

// URL is the public base URL (after Start).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.publicURL
}

// Shutdown stops accepting connections and waits for in-flight calls to
// finish, up to the context's deadline; then it closes what remains.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	hs, done := s.http, s.done
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	err := hs.Shutdown(ctx)
	if err != nil {
		hs.Close()
	}
	<-done
	s.closeRecords(ctx)
	if err == nil {
		err = s.serveErr
	}
	return err
}

// listen readies what serving needs: the rate limits' script loaded into
// Redis, and the notification feed of the token cache and the rate
// limiter's settings kept connected until ctx ends.
func (s *Server) listen(ctx context.Context) {
	subs := []pgfeed.Subscriber{s.verifier}
	if s.limiter != nil {
		if err := s.limiter.Preload(ctx); err != nil {
			s.logger.Warn("rate limits: the script could not be loaded into Redis now; the first call sends it whole", "err", err)
		}
		subs = append(subs, s.limiter)
	}
	if s.deps.Feed != nil {
		go pgfeed.Listen(ctx, s.deps.Feed, s.verifier.Timeout(), s.logger, subs...)
	}
}

// laterWorkers serve the queue of what runs after the answers: one for
// the records, one more so that a slow hand-over to Redis does not hold
// them up.
const laterWorkers = 2

// closeRecords runs what the answered calls left to do (records, the
// queue's hand-overs), then writes every audit record, until ctx ends.
func (s *Server) closeRecords(ctx context.Context) {
	if !s.later.Close(ctx) {
		s.logger.Error("the work of answered calls (records, the embeddings queue's hand-overs) did not finish before shutdown ended")
	}
	s.audit.close(ctx)
}

// Flush waits until the records of the calls answered so far are written
// to the metrics and the log (and handed to the audit writer), or ctx
// ends: /metrics does before every scrape.
func (s *Server) Flush(ctx context.Context) { s.later.Flush(ctx) }

// Done is closed when the HTTP server has stopped; Err then says why (nil
// after Shutdown). Nil before Start.
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Err is the error the HTTP server stopped with, once Done is closed.
func (s *Server) Err() error {
	<-s.Done()
	return s.serveErr
}

// ServeStdio serves MCP over t (stdin/stdout in production) for the one
// token given. The token is verified at start (a bad token is an error) and
// again on every request through the same cache as HTTP, so a revoked token
// stops working within the cache TTL here too.
func (s *Server) ServeStdio(ctx context.Context, token string, t mcp.Transport) error {
	if token == "" {
		return errors.New("stdio mode needs the token in KNOWLEDGE_TOKEN")
	}
	if _, err := s.verifier.Verify(ctx, token); err != nil {
		return fmt.Errorf("KNOWLEDGE_TOKEN: %w", err)
	}
	srv := s.newMCPServer(func(ctx context.Context, _ mcp.Request) (*tenancy.Principal, error) {
		return s.verifier.Verify(ctx, token)
	})
	s.listen(ctx)
	defer func() { // every record, whether stdin closed or ctx ended
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
		defer cancel()
		s.closeRecords(cctx)
	}()
	return srv.Run(ctx, t)
}
