package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// The worker's database loops besides the reconciler: the indexer
// moves queued entries into the lexical index (knowledge.Maintenance.IndexAll),
// the upkeep vacuums and analyzes the search tables when they need it
// (knowledge.Maintenance.Upkeep), and the uploads' expiry deletes uploads in
// parts past their expiry (knowledge.Maintenance.DeleteExpiredUploads),
// and the sweep of duplicate checks finishes those the handler could not.
// All are safe with several workers: indexers take queue rows with SKIP
// LOCKED and take turns per org, a second VACUUM of a table waits for the
// first, then finds little to do, an expired upload deleted twice is
// deleted once, and a duplicate check is recorded once (its claim skips a
// row another worker holds).

// every calls f at once and then every interval until ctx ends, and also
// at once when kick receives (a nil kick never does). Each call
// gets its own deadline (timeout) so a hung database delays the next call
// instead of stopping the loop, and a call in flight is cancelled when ctx
// ends so Shutdown never waits on it. Calls do not overlap: a call longer
// than interval is followed by the next one at once.
func every(ctx context.Context, interval, timeout time.Duration, kick <-chan struct{}, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		f(cctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}

// backingOff calls f at once and then again and again, as every does
// (a deadline per call, none overlapping), but waits longer while f finds
// nothing to do: the wait starts at base, doubles after each call that
// reports no work, up to idle, and is base again after a call that found
// work or as soon as wake receives (the next call then comes base after
// the last one began, or at once).
func backingOff(ctx context.Context, base, idle, timeout time.Duration, wake <-chan struct{}, f func(context.Context) bool) {
	wait := base
	t := time.NewTimer(0)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			if wait > base {
				wait = base
				t.Reset(max(0, time.Until(last.Add(base))))
			}
			continue
		case <-t.C:
		}
		last = time.Now()
		cctx, cancel := context.WithTimeout(ctx, timeout)
		found := f(cctx)
		cancel()
		if found {
			wait = base
		} else {
			wait = min(2*wait, idle)
		}
		t.Reset(max(0, time.Until(last.Add(wait))))
	}
}

// poke sends on c without waiting: a signal already pending is enough.
func poke(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// indexPass indexes every queued entry (one IndexAll) and reports it, and
// whether it indexed any (backingOff).
func (w *Worker) indexPass(ctx context.Context) bool {
	start := time.Now()
	n, err := w.maint.IndexAll(ctx)
	switch {
	case stopping(ctx):
		// Shutdown cancelled the pass: its open batch rolled back and stays
		// queued; it is not a failure of the indexer.
		err = nil
	case err != nil && n > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded):
		// A long queue (a bulk load, an org's index rebuilt in another
		// language) outlasted the deadline: every batch commits on its own,
		// so this is progress, and the next pass goes on at once.
		err = nil
	}
	w.opts.Observer.Indexed(n, time.Since(start), err)
	if n >= knowledge.UpkeepBaseRows {
		// A bulk load was just indexed: its postings are read through
		// index-only scans, which visit the heap until a vacuum sets the
		// visibility map, and the org may now deserve its own vector
		// index. Upkeep then, not at its next tick (up to a minute away).
		poke(w.upkeepSoon)
	}
	w.indexLog.report(ctx, w.opts.Logger, "indexer pass", err)
	if err == nil && n > 0 {
		w.opts.Logger.Debug("indexed queued entries", "count", n, "duration", time.Since(start))
	}
	return n > 0
}

// upkeepPass runs the maintenance that is due (one Upkeep) and reports it.
func (w *Worker) upkeepPass(ctx context.Context) {
	start := time.Now()
	rep, err := w.maint.Upkeep(ctx)
	if stopping(ctx) {
		err = nil
	}
	w.opts.Observer.Upkeep(rep, time.Since(start), err)
	w.upkeepLog.report(ctx, w.opts.Logger, "upkeep pass", err)
	if err == nil && (len(rep.Vacuumed) > 0 || len(rep.Analyzed) > 0 || len(rep.Built) > 0 || len(rep.Dropped) > 0 || rep.SimilarKeys > 0) {
		w.opts.Logger.Info("upkeep", "vacuumed", rep.Vacuumed, "analyzed", rep.Analyzed,
			"built", rep.Built, "dropped", rep.Dropped, "similar_keys", rep.SimilarKeys, "duration", time.Since(start))
	}
}

