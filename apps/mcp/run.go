package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/pgfeed"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/appenv/knowledgeenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/tracing"
)

var errUsage = errors.New("usage")

// run starts the server and blocks until ctx is cancelled (HTTP: then it
// drains in-flight calls) or stdin closes (stdio). In HTTP mode it prints
// one line "mcp: serving http://ADDR/mcp" to stdout once listening.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	stdio, err := parseArgs(args, stderr)
	if err != nil || stdio == nil {
		return err // nil: --help
	}
	s, err := readSettings(getenv, stderr)
	if err != nil {
		return err
	}
	// Traces: off unless the OTEL_* variables ask for them (docs/operators.md).
	stopTracing, err := tracing.Start(ctx, s.trace, "knowledge-mcp", server.Version, s.log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// The collector paced for a small live heap: about a millisecond off
	// a call on two cores (appenv.PaceGC).
	appenv.PaceGC(ctx, s.minHeap)
	emb, next, err := s.embedders()
	if err != nil {
		return err
	}

	// The process starts whatever its dependencies do: a supervisor may
	// restart it during an outage, and it must then serve what it can,
	// report not-ready on /readyz and recover by itself when they return,
	// like a process that was running when they went down.
	// The benchmark's stage clock (MCP_STAGES_FILE), nil when off.
	rec, err := openStages(s.cfg.StagesFile)
	if err != nil {
		return err
	}
	defer rec.Close()
	var warm atomic.Pointer[knowledge.Maintenance]
	pool, fatal, err := openDatabase(ctx, s, emb, &warm, rec != nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb, err := openRedis(ctx, s)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if rec != nil {
		rdb.AddHook(stages.RedisHook{})
	}
	queue := asynq.NewClientFromRedisClient(rdb)
	defer queue.Close()

	reranker, err := s.rerank.New()
	if err != nil {
		return err
	}
	if reranker != nil {
		s.log.Info("search reranker", "model", reranker.Model(), "url", s.rerank.Config.Endpoint(), "preset", s.rerank.Config.Preset)
	}
	rerankMetrics := server.NewRerankMetrics()
	svc := knowledge.New(pool, knowledge.Options{
		Embedder:       emb,
		NextEmbedder:   next,
		Reranker:       reranker,
		RerankObserver: rerankMetrics,
		Enqueuer:       jobs.NewEnqueuer(queue),
		Redis:          rdb,
		Logger:         s.log,
		Config:         s.knowledge,
	})
	maint := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{})
	warm.Store(maint)
	for _, c := range pool.AcquireAllIdle(ctx) { // made before the service existed
		_ = maint.WarmConn(ctx, c.Conn())
		c.Release()
	}
	// The audit trail's batches in a transaction per Citus worker
	// (tenancy.PartialWrite), not one across them through the coordinator.
	ten := tenancy.New(pool).WithRouter(svc.Router())
	srv := server.New(s.cfg, server.Deps{
		Knowledge:     svc,
		Tokens:        ten,
		Redis:         rdb,
		RateSettings:  ten,
		DBSlots:       int(pool.Config().MaxConns),
		Audit:         ten, // the audit trail (docs/operators.md)
		RerankMetrics: rerankMetrics,
		Ready:         map[string]server.Pinger{"postgres": pool, "redis": redisPinger{rdb}},
		Logger:        s.log,
		Stages:        rec,
		// Revocations and changed rate limits reach the caches at once
		// (docs/mcp.md).
		Feed: pgfeed.Connector(pool.Config().ConnConfig),
	})
	if *stdio {
		s.log.Info("mcp server on stdio")
		return srv.ServeStdio(ctx, s.token, &mcp.IOTransport{
			Reader: io.NopCloser(stages.Reader(stdin, rec)),
			Writer: nopWriteCloser{stages.Writer(stdout, rec)},
		})
	}
	return serveHTTP(ctx, srv, s, fatal, stdout)
}

// parseArgs reads the command line: whether to serve stdio, or nil after
// --help.
func parseArgs(args []string, stderr io.Writer) (*bool, error) {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout for the token in KNOWLEDGE_TOKEN instead of HTTP")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mcp [--stdio]\n\nServes the knowledge tools over Streamable HTTP at $MCP_ADDR/mcp (default %s),\nor over stdio with --stdio. Configuration is read from the environment; see docs/mcp.md.\n\n", server.DefaultAddr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcp: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return nil, errUsage
	}
	return stdio, nil
}

// settings is the process's environment, read at once: every bad
// variable is named in one error (appenv).
type settings struct {
	cfg              server.Config
	log              *slog.Logger
	trace            tracing.Config
	minHeap          int64
	embedder         embed.Config
	next             *embed.Config // a model switch's next model
	knowledge        knowledge.Config
	rerank           knowledgeenv.Rerank
	allowModelChange bool
	token            string // KNOWLEDGE_TOKEN: stdio's caller
}

func readSettings(getenv func(string) string, stderr io.Writer) (settings, error) {
	env := appenv.New(getenv)
	s := settings{
		cfg: server.ReadConfig(env),
		// Logs go to stderr in both modes (stdout is the protocol in stdio mode).
		log:              env.Logger("mcp", "MCP_", stderr),
		trace:            tracing.ReadConfig(env),
		minHeap:          env.GCMinHeap(appenv.DefaultGCMinHeapMiB),
		embedder:         knowledgeenv.Embedder(env),
		next:             knowledgeenv.Next(env),
		allowModelChange: knowledgeenv.AllowModelChange(env),
		rerank:           knowledgeenv.Reranker(env),
		token:            env.Raw("KNOWLEDGE_TOKEN"),
	}
	s.knowledge = knowledge.Config{
		TextSearchConfig:  s.cfg.TextSearchConfig, // the default for orgs not indexed yet; see server.Config
		VectorCalibration: s.cfg.VectorCalibration,
		QueryEmbedBudget:  s.cfg.QueryEmbedBudget,
		// The worker's cut (a store whose text is one chunk writes the
		// vector of its duplicate check as the entry's).
		Chunk: knowledgeenv.Chunk(env, s.embedder),
	}
	s.rerank.Apply(&s.knowledge)
	return s, env.Err()
}

