package server_test

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// bundle is one test's world: a fresh database, a leased Redis database, a
// running server on a free port, and the tenancy service to make orgs,
// agents and tokens with.
type bundle struct {
	t       testing.TB
	srv     *server.Server
	url     string // base URL, no trailing slash
	tenancy *tenancy.Service
	svc     *knowledge.Service
	db      *testenv.Database
	app     *pgxpool.Pool // the server's: the application's role
	redis   *redis.Client
}

type setupOpts struct {
	// asOwner runs the server as the schema's owner, exempt from
	// row-level security: what the policies cost, measured by
	// BenchmarkMCPEndToEnd with MCP_BENCH_ROLE=owner.
	asOwner bool
	// db: the database to serve (default: a fresh one), for two servers
	// on one database (BenchmarkRowSecurityMCP).
	db          *testenv.Database
	cacheTTL    time.Duration
	maxBody     int64
	wrap        func(kt.Service) kt.Service
	callTimeout time.Duration
	// tokensURL, when set, points token verification (and /readyz's
	// postgres) at another PostgreSQL address: a hung or stopped one.
	tokensURL string
	// dbSlots bounds the calls using the database (server.Deps.DBSlots).
	dbSlots int
	// limiterRedis replaces the rate limiter's Redis (a dead one).
	limiterRedis *redis.Client
	// rate replaces the default rate limits (nil: the production defaults).
	rate *ratelimit.Limits
	// config adjusts the configuration before the server is built.
	config func(*server.Config)
	// audit turns the audit trail on (server.Deps.Audit).
	audit bool
	// log replaces the server's logger (default: discarded, or the test's
	// log with -v).
	log *slog.Logger
	// reranker is the knowledge service's (default: none).
	reranker rerank.Reranker
}