// uploadExpiryTimeout bounds an expiry pass, however short its interval,
// as similarSweepTimeout bounds a sweep: a pass cut at a short interval
// deletes nothing on a database slower than it (on a loaded loopback
// Citus cluster a new database's passes of 50 ms timed out 378-400 times
// in a row, about 20 s, its statement across shards not done in time).
const uploadExpiryTimeout = time.Minute

// uploadExpiryPass deletes the expired uploads in parts (one
// Maintenance.DeleteExpiredUploads) and reports it.
func (w *Worker) uploadExpiryPass(ctx context.Context) {
	n, err := w.maint.DeleteExpiredUploads(ctx)
	if stopping(ctx) {
		err = nil
	}
	w.expiryLog.report(ctx, w.opts.Logger, "upload expiry pass", err)
	if n > 0 {
		w.opts.Logger.Info("deleted expired uploads", "count", n)
	}
}

// stopping reports whether ctx ended because the worker is shutting down
// (its parent was cancelled), as opposed to the pass's own deadline.
func stopping(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled)
}

// failureLog keeps a loop that fails every 500 ms (database down) from
// flooding the log: the first failure is logged, then at most one line per
// failureLogEvery while failures go on, and one line when a pass succeeds
// again. Used by one goroutine only.
type failureLog struct {
	failing  int       // consecutive failures
	lastLine time.Time // of the last failure logged
}

const failureLogEvery = time.Minute

func (f *failureLog) report(ctx context.Context, log *slog.Logger, what string, err error) {
	if err == nil {
		if f.failing > 0 {
			log.Info(what+" recovered", "failed_passes", f.failing)
		}
		*f = failureLog{}
		return
	}
	f.failing++
	if f.failing > 1 && time.Since(f.lastLine) < failureLogEvery {
		return
	}
	f.lastLine = time.Now()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("timed out: %w", err)
	}
	args := []any{"error", err, "failed_passes", f.failing}
	// The domain's errors say what an agent may know ("the database is
	// unavailable"); the operator needs the driver's error behind it.
	var de *errs.Error
	if errors.As(err, &de) && de.Err != nil {
		args = append(args, "cause", de.Err)
	}
	log.Error(what+" failed", args...)
}

// similarSweepMax bounds the duplicate checks one sweep finishes.
const similarSweepMax = 500

// similarSweepTimeout bounds a sweep (each of its statements has its own
// budget), however short the reconciler's interval: a sweep cut at a short
// interval would begin again from the same checks every time and finish
// none on a database slower than the interval (a loaded Citus cluster
// reading every shard for its pending checks).
const similarSweepTimeout = time.Minute

// similarPass finishes the duplicate checks owed by stores for longer
// than the reconciler's grace whose entries are embedded (by this
// worker's model): those the handler could not finish after embedding
// (a failure, a worker stopped between the two writes, an entry made
// ready by its store's own vector).
func (w *Worker) similarPass(ctx context.Context) {
	c := w.handler.checks
	if c == nil {
		return
	}
	jobs, err := c.PendingSimilarChecks(ctx, time.Now().Add(-w.opts.Reconciler.Grace), similarSweepMax)
	if err == nil && len(jobs) == 0 {
		return
	}
	n := 0
	if err == nil {
		n, err = c.FinishSimilarChecks(ctx, jobs)
	}
	w.opts.Observer.SimilarChecked(n, err)
	if err != nil && !stopping(ctx) {
		w.opts.Logger.Warn("duplicate check sweep failed", "done", n, "error", err)
	}
}
