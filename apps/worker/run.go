package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/appenv/knowledgeenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/tracing"
)

// DefaultMetricsAddr is loopback: metrics are for a local scraper or a
// sidecar, not the internet.
const DefaultMetricsAddr = "127.0.0.1:9091"

// config is the worker's environment, parsed.
type config struct {
	databaseURL, redisURL, metricsAddr string
	allowModelChange                   bool
	modelSwitch                        switchConfig
	backlogInterval                    time.Duration
	opts                               jobs.WorkerOptions
	audit                              auditConfig
	embedder                           embed.Config
	next                               *embed.Config // a model switch's next model
	trace                              tracing.Config
	log                                *slog.Logger
}

// readConfig reads the worker's environment at once: every bad variable
// is named in one error (appenv).
func readConfig(getenv func(string) string, stdout io.Writer) (config, error) {
	e := appenv.New(getenv)
	c := parseConfig(e)
	c.log = e.Logger("worker", "WORKER_", stdout)
	c.trace = tracing.ReadConfig(e)
	return c, e.Err()
}

func parseConfig(e *appenv.Env) config {
	c := config{
		databaseURL: e.String("DATABASE_URL", db.DefaultOwnerURL), // its upkeep needs the owner (db/roles.go)
		redisURL:    e.String("REDIS_URL", db.DefaultRedisURL),
		metricsAddr: e.String("WORKER_METRICS_ADDR", DefaultMetricsAddr),
	}
	// Unset, a setting reads as 0: jobs' default (WorkerOptions,
	// ReconcilerOptions, SwitchOptions), the one place each is written.
	c.opts = jobs.WorkerOptions{
		Concurrency:       e.Int("WORKER_CONCURRENCY", 0, 1, 256),
		BatchSize:         e.Int("WORKER_BATCH_SIZE", 0, 1, 2048),
		BatchGrace:        e.Duration("WORKER_BATCH_GRACE", 0, time.Second, 0),
		BatchMaxDelay:     e.Duration("WORKER_BATCH_MAX_DELAY", 0, time.Second, 0),
		MaxRetry:          e.Int("WORKER_MAX_RETRY", 0, 1, 100),
		ShutdownTimeout:   e.Duration("WORKER_SHUTDOWN_TIMEOUT", 0, time.Millisecond, 0),
		ReconcileInterval: e.Duration("WORKER_RECONCILE_INTERVAL", 0, 100*time.Millisecond, 0),
		Reconciler: jobs.ReconcilerOptions{
			Grace:    e.Duration("WORKER_RECONCILE_GRACE", 0, 100*time.Millisecond, 0),
			Cooldown: e.Duration("WORKER_RECONCILE_COOLDOWN", 0, time.Second, 0),
		},
		IndexInterval:     e.Duration("WORKER_INDEX_INTERVAL", 0, 10*time.Millisecond, 0),
		IndexIdleInterval: e.Duration("WORKER_INDEX_IDLE_INTERVAL", 0, 10*time.Millisecond, 0),
		UpkeepInterval:    e.Duration("WORKER_UPKEEP_INTERVAL", 0, time.Second, 0),
		// Checked against the database in run (checkTextSearchConfig).
		TextSearchConfig:  knowledgeenv.TextSearchConfig(e),
		VectorIndexMemory: knowledgeenv.VectorIndexMemory(e),
		// The duplicate checks the worker finishes after embedding score
		// as the MCP server's stores do.
		VectorCalibration: knowledgeenv.VectorCalibration(e),
	}
	c.allowModelChange = knowledgeenv.AllowModelChange(e)
	c.modelSwitch = switchConfig{
		rate:     float64(e.Int("EMBEDDINGS_BACKFILL_RATE", 0, 1, 100000)),
		interval: e.Duration("WORKER_BACKFILL_INTERVAL", 0, 100*time.Millisecond, 0),
	}
	c.backlogInterval = e.Duration("WORKER_BACKLOG_INTERVAL", 15*time.Second, 100*time.Millisecond, 0)
	c.audit = parseAuditConfig(e)
	c.embedder, c.next = knowledgeenv.Embedder(e), knowledgeenv.Next(e)
	c.opts.Chunk = knowledgeenv.Chunk(e, c.embedder)
	return c
}

