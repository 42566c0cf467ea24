package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
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
		IndexInterval:  e.Duration("WORKER_INDEX_INTERVAL", 0, 10*time.Millisecond, 0),
		UpkeepInterval: e.Duration("WORKER_UPKEEP_INTERVAL", 0, time.Second, 0),
		// Checked against the database in run (checkTextSearchConfig).
		TextSearchConfig:  knowledgeenv.TextSearchConfig(e),
		VectorIndexMemory: knowledgeenv.VectorIndexMemory(e),
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
	env := appenv.New(getenv)
	cfg := parseConfig(env)
	log := env.Logger("worker", "WORKER_", stdout)
	traceCfg := tracing.ReadConfig(env)
	if err := env.Err(); err != nil {
		return err
	}
	// Traces: off unless the OTEL_* variables ask for them; a batch's span
	// links to the calls that stored its entries (docs/operators.md).
	stopTracing, err := tracing.Setup(ctx, traceCfg, "knowledge-worker", "")
	if err != nil {
		return err
	}
	if traceCfg.Enabled() {
		log.Info("tracing on", "exporter", traceCfg.Exporter, "endpoint", traceCfg.Endpoint)
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
	emb, err := embed.New(cfg.embedder)
	if err != nil {
		return err
	}
	var next embed.Embedder
	if cfg.next != nil {
		if next, err = embed.New(*cfg.next); err != nil {
			return err
		}
	}
	if err := knowledgeenv.CheckModelSwitch(emb, next); err != nil {
		return err
	}
	// One Redis or a Redis Cluster (knowledge.ParseRedisURL).
	rcfg, err := knowledge.ParseRedisURL(cfg.redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	redisOpt := rcfg.Asynq()
	m := newMetrics()
	cfg.opts.Observer = m
	cfg.opts.Logger = log

	// /healthz and /metrics answer while the worker waits for its
	// dependencies below, so a supervisor sees a live process.
	ln, err := net.Listen("tcp", cfg.metricsAddr)
	if err != nil {
		return fmt.Errorf("WORKER_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()

	// A worker started during an outage waits for PostgreSQL and Redis,
	// logging every attempt, instead of exiting: a supervisor restarting
	// it in a loop would show nothing more, and it would come up late.
	pool, err := db.Connect(cfg.databaseURL, dbOpts...)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	defer pool.Close()
	if err := db.Await(ctx, "postgres", pool.Ping, log); err != nil {
		return nil // stopped while waiting
	}
	// An unmigrated or too old database: the command that fixes it, not
	// the first batch's raw SQL error.
	if err := db.CheckSchema(ctx, pool); err != nil {
		return err
	}
	if err := knowledgeenv.CheckTextSearchConfig(ctx, pool, cfg.opts.TextSearchConfig); err != nil {
		return err
	}
	others, err := knowledgeenv.CheckEmbeddingSpace(ctx, pool, emb, cfg.allowModelChange)
	if err != nil {
		return err
	}
	if len(others) > 0 {
		log.Warn("vectors of other models or widths are stored; search uses only the configured one's (re-embed with ctl reembed)",
			"model", emb.Model(), "dimensions", emb.Dimensions(), "other", fmt.Sprint(others))
	}
	rdb := asynq.NewClient(redisOpt)
	err = db.Await(ctx, "redis", func(context.Context) error { return rdb.Ping() }, log)
	rdb.Close()
	if err != nil {
		return nil // stopped while waiting
	}

	// A model switch: the next model's vectors are backfilled, by passes
	// that are asynq tasks of their own queue, and covered orgs cut over
	// (docs/embeddings.md, "Model switch").
	if next != nil {
		cfg.opts.Switch = &jobs.SwitchOptions{Next: next, Rate: cfg.modelSwitch.rate, Interval: cfg.modelSwitch.interval}
	}
	w := jobs.NewWorker(redisOpt, pool, emb, cfg.opts)
	o := w.Options() // the defaults applied
	if o.Switch != nil {
		log.Info("model switch: backfilling", "next_model", next.Model(), "next_dimensions", next.Dimensions(),
			"rate", o.Switch.Rate, "queue", jobs.SwitchQueue)
	}
	if err := w.Start(); err != nil {
		return err
	}
	// The HNSW index of the configured model and width, built at start
	// when missing (CONCURRENTLY: embedding and search go on meanwhile,
	// search with exact scans); Upkeep's passes make sure of it again.
	go func() {
		for _, e := range []embed.Embedder{emb, next} {
			if e == nil {
				continue
			}
			start := time.Now()
			built, err := knowledge.New(pool, knowledge.Options{Embedder: e, Logger: log, Config: knowledge.Config{VectorIndexMemory: cfg.opts.VectorIndexMemory}}).EnsureVectorIndex(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Error("vector index build failed; upkeep will try again", "model", e.Model(), "err", err)
			case built:
				log.Info("vector index built", "index", knowledge.SpaceOf(e).IndexName(), "model", e.Model(),
					"dimensions", e.Dimensions(), "seconds", time.Since(start).Seconds())
			}
		}
	}()
	bctx, stopBacklog := context.WithCancel(ctx)
	backlogDone := make(chan struct{})
	go func() {
		defer close(backlogDone)
		m.refreshBacklog(bctx, pool, cfg.backlogInterval, log)
	}()
	auditDone := make(chan struct{})
	go func() {
		defer close(auditDone)
		pruneAudit(bctx, tenancy.New(pool), cfg.audit, m, log)
	}()
	log.Info("worker started", "model", emb.Model(), "queue", jobs.Queue,
		"metrics", "http://"+ln.Addr().String()+"/metrics",
		"concurrency", o.Concurrency, "batch_size", o.BatchSize, "batch_grace", o.BatchGrace,
		"index_interval", o.IndexInterval, "upkeep_interval", o.UpkeepInterval,
		"text_search_config", o.TextSearchConfig,
		"chunk_chars", o.Chunk.Chars, "chunk_overlap", o.Chunk.Overlap)

	<-ctx.Done()
	log.Info("worker stopping")
	stopBacklog()
	<-backlogDone
	<-auditDone
	w.Shutdown()
	log.Info("worker stopped")
	return nil
}
