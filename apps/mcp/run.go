package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/hibiken/asynq"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
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
	cfg, err := server.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	// Logs go to stderr in both modes (stdout is the protocol in stdio mode).
	hopts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(stderr, hopts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(stderr, hopts)
	}
	logger := slog.New(h).With("app", "mcp")

	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("postgres (DATABASE_URL): %w", err)
	}
	defer pool.Close()
	if err := knowledge.CheckTextSearchConfig(ctx, pool, cfg.TextSearchConfig); err != nil {
		return err
	}
	ropts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis (REDIS_URL): %w", err)
	}
	embedder, err := embed.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("embedder: %w", err)
	}
	queue := asynq.NewClientFromRedisClient(rdb)
	defer queue.Close()

	svc := knowledge.New(pool, knowledge.Options{
		Embedder: embedder,
		Enqueuer: jobs.NewEnqueuer(queue),
		Redis:    rdb,
		Logger:   logger,
		// The default for orgs not indexed yet; see server.Config.
		TextSearchConfig:  cfg.TextSearchConfig,
		VectorCalibration: cfg.VectorCalibration,
	})
	srv := server.New(cfg, server.Deps{
		Knowledge: svc,
		Tokens:    tenancy.New(pool),
		Ready:     map[string]server.Pinger{"postgres": pool, "redis": redisPinger{rdb}},
		Logger:    logger,
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

type redisPinger struct{ c *redis.Client }

func (p redisPinger) Ping(ctx context.Context) error { return p.c.Ping(ctx).Err() }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