// run wires the worker and blocks until ctx is done, then shuts down
// gracefully: the reconciler, the indexer and the upkeep stop, running batches get
// WORKER_SHUTDOWN_TIMEOUT to finish and are put back on the queue otherwise.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q: the worker is configured by the environment (docs/embeddings.md)", args)
	}
	cfg, err := readConfig(getenv, stdout)
	if err != nil {
		return err
	}
	log := cfg.log
	// Traces: off unless the OTEL_* variables ask for them; a batch's span
	// links to the calls that stored its entries (docs/operators.md).
	stopTracing, err := tracing.Start(ctx, cfg.trace, "knowledge-worker", "", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	emb, next, err := knowledgeenv.NewEmbedders(cfg.embedder, cfg.next)
	if err != nil {
		return err
	}
	// One Redis or a Redis Cluster (knowledge.ParseRedisURL).
	rcfg, err := knowledge.ParseRedisURL(cfg.redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	redisOpt := rcfg.Asynq()
	m := newMetrics()
	metricsURL, stopMetrics, err := serveMetrics(cfg.metricsAddr, m)
	if err != nil {
		return err
	}
	defer stopMetrics()

	// A worker started during an outage waits for PostgreSQL and Redis,
	// logging every attempt, instead of exiting: a supervisor restarting
	// it in a loop would show nothing more, and it would come up late.
	pool, later, err := openDatabase(ctx, cfg, emb)
	if err != nil || pool == nil {
		return err // nil: stopped while waiting
	}
	defer pool.Close()
	if err := awaitRedis(ctx, redisOpt, log); err != nil {
		return nil // stopped while waiting
	}

	w := newWorker(cfg, redisOpt, pool, emb, next, m)
	if err := w.Start(); err != nil {
		return err
	}
	go buildVectorIndexes(ctx, pool, cfg, emb, next)
	stopLoops := startLoops(ctx, pool, cfg, m)
	o := w.Options()
	log.Info("worker started", "model", emb.Model(), "queue", jobs.Queue, "metrics", metricsURL,
		"concurrency", o.Concurrency, "batch_size", o.BatchSize, "batch_grace", o.BatchGrace,
		"index_interval", o.IndexInterval, "index_idle_interval", o.IndexIdleInterval, "upkeep_interval", o.UpkeepInterval,
		"text_search_config", o.TextSearchConfig,
		"chunk_chars", o.Chunk.Chars, "chunk_overlap", o.Chunk.Overlap)

	select {
	case <-ctx.Done():
	case err = <-later: // a configuration error found after the start
	}
	log.Info("worker stopping")
	stopLoops()
	w.Shutdown()
	log.Info("worker stopped")
	return err
}

// serveMetrics serves /healthz and /metrics on addr from now on, so a
// supervisor sees a live process while the worker waits for its
// dependencies. It returns the metrics' URL and the server's stop.
func serveMetrics(addr string, m *metrics) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("WORKER_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String() + "/metrics", func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}, nil
}

// openDatabase makes the pool, waits for PostgreSQL and checks it against
// the configuration (knowledgeenv.CheckDatabase, whose refusal may come
// later). It is nil, without an error, when ctx ends while waiting.
func openDatabase(ctx context.Context, cfg config, emb embed.Embedder) (*pgxpool.Pool, <-chan error, error) {
	var opts []db.Option
	if cfg.trace.Enabled() {
		opts = append(opts, db.Tracer(tracing.PgxTracer()))
	}
	pool, err := db.Connect(cfg.databaseURL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if err := db.Await(ctx, "postgres", pool.Ping, cfg.log); err != nil {
		pool.Close()
		return nil, nil, nil
	}
	later, err := knowledgeenv.CheckDatabase(ctx, pool, cfg.opts.TextSearchConfig, emb, cfg.allowModelChange, cfg.log)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, later, nil
}

// awaitRedis waits for Redis; an error means ctx ended first.
func awaitRedis(ctx context.Context, opt asynq.RedisConnOpt, log *slog.Logger) error {
	rdb := asynq.NewClient(opt)
	defer rdb.Close()
	return db.Await(ctx, "redis", func(context.Context) error { return rdb.Ping() }, log)
}

// newWorker is the worker of cfg; with a next model, it backfills the
// next model's vectors, by passes that are asynq tasks of their own
// queue, and covered orgs cut over (docs/embeddings.md, "Model switch").
func newWorker(cfg config, redisOpt asynq.RedisConnOpt, pool *pgxpool.Pool, emb, next embed.Embedder, m *metrics) *jobs.Worker {
	opts := cfg.opts
	opts.Observer, opts.Logger = m, cfg.log
	if next != nil {
		opts.Switch = &jobs.SwitchOptions{Next: next, Rate: cfg.modelSwitch.rate, Interval: cfg.modelSwitch.interval}
	}
	w := jobs.NewWorker(redisOpt, pool, emb, opts)
	if o := w.Options(); o.Switch != nil { // the defaults applied
		cfg.log.Info("model switch: backfilling", "next_model", next.Model(), "next_dimensions", next.Dimensions(),
			"rate", o.Switch.Rate, "queue", jobs.SwitchQueue)
	}
	return w
}

// buildVectorIndexes builds the HNSW index of the configured model and
// width (and the next model's) when missing, CONCURRENTLY: embedding and
// search go on meanwhile, search with exact scans; Upkeep's passes make
// sure of it again.
func buildVectorIndexes(ctx context.Context, pool *pgxpool.Pool, cfg config, embedders ...embed.Embedder) {
	for _, e := range embedders {
		if e == nil {
			continue
		}
		start := time.Now()
		svc := knowledge.New(pool, knowledge.Options{Embedder: e, Logger: cfg.log})
		built, err := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{VectorIndexMemory: cfg.opts.VectorIndexMemory}).EnsureVectorIndex(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			cfg.log.Error("vector index build failed; upkeep will try again", "model", e.Model(), "err", err)
		case built:
			cfg.log.Info("vector index built", "index", knowledge.SpaceOf(e).IndexName(), "model", e.Model(),
				"dimensions", e.Dimensions(), "seconds", time.Since(start).Seconds())
		}
	}
}

// startLoops starts the app's own loops (the backlog gauges, the audit
// trail's pruning); the returned stop ends them and waits.
func startLoops(ctx context.Context, pool *pgxpool.Pool, cfg config, m *metrics) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { m.refreshBacklog(ctx, pool, cfg.backlogInterval, cfg.log) })
	wg.Go(func() { pruneAudit(ctx, tenancy.New(pool), cfg.audit, m, cfg.log) })
	return func() {
		cancel()
		wg.Wait()
	}
}
