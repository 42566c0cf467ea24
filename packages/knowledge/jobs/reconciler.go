package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// ReconcilerOptions tune the reconciler; zero values mean the defaults.
type ReconcilerOptions struct {
	// Grace is how long an entry may stay pending before it is presumed
	// lost and enqueued again (and a duplicate check owed by a store before
	// the worker's sweep finishes it: Worker.similarPass). Keep it well
	// above the normal store-to-ready time. Default DefaultReconcileGrace.
	Grace time.Duration
	// Cooldown is the least time between two re-enqueues of one entry
	// generation, so a provider outage (batches retrying with backoff) does
	// not pile up a new batch per pass. Default 15m.
	Cooldown time.Duration
	// MaxPerPass bounds the entries one pass enqueues. Default 5000.
	MaxPerPass int
	Observer   Observer     // default NopObserver
	Logger     *slog.Logger // default slog.Default()
}

// DefaultReconcileGrace is ReconcilerOptions.Grace's default.
const DefaultReconcileGrace = 2 * time.Minute

// Reconciler re-enqueues entries whose pending status outlived the grace
// period: the enqueue after the store's commit failed or never ran (crash),
// or Redis lost the task (flush, failover without persistence).
type Reconciler struct {
	outbox *knowledge.Outbox
	enq    *Enqueuer
	insp   *asynq.Inspector
	opts   ReconcilerOptions
}

// NewReconciler returns a reconciler enqueuing through enq; insp resolves
// TaskID conflicts with finished tasks (see Enqueuer.requeue).
func NewReconciler(pool *pgxpool.Pool, enq *Enqueuer, insp *asynq.Inspector, opts ReconcilerOptions) *Reconciler {
	if opts.Grace <= 0 {
		opts.Grace = DefaultReconcileGrace
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = 15 * time.Minute
	}
	if opts.MaxPerPass <= 0 {
		opts.MaxPerPass = 5000
	}
	if opts.Observer == nil {
		opts.Observer = NopObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Reconciler{outbox: knowledge.NewOutbox(pool), enq: enq, insp: insp, opts: opts}
}

// RunOnce makes one pass and returns how many entries it enqueued.
func (r *Reconciler) RunOnce(ctx context.Context) (int, error) {
	stale, err := r.outbox.Stale(ctx, time.Now().Add(-r.opts.Grace), r.opts.MaxPerPass)
	if err != nil {
		return 0, fmt.Errorf("list stale pending entries: %w", err)
	}
	n := 0
	for _, job := range stale {
		res, err := r.enq.requeue(ctx, r.insp, job, r.opts.Cooldown)
		if err != nil {
			r.opts.Observer.Requeued(n)
			return n, fmt.Errorf("re-enqueue %s: %w", job.EntryID, err)
		}
		if res == requeued {
			n++
		}
	}
	r.opts.Observer.Requeued(n)
	if n > 0 {
		r.opts.Logger.Info("reconciler re-enqueued pending entries", "count", n, "stale", len(stale))
	}
	return n, nil
}

// Run makes a pass every interval until ctx is done.
func (r *Reconciler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Error("reconciler pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
