package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// WorkerOptions configure a Worker; zero values mean the defaults.
type WorkerOptions struct {
	// Concurrency is the number of batches handled at once. Default 4.
	Concurrency int
	// BatchSize is the most entries one batch (one provider call) holds:
	// asynq's GroupMaxSize. Default 32.
	BatchSize int
	// BatchGrace is asynq's GroupGracePeriod: a group is aggregated once no
	// entry joined it for this long. At least 1s (asynq's minimum). Default 1s.
	BatchGrace time.Duration
	// BatchMaxDelay bounds the wait of the first entry of a group under a
	// steady trickle (GroupMaxDelay). Default 5s.
	BatchMaxDelay time.Duration
	// MaxRetry of batch tasks; after it the entries are marked failed and
	// the task is archived. Default 8.
	MaxRetry int
	// RetryDelay is the wait before retry n (1-based). Default: exponential
	// from 10s, doubling, capped at 10m, with jitter.
	RetryDelay func(n int) time.Duration
	// PollInterval, when set, is how often the asynq server looks for
	// retries that came due (its DelayedTaskCheckInterval, default 5s) and,
	// with the queue empty, for new tasks (TaskCheckInterval, default 1s):
	// a retry runs at the first look after its RetryDelay, so retry delays
	// far below 5s need a PollInterval to match. Zero: asynq's defaults.
	PollInterval time.Duration
	// TaskTimeout bounds one batch. Default 2m.
	TaskTimeout time.Duration
	// Retention keeps completed batches visible in the dashboard. Default 1h.
	Retention time.Duration
	// ShutdownTimeout is how long a stopping worker lets batches finish
	// before putting them back on the queue. Default 20s.
	ShutdownTimeout time.Duration
	// ReconcileInterval is the time between reconciler passes. Default 30s.
	ReconcileInterval time.Duration
	// Reconciler settings (grace, cooldown, per-pass bound).
	Reconciler ReconcilerOptions
	// IndexInterval is the time between indexer passes (Maintenance.IndexAll):
	// how long a stored entry stays in the tail that search scores on the
	// fly before it joins the inverted index. Default 500ms.
	IndexInterval time.Duration
	// IndexIdleInterval is the longest wait between indexer passes while
	// they find nothing queued: the wait doubles from IndexInterval after
	// each empty pass up to it, and falls back to IndexInterval after a
	// pass that indexed or when this worker writes vectors (the stores of
	// those entries queued them). A pass reads the queue of every shard on
	// a cluster; an idle deployment polled it twice a second for ever.
	// Search never waits for the indexer (the queued tail is scored on the
	// fly), so an entry stored into an idle deployment is found at once
	// either way. Default 10 x IndexInterval (5s); set at or below
	// IndexInterval, the passes never back off.
	IndexIdleInterval time.Duration
	// IndexTimeout bounds one indexer pass, so a hung database delays the
	// next pass instead of stopping the loop for good. Batches commit one by
	// one, so a long queue is drained over several passes. Default 30s.
	IndexTimeout time.Duration
	// UpkeepInterval is the time between upkeep passes (Maintenance.Upkeep:
	// VACUUM/ANALYZE of the search tables once their change counters pass a
	// threshold; cheap when nothing is due). Default 1m.
	UpkeepInterval time.Duration
	// UpkeepTimeout bounds one upkeep pass (a VACUUM of a large table takes
	// minutes, building a large org's own HNSW index longer; what it did by
	// the deadline is kept, and a build cut short is dropped and made again
	// on a later pass, so the deadline must let one finish). Default 1h.
	UpkeepTimeout time.Duration
	// UploadExpiryInterval is the time between passes that delete expired
	// uploads in parts with their staged parts
	// (Maintenance.DeleteExpiredUploads). Default 1m.
	UploadExpiryInterval time.Duration
	// TextSearchConfig is the PostgreSQL text search configuration an org's
	// lexical index is built with when the indexer meets the org's first
	// entry (knowledge.Options.TextSearchConfig). It must be the MCP
	// server's, which analyses queries of orgs not indexed yet with it.
	// Default: knowledge.Config's.
	TextSearchConfig string
	// VectorIndexMemory is the most memory an HNSW index build of Upkeep
	// may take (knowledge.MaintenanceConfig.VectorIndexMemory). Default:
	// knowledge.Config's.
	VectorIndexMemory int64
	// VectorCalibration: see HandlerOptions (the MCP server's
	// SEARCH_COSINE_FLOOR and SEARCH_COSINE_FULL).
	VectorCalibration *knowledge.VectorCalibration
	// MaxInputChars: see HandlerOptions.
	MaxInputChars int
	// Chunk: see HandlerOptions (zero: the model's default).
	Chunk knowledge.ChunkOptions
	// Switch, when set, backfills a model switch's next model (switch.go).
	Switch   *SwitchOptions
	Observer Observer     // default NopObserver
	Logger   *slog.Logger // default slog.Default()
}