func setup(t testing.TB, o setupOpts) *bundle {
	t.Helper()
	d := o.db
	if d == nil {
		d = testenv.Postgres(t)
	}
	r := testenv.LeaseRedis(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.log != nil {
		logger = o.log
	}
	// The server runs as the application's role, as deployed: every call
	// of the suite goes through row-level security (d.Pool, the owner,
	// stands for ctl and the worker).
	app := d.AppPool(t)
	if o.asOwner {
		app = d.Pool
	}
	rerankMetrics := server.NewRerankMetrics()
	// The duplicate check and a search up to the reranker's answer within
	// a minute (the product's 250 ms a statement and 300 ms a search are
	// met by no loaded machine, least of all a Citus cluster): the tests
	// assert what they find, not their budgets (the budgets have tests of
	// their own in packages/knowledge).
	svc := knowledge.New(app, knowledge.Options{Embedder: embed.NewLocal(), Redis: r.Client, Logger: logger,
		Reranker: o.reranker, RerankObserver: rerankMetrics, Config: knowledge.Config{RerankBudget: time.Minute},
		Testing: knowledge.TestingKnobs{SimilarBudget: time.Minute}})
	var ks kt.Service = svc
	if o.wrap != nil {
		ks = o.wrap(svc)
	}
	cfg, err := server.ConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.TokenCacheTTL = o.cacheTTL
	if o.maxBody > 0 {
		cfg.MaxBodyBytes = o.maxBody
	}
	if o.callTimeout > 0 {
		cfg.CallTimeout = o.callTimeout
	}
	if o.rate != nil {
		cfg.RateLimits = *o.rate
	}
	if o.config != nil {
		o.config(&cfg)
	}
	tokens, pgPing := tenancy.New(app), server.Pinger(app)
	if o.tokensURL != "" {
		// pgxpool connects lazily: building it does not touch the address.
		pool, err := pgxpool.New(context.Background(), o.tokensURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		tokens, pgPing = tenancy.New(pool), pool
	}
	srv := server.New(cfg, server.Deps{
		Knowledge:     ks,
		Tokens:        tokens,
		Ready:         map[string]server.Pinger{"postgres": pgPing, "redis": pinger{r.Client}},
		Logger:        logger,
		Redis:         cmp.Or(o.limiterRedis, r.Client),
		RateSettings:  tenancy.New(app),
		DBSlots:       o.dbSlots,
		Audit:         auditSink(o.audit, app),
		RerankMetrics: rerankMetrics,
	})
	if _, err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &bundle{t: t, srv: srv, url: srv.URL(), tenancy: tenancy.New(d.Pool), svc: svc, db: d, app: app, redis: r.Client}
}

type pinger struct{ c *redis.Client }

func (p pinger) Ping(ctx context.Context) error { return p.c.Ping(ctx).Err() }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// agent is an org's agent with a token.
type agent struct {
	org, id uuid.UUID
	tokenID uuid.UUID
	token   string
}

var allScopes = tenancy.Catalogue

func (b *bundle) org(name string) uuid.UUID {
	b.t.Helper()
	return testfactory.Org(context.Background(), b.t, b.db.Pool, &testfactory.OrgOpts{Name: name}).ID
}

func (b *bundle) agent(org uuid.UUID, name string, scopes []string, ttl time.Duration) agent {
	b.t.Helper()
	a := testfactory.Agent(context.Background(), b.t, b.db.Pool, &testfactory.AgentOpts{OrgID: org, Name: name})
	return b.token(agent{org: org, id: a.ID}, scopes, ttl)
}

// token issues another token for a (ttl 0: no expiry).
func (b *bundle) token(a agent, scopes []string, ttl time.Duration) agent {
	b.t.Helper()
	var expires *time.Time
	if ttl > 0 {
		e := time.Now().Add(ttl)
		expires = &e
	}
	tok := testfactory.Token(context.Background(), b.t, b.db.Pool, &testfactory.TokenOpts{OrgID: a.org, AgentID: a.id, Scopes: scopes, ExpiresAt: expires})
	a.tokenID, a.token = tok.ID, tok.Text
	return a
}

func (b *bundle) task(org uuid.UUID) uuid.UUID {
	b.t.Helper()
	return testfactory.Task(context.Background(), b.t, b.db.Pool, &testfactory.TaskOpts{OrgID: org, Title: "a task"}).ID
}

// bearer adds the Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (h bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	return h.base.RoundTrip(r)
}

// connect opens an MCP client session over real HTTP with token.
func (b *bundle) connect(token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-test", Version: "v0"}, nil)
	// Tests validate every answer against its tool's output schema; a
	// benchmark does not, so its latencies are the server's, not the
	// client's validation.
	var base http.RoundTripper = http.DefaultTransport
	if _, bench := b.t.(*testing.B); !bench {
		base = schemaChecking{t: b.t, base: base}
	}
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             b.url + server.PathMCP,
		HTTPClient:           &http.Client{Transport: bearer{token: token, base: base}, Timeout: 30 * time.Second},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
}

func (b *bundle) session(a agent) *mcp.ClientSession {
	b.t.Helper()
	cs, err := b.connect(a.token)
	if err != nil {
		b.t.Fatalf("connect: %v", err)
	}
	b.t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns the result; a protocol error fails the test.
func call(t testing.TB, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// ok decodes a successful result's structured content into out, checking
// the text copy says the same.
func ok[T any](t testing.TB, res *mcp.CallToolResult) T {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected tool error: %s", text(res))
	}
	var out T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	var fromText T
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("text copy is not the JSON result: %v", err)
	}
	return out
}

// toolErr checks res is a tool error and returns its body.
func toolErr(t testing.TB, res *mcp.CallToolResult) kt.ErrorBody {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %s", text(res))
	}
	var p kt.ErrorPayload
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &p); err != nil || p.Error.Code == "" {
		t.Fatalf("tool error without a structured body: %s (%v)", b, err)
	}
	if !strings.HasPrefix(text(res), p.Error.Code+": ") {
		t.Fatalf("text %q does not start with the code %q", text(res), p.Error.Code)
	}
	return p.Error
}

func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func (b *bundle) store(cs *mcp.ClientSession, args map[string]any) knowledge.StoreResult {
	b.t.Helper()
	return ok[knowledge.StoreResult](b.t, call(b.t, cs, kt.ToolStore, args))
}
