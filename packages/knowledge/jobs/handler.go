package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// HandlerOptions are the optional settings of an EmbedHandler.
type HandlerOptions struct {
	// MaxInputChars cuts each text sent (a chunk: title, blank line, part
	// of the body) to this many characters, the net under Chunk. Default
	// knowledge.DefaultMaxInputChars.
	MaxInputChars int
	// Chunk says how long bodies are cut into chunks, each embedded
	// (knowledge.Chunks). Default knowledge.ChunkOptionsFor(the model).
	Chunk knowledge.ChunkOptions
	// TextSearchConfig and VectorCalibration are the MCP server's (its
	// knowledge.Config): the duplicate checks the handler finishes after
	// embedding (finishSimilar) analyse and score as the store's do.
	// Default: knowledge.Config's.
	TextSearchConfig  string
	VectorCalibration *knowledge.VectorCalibration
	Observer          Observer     // default NopObserver
	Logger            *slog.Logger // default slog.Default()
	// Written, if set, is called after a batch wrote vectors (the worker
	// wakes its indexer from its idle back-off: the stores of those
	// entries queued them for the lexical index). It must not block.
	Written func()
}

// EmbedHandler handles entry and batch tasks: it embeds the entries that
// still wait for the job's generation and writes their vectors.
type EmbedHandler struct {
	outbox *knowledge.Outbox
	emb    embed.Embedder
	// checks finishes the duplicate checks stores left to the worker; nil
	// with an in-process embedder, with which no store leaves one.
	checks *knowledge.Service
	opts   HandlerOptions
}