func (o WorkerOptions) withDefaults() WorkerOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 32
	}
	if o.BatchGrace < time.Second {
		o.BatchGrace = time.Second
	}
	if o.BatchMaxDelay <= 0 {
		o.BatchMaxDelay = 5 * time.Second
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 8
	}
	if o.RetryDelay == nil {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.TaskTimeout <= 0 {
		o.TaskTimeout = 2 * time.Minute
	}
	if o.Retention <= 0 {
		o.Retention = time.Hour
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 20 * time.Second
	}
	if o.ReconcileInterval <= 0 {
		o.ReconcileInterval = 30 * time.Second
	}
	if o.IndexInterval <= 0 {
		o.IndexInterval = 500 * time.Millisecond
	}
	switch {
	case o.IndexIdleInterval <= 0:
		o.IndexIdleInterval = 10 * o.IndexInterval
	case o.IndexIdleInterval < o.IndexInterval:
		o.IndexIdleInterval = o.IndexInterval // asked for no back-off
	}
	if o.IndexTimeout <= 0 {
		o.IndexTimeout = 30 * time.Second
	}
	if o.UpkeepInterval <= 0 {
		o.UpkeepInterval = time.Minute
	}
	if o.UpkeepTimeout <= 0 {
		o.UpkeepTimeout = time.Hour
	}
	if o.UploadExpiryInterval <= 0 {
		o.UploadExpiryInterval = time.Minute
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Reconciler.Grace <= 0 {
		o.Reconciler.Grace = DefaultReconcileGrace
	}
	o.Reconciler.Observer = o.Observer
	o.Reconciler.Logger = o.Logger
	if o.Switch != nil {
		sw := o.Switch.withDefaults()
		sw.Batch = o.BatchSize
		o.Switch = &sw
	}
	return o
}

// DefaultRetryDelay waits 10s, 20s, 40s, ... up to 10m, +/-25% jitter: the
// default 8 retries ride out a provider outage of about half an hour before
// entries are marked failed (and can be re-embedded).
func DefaultRetryDelay(n int) time.Duration {
	d := 10 * time.Second << min(max(n-1, 0), 6)
	d = min(d, 10*time.Minute)
	return d*3/4 + rand.N(d/2+1)
}

// Worker runs the background work of the module: the embeddings pipeline
// (the asynq server, with aggregator and handler on the embeddings queue,
// and the reconciler), the lexical indexer and the table upkeep.
type Worker struct {
	redis     asynq.RedisConnOpt
	pool      *pgxpool.Pool
	emb       embed.Embedder
	opts      WorkerOptions
	handler   *EmbedHandler
	maint     *knowledge.Maintenance // indexer and upkeep
	indexLog  failureLog
	upkeepLog failureLog
	expiryLog failureLog
	// upkeepSoon asks the upkeep loop for a pass now (after a bulk index).
	upkeepSoon chan struct{}
	// indexSoon ends the indexer's idle back-off (vectors were written).
	indexSoon chan struct{}
	mu        sync.Mutex
	srv       *asynq.Server
	stop      context.CancelFunc // ends the loops (reconciler, indexer, upkeep)
	loops     sync.WaitGroup
	closeFns  []func() error
}

// NewWorker returns a worker; Start runs it.
func NewWorker(redis asynq.RedisConnOpt, pool *pgxpool.Pool, emb embed.Embedder, opts WorkerOptions) *Worker {
	opts = opts.withDefaults()
	indexSoon := make(chan struct{}, 1)
	return &Worker{
		redis: redis, pool: pool, emb: emb, opts: opts, upkeepSoon: make(chan struct{}, 1), indexSoon: indexSoon,
		handler: NewEmbedHandler(pool, emb, HandlerOptions{
			MaxInputChars: opts.MaxInputChars, Chunk: opts.Chunk, Observer: opts.Observer, Logger: opts.Logger,
			TextSearchConfig: opts.TextSearchConfig, VectorCalibration: opts.VectorCalibration,
			Written: func() { poke(indexSoon) },
		}),
		maint: knowledge.NewMaintenance(knowledge.New(pool, knowledge.Options{
			Embedder: emb,
			Logger:   opts.Logger,
			Config:   knowledge.Config{TextSearchConfig: opts.TextSearchConfig},
		}), knowledge.MaintenanceConfig{VectorIndexMemory: opts.VectorIndexMemory}),
	}
}

// Options are the worker's options, the defaults applied.
func (w *Worker) Options() WorkerOptions { return w.opts }

// Start starts processing, reconciling, indexing and upkeep, and returns
// at once.
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv != nil {
		return errors.New("worker already started")
	}
	o := w.opts
	batch := BatchOptions{MaxRetry: o.MaxRetry, Timeout: o.TaskTimeout, Retention: o.Retention}
	queues := map[string]int{Queue: 1}
	if o.Switch != nil {
		queues[SwitchQueue] = 1
	}
	srv := asynq.NewServer(w.redis, asynq.Config{
		Concurrency:      o.Concurrency,
		Queues:           queues,
		GroupAggregator:  NewAggregator(batch),
		GroupMaxSize:     o.BatchSize,
		GroupGracePeriod: o.BatchGrace,
		GroupMaxDelay:    o.BatchMaxDelay,
		RetryDelayFunc:   func(n int, _ error, _ *asynq.Task) time.Duration { return o.RetryDelay(n) },
		ShutdownTimeout:  o.ShutdownTimeout,
		// Zero leaves asynq's defaults.
		DelayedTaskCheckInterval: o.PollInterval,
		TaskCheckInterval:        o.PollInterval,
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
			n, _ := asynq.GetRetryCount(ctx)
			max, _ := asynq.GetMaxRetry(ctx)
			o.Logger.Warn("embedding task failed", "type", t.Type(), "retry", n, "max_retry", max, "error", err)
		}),
		Logger:   asynqLogger{o.Logger},
		LogLevel: asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.Use(traced) // a span per task, in the enqueuing calls' traces (trace.go)
	mux.Handle(TypeEmbedBatch, w.handler)
	mux.Handle(TypeEmbedEntry, w.handler)
	if o.Switch != nil {
		svc := knowledge.New(w.pool, knowledge.Options{Embedder: w.emb, Logger: o.Logger})
		mux.Handle(TypeSwitchBackfill, &switchHandler{
			svc: svc, maint: knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{}),
			opts: *o.Switch, obs: o.Observer, log: o.Logger,
		})
	}
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	client := asynq.NewClient(w.redis)
	insp := asynq.NewInspector(w.redis)
	rec := NewReconciler(w.pool, NewEnqueuer(client), insp, o.Reconciler)
	ctx, cancel := context.WithCancel(context.Background())
	w.loops.Add(5)
	go func() {
		defer w.loops.Done()
		rec.Run(ctx, o.ReconcileInterval)
	}()
	go func() {
		defer w.loops.Done()
		backingOff(ctx, o.IndexInterval, o.IndexIdleInterval, o.IndexTimeout, w.indexSoon, w.indexPass)
	}()
	go func() {
		defer w.loops.Done()
		every(ctx, o.UpkeepInterval, o.UpkeepTimeout, w.upkeepSoon, w.upkeepPass)
	}()
	go func() {
		defer w.loops.Done()
		every(ctx, o.UploadExpiryInterval, max(o.UploadExpiryInterval, uploadExpiryTimeout), nil, w.uploadExpiryPass)
	}()
	go func() {
		defer w.loops.Done()
		every(ctx, o.ReconcileInterval, max(o.ReconcileInterval, similarSweepTimeout), nil, w.similarPass)
	}()
	if o.Switch != nil {
		w.loops.Add(1)
		go func() {
			defer w.loops.Done()
			offerPasses(ctx, client, *o.Switch, o.Logger)
		}()
	}
	w.srv, w.stop = srv, cancel
	w.closeFns = []func() error{client.Close, insp.Close}
	return nil
}

// Shutdown stops the reconciler, the indexer, the upkeep, the uploads' expiry (a pass in
// flight is cancelled: an index batch rolls back and stays queued, a VACUUM
// keeps what it did), stops taking tasks, waits up to ShutdownTimeout for
// running batches and puts unfinished ones back on the queue. Nothing is
// lost: a batch cut short is handled again by the next worker, and its
// writes are conditional.
func (w *Worker) Shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv == nil {
		return
	}
	w.stop()
	w.loops.Wait()
	w.srv.Shutdown()
	for _, f := range w.closeFns {
		f()
	}
	w.srv = nil
}

// Run starts the worker and shuts it down when ctx is done.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Shutdown()
	return nil
}

// asynqLogger sends asynq's logs to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...), "component", "asynq") }
