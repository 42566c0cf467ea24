package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// HandlerOptions are the optional settings of an EmbedHandler.
type HandlerOptions struct {
	// MaxInputChars cuts each text sent (a chunk: title, blank line, part
	// of the body) to this many characters, the net under Chunk. Default
	// knowledge.DefaultMaxInputChars.
	MaxInputChars int
	// Chunk says how long bodies are cut into chunks, each embedded
	// (knowledge.Chunks). Default knowledge.ChunkOptionsFor(the model).
	Chunk    knowledge.ChunkOptions
	Observer Observer     // default NopObserver
	Logger   *slog.Logger // default slog.Default()
}

// EmbedHandler handles entry and batch tasks: it embeds the entries that
// still wait for the job's generation and writes their vectors.
type EmbedHandler struct {
	pool *pgxpool.Pool
	q    *sqlc.Queries
	emb  embed.Embedder
	opts HandlerOptions
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
	return &EmbedHandler{pool: pool, q: sqlc.New(pool), emb: emb, opts: opts}
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
	p := sqlc.ListJobEntriesParams{
		OrgIds:      make([]uuid.UUID, len(jobs)),
		Ids:         make([]uuid.UUID, len(jobs)),
		Generations: make([]int32, len(jobs)),
	}
	for i, j := range jobs {
		p.OrgIds[i], p.Ids[i], p.Generations[i] = j.OrgID, j.EntryID, j.Generation
	}
	var rows []sqlc.ListJobEntriesRow
	citus, err := db.IsCitus(ctx, h.pool)
	if err != nil {
		return fmt.Errorf("load entries: %w", err)
	}
	if citus {
		// On a Citus cluster one org at a time: each statement is routed to
		// the one worker that holds the org (docs/operators.md, "Running on
		// a cluster"); the embedding call below still takes the whole batch.
		for _, g := range orgRuns(len(p.OrgIds), func(i int) uuid.UUID { return p.OrgIds[i] }) {
			r, err := h.q.ListJobEntries(ctx, sqlc.ListJobEntriesParams{OrgIds: pick(p.OrgIds, g), Ids: pick(p.Ids, g), Generations: pick(p.Generations, g)})
			if err != nil {
				return fmt.Errorf("load entries: %w", err)
			}
			rows = append(rows, r...)
		}
	} else if rows, err = h.q.ListJobEntries(ctx, p); err != nil {
		return fmt.Errorf("load entries: %w", err)
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
		return h.writeReady(ctx, rows, vecs, out)
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
func (h *EmbedHandler) embed(ctx context.Context, rows []sqlc.ListJobEntriesRow) ([]knowledge.EntryVectors, error) {
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
func (h *EmbedHandler) isolate(ctx context.Context, rows []sqlc.ListJobEntriesRow, out *BatchResult) error {
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
func (h *EmbedHandler) fail(ctx context.Context, rows []sqlc.ListJobEntriesRow, err error, permanent bool, out *BatchResult) error {
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

func (h *EmbedHandler) markFailed(ctx context.Context, rows []sqlc.ListJobEntriesRow, cause error, out *BatchResult) error {
	msg := clip(cause.Error(), 1000)
	for _, r := range rows {
		n, err := h.q.MarkEmbeddingFailed(ctx, sqlc.MarkEmbeddingFailedParams{
			Error: &msg, OrgID: r.OrgID, ID: r.ID, Generation: r.EmbeddingGeneration,
		})
		if err != nil {
			return fmt.Errorf("mark %s failed: %w", r.ID, err)
		}
		if n == 1 {
			h.opts.Observer.EntryFailed()
			out.Failed++
			h.opts.Logger.Warn("embedding failed", "org", r.OrgID, "entry", r.ID, "generation", r.EmbeddingGeneration, "error", msg)
		}
	}
	return nil
}

// Writing vectors waits for no row lock (lock order: docs/operators.md,
// "Lock order"). A row another transaction holds (a purge or forget erasing
// it, a supersession, upkeep) is skipped and tried again after a back-off
// that doubles from writeBackoff, writeAttempts times in all; rows still
// held then fail the task with a retryable error (asynq comes back; the
// writes are conditional on the generation, so nothing is written twice).
const (
	writeAttempts = 6
	writeBackoff  = 50 * time.Millisecond
)

// writeReady writes the vectors of rows. Each entry is written only while
// still pending at the job's generation; others are left alone (stale).
func (h *EmbedHandler) writeReady(ctx context.Context, rows []sqlc.ListJobEntriesRow, vecs []knowledge.EntryVectors, out *BatchResult) error {
	// (org, id) order: the order the lock statement takes them in.
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := bytes.Compare(rows[a].OrgID[:], rows[b].OrgID[:]); c != 0 {
			return c
		}
		return bytes.Compare(rows[a].ID[:], rows[b].ID[:])
	})
	citus, err := db.IsCitus(ctx, h.pool)
	if err != nil {
		return fmt.Errorf("write vectors: %w", err)
	}
	if !citus {
		return h.writeReadyRun(ctx, rows, vecs, order, out)
	}
	// On a Citus cluster one transaction an org (each on its org's worker:
	// no distributed transaction, and a row lock statement may not span
	// shards).
	for _, g := range orgRuns(len(order), func(i int) uuid.UUID { return rows[order[i]].OrgID }) {
		if err := h.writeReadyRun(ctx, rows, vecs, pick(order, g), out); err != nil {
			return err
		}
	}
	return nil
}

// orgRuns groups the indexes 0..n-1 by org (first seen first).
func orgRuns(n int, org func(int) uuid.UUID) [][]int {
	var runs [][]int
	at := map[uuid.UUID]int{}
	for i := range n {
		o := org(i)
		k, ok := at[o]
		if !ok {
			k = len(runs)
			at[o] = k
			runs = append(runs, nil)
		}
		runs[k] = append(runs[k], i)
	}
	return runs
}

func pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = xs[i]
	}
	return out
}

// writeReadyRun writes the vectors of the rows named by order (indexes
// into rows, in (org, id) order), retrying the ones another transaction
// holds, and counts in out the ready and the stale among them.
func (h *EmbedHandler) writeReadyRun(ctx context.Context, rows []sqlc.ListJobEntriesRow, vecs []knowledge.EntryVectors, order []int, out *BatchResult) error {
	total := len(order)
	var written int
	wait := writeBackoff
	for attempt := 1; ; attempt++ {
		n, lags, busy, err := h.writeReadyOnce(ctx, rows, vecs, order)
		if err != nil && !knowledge.IsTransientTx(err) {
			return err
		}
		if err == nil {
			written += n
			for _, l := range lags {
				h.opts.Observer.EntryReady(l)
			}
			if len(busy) == 0 {
				break
			}
			order = busy
		}
		if attempt >= writeAttempts {
			out.Ready += written
			if err != nil {
				return fmt.Errorf("write vectors: %w", err)
			}
			return fmt.Errorf("write vectors: %d entries held by another transaction (a purge or forget in progress?) after %d attempts; the task is retried", len(busy), attempt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	out.Ready += written
	if stale := total - written; stale > 0 {
		h.opts.Observer.JobsStale(stale)
		out.Stale += stale
	}
	return nil
}

// writeReadyOnce writes, in one transaction, the vectors of the rows named
// by idx (indexes into rows, in (org, id) order) it can lock without
// waiting. busy: the indexes of rows still pending at their generation that
// another transaction holds.
func (h *EmbedHandler) writeReadyOnce(ctx context.Context, rows []sqlc.ListJobEntriesRow, vecs []knowledge.EntryVectors, idx []int) (written int, lags []time.Duration, busy []int, err error) {
	model := h.emb.Model()
	err = pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		written, lags, busy = 0, nil, nil
		q := h.q.WithTx(tx)
		p := sqlc.LockPendingForEmbeddingParams{
			OrgIds: make([]uuid.UUID, len(idx)), Ids: make([]uuid.UUID, len(idx)), Generations: make([]int32, len(idx)),
		}
		for k, i := range idx {
			p.OrgIds[k], p.Ids[k], p.Generations[k] = rows[i].OrgID, rows[i].ID, rows[i].EmbeddingGeneration
		}
		locked, err := q.LockPendingForEmbedding(ctx, p)
		if err != nil {
			return fmt.Errorf("lock entries: %w", err)
		}
		have := make(map[[2]uuid.UUID]bool, len(locked))
		for _, l := range locked {
			have[[2]uuid.UUID{l.OrgID, l.ID}] = true
		}
		var skipped []int
		for _, i := range idx {
			r := rows[i]
			if !have[[2]uuid.UUID{r.OrgID, r.ID}] {
				skipped = append(skipped, i)
				continue
			}
			v := pgvector.NewVector(vecs[i].Vecs[0])
			res, err := q.MarkEmbeddingReady(ctx, sqlc.MarkEmbeddingReadyParams{
				Embedding: &v, Model: &model, OrgID: r.OrgID, ID: r.ID, Generation: r.EmbeddingGeneration,
			})
			if errors.Is(err, pgx.ErrNoRows) {
				continue // cannot happen while locked pending; stale either way
			}
			if err != nil {
				return fmt.Errorf("write vector of %s: %w", r.ID, err)
			}
			// The later chunks, written only with the entry's vector (the
			// row was still the job's), replacing any left over.
			if err := q.DeleteChunks(ctx, sqlc.DeleteChunksParams{OrgID: r.OrgID, EntryID: r.ID, EmbeddingModel: model}); err != nil {
				return fmt.Errorf("clear chunks of %s: %w", r.ID, err)
			}
			for j := 1; j < len(vecs[i].Vecs); j++ {
				sp := vecs[i].Spans[j]
				if err := q.InsertChunk(ctx, sqlc.InsertChunkParams{
					OrgID: r.OrgID, EntryID: r.ID, Chunk: int32(j), StartChar: int32(sp.Start), EndChar: int32(sp.End),
					EmbeddingModel: model, Embedding: pgvector.NewVector(vecs[i].Vecs[j]),
				}); err != nil {
					return fmt.Errorf("write chunk %d of %s: %w", j, r.ID, err)
				}
			}
			written++
			if res.EmbeddedAt != nil {
				lags = append(lags, res.EmbeddedAt.Sub(res.EmbeddingRequestedAt))
			}
		}
		if len(skipped) == 0 {
			return nil
		}
		// Skipped: held by another transaction, or no longer pending at the
		// job's generation (erased, re-embedded, done). Only the first are
		// tried again.
		sp := sqlc.ListJobEntriesParams{
			OrgIds: make([]uuid.UUID, len(skipped)), Ids: make([]uuid.UUID, len(skipped)), Generations: make([]int32, len(skipped)),
		}
		for k, i := range skipped {
			sp.OrgIds[k], sp.Ids[k], sp.Generations[k] = rows[i].OrgID, rows[i].ID, rows[i].EmbeddingGeneration
		}
		still, err := q.ListJobEntries(ctx, sp)
		if err != nil {
			return fmt.Errorf("load skipped entries: %w", err)
		}
		pending := make(map[[2]uuid.UUID]bool, len(still))
		for _, r := range still {
			pending[[2]uuid.UUID{r.OrgID, r.ID}] = true
		}
		for _, i := range skipped {
			if pending[[2]uuid.UUID{rows[i].OrgID, rows[i].ID}] {
				busy = append(busy, i)
			}
		}
		return nil
	})
	return written, lags, busy, err
}

// clip cuts s to at most n characters without splitting a rune.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