// NewEmbedHandler returns the handler.
func NewEmbedHandler(pool *pgxpool.Pool, emb embed.Embedder, opts HandlerOptions) *EmbedHandler {
	if opts.MaxInputChars <= 0 {
		opts.MaxInputChars = knowledge.DefaultMaxInputChars
	}
	if opts.Chunk.Chars <= 0 {
		opts.Chunk = knowledge.ChunkOptionsFor(emb.Model())
	}
	if opts.Observer == nil {
		opts.Observer = NopObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &EmbedHandler{outbox: knowledge.NewOutbox(pool), emb: emb, opts: opts}
	if _, in := emb.(embed.InProcess); !in {
		h.checks = NewSimilarChecks(pool, emb, opts.TextSearchConfig, opts.VectorCalibration, opts.Logger)
	}
	return h
}

// NewSimilarChecks is the Service that finishes the duplicate checks
// stores left to the worker (knowledge.Service.FinishSimilarChecks), with
// emb's vectors, analysing and scoring as the MCP server does.
func NewSimilarChecks(pool *pgxpool.Pool, emb embed.Embedder, tsConfig string, cal *knowledge.VectorCalibration, log *slog.Logger) *knowledge.Service {
	return knowledge.New(pool, knowledge.Options{Embedder: emb, Logger: log,
		Config: knowledge.Config{TextSearchConfig: tsConfig, VectorCalibration: cal}})
}

// ProcessTask implements asynq.Handler.
//
// Failure policy: a bad payload or an input the provider refuses
// (embed.ErrPermanent) skips the retries; anything else is retried with
// backoff. On the last attempt the entries are marked failed with the error
// before the error is returned, so asynq archives the task (visible in the
// dashboard) and the entry says why it has no vector.
func (h *EmbedHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	jobs, err := decodeJobs(t)
	if err != nil {
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	var out BatchResult
	if err := h.process(ctx, jobs, &out); err != nil {
		h.opts.Observer.TaskFailed(t.Type(), err)
		return err
	}
	h.opts.Observer.TaskDone(t.Type())
	// The outcome is the task's result, shown for completed batches in the
	// dashboard (jobs.FormatResult). Writing it is best effort: it is kept
	// only as long as the task's retention, and a lost result loses no work.
	if rw := t.ResultWriter(); rw != nil {
		if b, err := json.Marshal(out); err == nil {
			_, _ = rw.Write(b)
		}
	}
	return nil
}

// Process embeds jobs; exported for tests and for running without a queue.
func (h *EmbedHandler) Process(ctx context.Context, jobs []knowledge.EmbeddingJob) error {
	var out BatchResult
	return h.process(ctx, jobs, &out)
}

// process is Process, counting in out how the jobs ended.
func (h *EmbedHandler) process(ctx context.Context, jobs []knowledge.EmbeddingJob, out *BatchResult) error {
	if len(jobs) == 0 {
		return nil
	}
	rows, err := h.outbox.Pending(ctx, jobs)
	if err != nil {
		return err
	}
	if n := len(jobs) - len(rows); n > 0 {
		h.opts.Observer.JobsStale(n)
		out.Stale += n
	}
	if len(rows) == 0 {
		return nil // every job is stale: nothing to do, nothing to call
	}
	vecs, err := h.embed(ctx, rows)
	if err == nil {
		if err := h.writeReady(ctx, rows, vecs, out); err != nil {
			return err
		}
		h.finishSimilar(ctx, rows, vecs, out)
		return nil
	}
	if errors.Is(err, embed.ErrPermanent) {
		if len(rows) == 1 {
			return h.fail(ctx, rows, err, true, out)
		}
		return h.isolate(ctx, rows, out)
	}
	return h.fail(ctx, rows, err, false, out)
}

// embed cuts each entry's body into chunks and embeds every chunk of every
// entry in one provider call (knowledge.EmbedEntries).
func (h *EmbedHandler) embed(ctx context.Context, rows []knowledge.PendingEntry) ([]knowledge.EntryVectors, error) {
	texts := make([]knowledge.EntryText, len(rows))
	for i, r := range rows {
		texts[i] = knowledge.EntryText{Title: r.Title, Body: r.Body}
	}
	h.opts.Observer.Batch(len(rows))
	start := time.Now()
	vecs, err := knowledge.EmbedEntries(ctx, h.emb, h.opts.Chunk, h.opts.MaxInputChars, texts)
	h.opts.Observer.ProviderCall(time.Since(start), err)
	return vecs, err
}

// isolate embeds the entries of a refused batch one by one, so one input the
// provider refuses fails only its own entry.
func (h *EmbedHandler) isolate(ctx context.Context, rows []knowledge.PendingEntry, out *BatchResult) error {
	var refused int
	var retryErr error
	for i := range rows {
		one := rows[i : i+1]
		vecs, err := h.embed(ctx, one)
		switch {
		case err == nil:
			if err := h.writeReady(ctx, one, vecs, out); err != nil {
				return err
			}
			h.finishSimilar(ctx, one, vecs, out)
		case errors.Is(err, embed.ErrPermanent):
			refused++
			if ferr := h.markFailed(ctx, one, err, out); ferr != nil {
				return ferr
			}
		default:
			if retryErr == nil {
				retryErr = err
			}
		}
	}
	if retryErr != nil {
		// Retry: only what is still pending is embedded next time (and, on
		// the last attempt, marked failed: the writes are conditional).
		return h.fail(ctx, rows, retryErr, false, out)
	}
	return fmt.Errorf("provider refused %d of %d entries: %w", refused, len(rows), asynq.SkipRetry)
}

// fail returns err after marking rows failed if this is the last attempt
// (or the failure is permanent). A context cancelled by a shutdown is never a
// reason to fail an entry: the task goes back to the queue.
func (h *EmbedHandler) fail(ctx context.Context, rows []knowledge.PendingEntry, err error, permanent bool, out *BatchResult) error {
	if ctx.Err() != nil {
		return err
	}
	if permanent {
		if ferr := h.markFailed(ctx, rows, err, out); ferr != nil {
			return ferr
		}
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	if lastAttempt(ctx) {
		if ferr := h.markFailed(ctx, rows, fmt.Errorf("retries exhausted: %w", err), out); ferr != nil {
			return ferr
		}
	}
	return err
}

// lastAttempt tells whether asynq will archive the task if it fails now.
func lastAttempt(ctx context.Context) bool {
	n, ok1 := asynq.GetRetryCount(ctx)
	max, ok2 := asynq.GetMaxRetry(ctx)
	return ok1 && ok2 && n >= max
}

func (h *EmbedHandler) markFailed(ctx context.Context, rows []knowledge.PendingEntry, cause error, out *BatchResult) error {
	for _, r := range rows {
		marked, err := h.outbox.MarkFailed(ctx, r.Job, cause.Error())
		if err != nil {
			return err
		}
		if marked {
			h.opts.Observer.EntryFailed()
			out.Failed++
			h.opts.Logger.Warn("embedding failed", "org", r.Job.OrgID, "entry", r.Job.EntryID, "generation", r.Job.Generation, "error", cause)
		}
	}
	return nil
}

// writeReady writes the vectors of rows (knowledge.Outbox.WriteVectors:
// each entry only while still pending at the job's generation, the others
// stale) and reports what it wrote, also when it failed part way.
func (h *EmbedHandler) writeReady(ctx context.Context, rows []knowledge.PendingEntry, vecs []knowledge.EntryVectors, out *BatchResult) error {
	res, err := h.outbox.WriteVectors(ctx, h.emb.Model(), rows, vecs)
	for _, l := range res.Lags {
		h.opts.Observer.EntryReady(l)
	}
	out.Ready += res.Ready
	if res.Ready > 0 && h.opts.Written != nil {
		h.opts.Written()
	}
	if res.Stale > 0 {
		h.opts.Observer.JobsStale(res.Stale)
		out.Stale += res.Stale
	}
	return err
}

// finishSimilar finishes the duplicate checks that stores of rows left to
// the worker (StoreResult.SimilarPending), now that their vectors are
// written: each entry's first vector against the org's
// (knowledge.Service.FinishSimilarChecks). A check that fails is logged
// and stays pending for the worker's sweep (Worker.similarPass): the
// vectors are written, the task succeeded.
func (h *EmbedHandler) finishSimilar(ctx context.Context, rows []knowledge.PendingEntry, vecs []knowledge.EntryVectors, out *BatchResult) {
	if h.checks == nil {
		return
	}
	jobs := make([]knowledge.SimilarCheckJob, 0, len(rows))
	for i, r := range rows {
		if len(vecs[i].Vecs) == 0 {
			continue
		}
		jobs = append(jobs, knowledge.SimilarCheckJob{OrgID: r.Job.OrgID, EntryID: r.Job.EntryID, Title: r.Title, Body: r.Body, Vector: vecs[i].Vecs[0]})
	}
	n, err := h.checks.FinishSimilarChecks(ctx, jobs)
	out.Similar += n
	h.opts.Observer.SimilarChecked(n, err)
	if err != nil && ctx.Err() == nil {
		h.opts.Logger.Warn("duplicate checks after embedding failed; the sweep tries again", "done", n, "error", err)
	}
}
