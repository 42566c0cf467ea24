package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
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
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout for the token in KNOWLEDGE_TOKEN instead of HTTP")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mcp [--stdio]\n\nServes the knowledge tools over Streamable HTTP at $MCP_ADDR/mcp (default %s),\nor over stdio with --stdio. Configuration is read from the environment; see docs/mcp.md.\n\n", server.DefaultAddr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcp: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	env := appenv.New(getenv)
	cfg := server.ReadConfig(env)
	// Logs go to stderr in both modes (stdout is the protocol in stdio mode).
	logger := env.Logger("mcp", "MCP_", stderr)
	allowModelChange := knowledgeenv.AllowModelChange(env)
	minHeap := env.GCMinHeap(appenv.DefaultGCMinHeapMiB)
	traceCfg := tracing.ReadConfig(env)
	embedCfg, nextCfg := knowledgeenv.Embedder(env), knowledgeenv.Next(env)
	// The worker's cut (a store whose text is one chunk writes the vector
	// of its duplicate check as the entry's).
	chunk := knowledgeenv.Chunk(env, embedCfg)
	if err := env.Err(); err != nil {
		return err
	}
	// Traces: off unless the OTEL_* variables ask for them (docs/operators.md).
	stopTracing, err := tracing.Setup(ctx, traceCfg, "knowledge-mcp", server.Version)
	if err != nil {
		return err
	}
	if traceCfg.Enabled() {
		logger.Info("tracing on", "exporter", traceCfg.Exporter, "endpoint", traceCfg.Endpoint)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracing.ShutdownTimeout)
		defer cancel()
		stopTracing(sctx)
	}()
	var dbOpts []db.Option
	if traceCfg.Enabled() {
		dbOpts = append(dbOpts, db.Tracer(tracing.PgxTracer()))
	}
	// The collector paced for a small live heap: about a millisecond off
	// a call on two cores (appenv.PaceGC).
	appenv.PaceGC(ctx, minHeap)
	embedder, err := embed.New(embedCfg)
	if err != nil {
		return fmt.Errorf("embedder: %w", err)
	}
	if embedder.Model() == embed.LocalModel {
		// Said plainly at start: the default finds shared words, not meanings.
		logger.Info("search embedder: local (lexical: a hashing embedder matches shared words, not paraphrases; for meaning set EMBEDDINGS_PRESET and EMBEDDINGS_MODEL, docs/embeddings.md)",
			"model", embedder.Model(), "dimensions", embedder.Dimensions())
	} else {
		logger.Info("search embedder", "model", embedder.Model(), "dimensions", embedder.Dimensions())
	}
	// A model switch: orgs cut over are searched with the next model.
	var nextEmbedder embed.Embedder
	if nextCfg != nil {
		if nextEmbedder, err = embed.New(*nextCfg); err != nil {
			return fmt.Errorf("next embedder: %w", err)
		}
	}
	if err := knowledgeenv.CheckModelSwitch(embedder, nextEmbedder); err != nil {
		return err
	}

	// The process starts whatever its dependencies do: a supervisor may
	// restart it during an outage, and it must then serve what it can,
	// report not-ready on /readyz and recover by itself when they return,
	// like a process that was running when they went down.
	// Connections are warmed for search when they are made (the search
	// statement planned, the dictionary loaded) and four are kept open, so
	// a search rarely meets a cold one (knowledge.Service.WarmConn). The
	// service needs the pool, so the hook finds it once it exists.
	var warm atomic.Pointer[knowledge.Service]
	pool, err := db.Connect(cfg.DatabaseURL, append(dbOpts, db.MinConns(4), db.AfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		if s := warm.Load(); s != nil {
			return s.WarmConn(ctx, c)
		}
		return nil
	}))...)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	defer pool.Close()
	// fatal carries a configuration error found once PostgreSQL answers.
	fatal := make(chan error, 1)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = pool.Ping(pctx)
	cancel()
	// Configuration errors found in the database (a text search
	// configuration that does not exist, an embedder none of the stored
	// vectors is of: knowledge.CheckEmbeddingSpace).
	checkDB := func() error {
		// An unmigrated or too old database: the command that fixes it,
		// not the first call's raw SQL error.
		if err := db.CheckSchema(ctx, pool); err != nil {
			return err
		}
		if err := knowledgeenv.CheckTextSearchConfig(ctx, pool, cfg.TextSearchConfig); err != nil {
			return err
		}
		others, err := knowledgeenv.CheckEmbeddingSpace(ctx, pool, embedder, allowModelChange)
		if len(others) > 0 && err == nil {
			logger.Warn("vectors of other models or widths are stored; search uses only the configured one's (re-embed with ctl reembed)",
				"model", embedder.Model(), "dimensions", embedder.Dimensions(), "other", fmt.Sprint(others))
		}
		return err
	}
	if err == nil {
		if err := checkDB(); err != nil {
			return err
		}
	} else {
		logger.Warn("postgres unreachable at start: serving not-ready until it answers", "err", err)
		go func() {
			if db.Await(ctx, "postgres", pool.Ping, logger) != nil {
				return
			}
			// The check could not run at start; a wrong setting is still
			// a configuration error, so it stops the process.
			if err := checkDB(); err != nil && ctx.Err() == nil {
				fatal <- err
			}
		}()
	}
	// One Redis or a Redis Cluster (redis+cluster://host:port,...;
	// knowledge.ParseRedisURL).
	rcfg, err := knowledge.ParseRedisURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	// Short timeouts: Redis is an accelerator (idempotence keys) and the
	// queue's front door; a hung Redis must cost a call a second, not the
	// call's whole deadline (the store then goes on against PostgreSQL).
	rdb := rcfg.WithTimeouts(time.Second, time.Second, time.Second, 2*time.Second).Client()
	defer rdb.Close()
	if traceCfg.Enabled() {
		if err := tracing.InstrumentRedis(rdb); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := rdb.Ping(rctx).Err(); err != nil {
		logger.Warn("redis unreachable at start: serving not-ready until it answers (stores go on without idempotence keys)", "err", err)
	}
	cancel()
	queue := asynq.NewClientFromRedisClient(rdb)
	defer queue.Close()

	svc := knowledge.New(pool, knowledge.Options{
		Embedder:     embedder,
		NextEmbedder: nextEmbedder,
		Enqueuer:     jobs.NewEnqueuer(queue),
		Redis:        rdb,
		Logger:       logger,
		Config: knowledge.Config{
			TextSearchConfig:  cfg.TextSearchConfig, // the default for orgs not indexed yet; see server.Config
			VectorCalibration: cfg.VectorCalibration,
			QueryEmbedBudget:  cfg.QueryEmbedBudget,
			Chunk:             chunk,
		},
	})
	warm.Store(svc)
	for _, c := range pool.AcquireAllIdle(ctx) { // made before the service existed
		_ = svc.WarmConn(ctx, c.Conn())
		c.Release()
	}
	ten := tenancy.New(pool)
	srv := server.New(cfg, server.Deps{
		Knowledge:    svc,
		Tokens:       ten,
		Redis:        rdb,
		RateSettings: ten,
		DBSlots:      int(pool.Config().MaxConns),
		Audit:        ten, // the audit trail (docs/operators.md)
		Ready:        map[string]server.Pinger{"postgres": pool, "redis": redisPinger{rdb}},
		Logger:       logger,
	})

	if *stdio {
		logger.Info("mcp server on stdio")
		return srv.ServeStdio(ctx, getenv("KNOWLEDGE_TOKEN"), &mcp.IOTransport{
			Reader: io.NopCloser(stdin),
			Writer: nopWriteCloser{stdout},
		})
	}

	if _, err := srv.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mcp: serving %s%s\n", srv.URL(), server.PathMCP)
	select {
	case <-srv.Done():
		return srv.Err()
	case err := <-fatal:
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		srv.Shutdown(sctx)
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: draining in-flight calls", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

type redisPinger struct{ c redis.UniversalClient }

func (p redisPinger) Ping(ctx context.Context) error { return p.c.Ping(ctx).Err() }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