// embedders are the search's (query vectors) and, during a model switch,
// the next model's (orgs cut over are searched with it).
func (s settings) embedders() (embed.Embedder, embed.Embedder, error) {
	emb, next, err := knowledgeenv.NewEmbedders(s.embedder, s.next)
	if err != nil {
		return nil, nil, err
	}
	if emb.Model() == embed.LocalModel {
		// Said plainly at start: the default finds shared words, not meanings.
		s.log.Info("search embedder: local (lexical: a hashing embedder matches shared words, not paraphrases; for meaning set EMBEDDINGS_PRESET and EMBEDDINGS_MODEL, docs/embeddings.md)",
			"model", emb.Model(), "dimensions", emb.Dimensions())
	} else {
		s.log.Info("search embedder", "model", emb.Model(), "dimensions", emb.Dimensions())
	}
	return emb, next, nil
}

// openDatabase makes the pool and checks the database against the
// configuration (knowledgeenv.CheckDatabase). PostgreSQL down at start
// is not an error: the check runs once it answers, and a configuration
// error found then arrives on fatal, to stop the process.
// Connections are warmed for search when they are made (the search
// statement planned, the dictionary loaded) and four are kept open, so
// a search rarely meets a cold one (knowledge.Maintenance.WarmConn). The
// service needs the pool, so the hook finds the service's maintenance in
// warm once it exists.
func openDatabase(ctx context.Context, s settings, emb embed.Embedder, warm *atomic.Pointer[knowledge.Maintenance], clocked bool) (*pgxpool.Pool, <-chan error, error) {
	opts := []db.Option{db.MinConns(4), db.AfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		if m := warm.Load(); m != nil {
			return m.WarmConn(ctx, c)
		}
		return nil
	})}
	var tracers []pgx.QueryTracer
	if s.trace.Enabled() {
		tracers = append(tracers, tracing.PgxTracer())
	}
	if clocked {
		tracers = append(tracers, stages.PgxTracer{})
	}
	switch len(tracers) {
	case 1:
		opts = append(opts, db.Tracer(tracers[0]))
	case 2:
		opts = append(opts, db.Tracer(multitracer.New(tracers...)))
	}
	pool, err := db.Connect(s.cfg.DatabaseURL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	fatal := make(chan error, 1)
	// check's refusal may come after it returns (a Citus worker down at
	// start: knowledgeenv.CheckDatabase); it arrives on fatal then.
	check := func() error {
		later, err := knowledgeenv.CheckDatabase(ctx, pool, s.cfg.TextSearchConfig, emb, s.allowModelChange, s.log)
		if later != nil {
			go func() {
				select {
				case err := <-later:
					fatal <- err
				case <-ctx.Done():
				}
			}()
		}
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = pool.Ping(pctx)
	cancel()
	if err == nil {
		if err := check(); err != nil {
			pool.Close()
			return nil, nil, err
		}
		return pool, fatal, nil
	}
	s.log.Warn("postgres unreachable at start: serving not-ready until it answers", "err", err)
	go func() {
		if db.Await(ctx, "postgres", pool.Ping, s.log) != nil {
			return
		}
		// The check could not run at start; a wrong setting is still a
		// configuration error, so it stops the process.
		if err := check(); err != nil && ctx.Err() == nil {
			fatal <- err
		}
	}()
	return pool, fatal, nil
}

// openRedis is the client of one Redis or a Redis Cluster
// (redis+cluster://host:port,...; knowledge.ParseRedisURL). Redis down at
// start is not an error: /readyz says so until it answers.
func openRedis(ctx context.Context, s settings) (redis.UniversalClient, error) {
	rcfg, err := knowledge.ParseRedisURL(s.cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	// Short timeouts: Redis is an accelerator (idempotence keys) and the
	// queue's front door; a hung Redis must cost a call a second, not the
	// call's whole deadline (the store then goes on against PostgreSQL).
	rdb := rcfg.WithTimeouts(time.Second, time.Second, time.Second, 2*time.Second).Client()
	if s.trace.Enabled() {
		if err := tracing.InstrumentRedis(rdb); err != nil {
			rdb.Close()
			return nil, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(rctx).Err(); err != nil {
		s.log.Warn("redis unreachable at start: serving not-ready until it answers (stores go on without idempotence keys)", "err", err)
	}
	return rdb, nil
}

// serveHTTP serves until ctx is done, then drains in-flight calls, or
// until a configuration error found late arrives on fatal.
func serveHTTP(ctx context.Context, srv *server.Server, s settings, fatal <-chan error, stdout io.Writer) error {
	if _, err := srv.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mcp: serving %s%s\n", srv.URL(), server.PathMCP)
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
		defer cancel()
		return srv.Shutdown(sctx)
	}
	select {
	case <-srv.Done():
		return srv.Err()
	case err := <-fatal:
		shutdown()
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: draining in-flight calls", "timeout", s.cfg.ShutdownTimeout.String())
	if err := shutdown(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

// openStages opens the stage clock's file (MCP_STAGES_FILE), or returns
// nil when there is none.
func openStages(path string) (*stages.Recorder, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("MCP_STAGES_FILE: %w", err)
	}
	return stages.NewRecorder(f), nil
}

type redisPinger struct{ c redis.UniversalClient }

func (p redisPinger) Ping(ctx context.Context) error { return p.c.Ping(ctx).Err() }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
