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
	// MaxInputChars: see HandlerOptions.
	MaxInputChars int
	Observer      Observer     // default NopObserver
	Logger        *slog.Logger // default slog.Default()
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
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Reconciler.Observer = o.Observer
	o.Reconciler.Logger = o.Logger
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

// Worker runs the embeddings pipeline: the asynq server (aggregator and
// handler on the embeddings queue) and the reconciler.
type Worker struct {
	redis    asynq.RedisConnOpt
	pool     *pgxpool.Pool
	emb      embed.Embedder
	opts     WorkerOptions
	handler  *EmbedHandler
	mu       sync.Mutex
	srv      *asynq.Server
	stopRec  context.CancelFunc
	recDone  chan struct{}
	closeFns []func() error
}

// NewWorker returns a worker; Start runs it.
func NewWorker(redis asynq.RedisConnOpt, pool *pgxpool.Pool, emb embed.Embedder, opts WorkerOptions) *Worker {
	opts = opts.withDefaults()
	return &Worker{
		redis: redis, pool: pool, emb: emb, opts: opts,
		handler: NewEmbedHandler(pool, emb, HandlerOptions{
			MaxInputChars: opts.MaxInputChars, Observer: opts.Observer, Logger: opts.Logger,
		}),
	}
}

// Start starts processing and reconciling, and returns at once.
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv != nil {
		return errors.New("worker already started")
	}
	o := w.opts
	batch := BatchOptions{MaxRetry: o.MaxRetry, Timeout: o.TaskTimeout, Retention: o.Retention}
	srv := asynq.NewServer(w.redis, asynq.Config{
		Concurrency:      o.Concurrency,
		Queues:           map[string]int{Queue: 1},
		GroupAggregator:  NewAggregator(batch),
		GroupMaxSize:     o.BatchSize,
		GroupGracePeriod: o.BatchGrace,
		GroupMaxDelay:    o.BatchMaxDelay,
		RetryDelayFunc:   func(n int, _ error, _ *asynq.Task) time.Duration { return o.RetryDelay(n) },
		ShutdownTimeout:  o.ShutdownTimeout,
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
			n, _ := asynq.GetRetryCount(ctx)
			max, _ := asynq.GetMaxRetry(ctx)
			o.Logger.Warn("embedding task failed", "type", t.Type(), "retry", n, "max_retry", max, "error", err)
		}),
		Logger:   asynqLogger{o.Logger},
		LogLevel: asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(TypeEmbedBatch, w.handler)
	mux.Handle(TypeEmbedEntry, w.handler)
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	client := asynq.NewClient(w.redis)
	insp := asynq.NewInspector(w.redis)
	rec := NewReconciler(w.pool, NewEnqueuer(client), insp, o.Reconciler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx, o.ReconcileInterval)
	}()
	w.srv, w.stopRec, w.recDone = srv, cancel, done
	w.closeFns = []func() error{client.Close, insp.Close}
	return nil
}

// Shutdown stops the reconciler, stops taking tasks, waits up to
// ShutdownTimeout for running batches and puts unfinished ones back on the
// queue. Nothing is lost: a batch cut short is handled again by the next
// worker, and its writes are conditional.
func (w *Worker) Shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv == nil {
		return
	}
	w.stopRec()
	<-w.recDone
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
