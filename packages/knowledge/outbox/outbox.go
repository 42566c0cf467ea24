package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
)

// The embeddings pipeline's calls (packages/knowledge/jobs, apps/worker,
// `ctl reembed`). An entry's embedding_status = 'pending' is the outbox of
// the embeddings queue and embedding_generation names the request a job was
// made for; the knowledge module is the only writer of the knowledge
// tables, so the pipeline reads and writes them here. Every write is
// conditional on (pending, generation): a late or repeated job never
// overwrites newer data.

// Outbox is the pipeline's view of the knowledge tables: the entries waiting
// for vectors, and the writes that end their wait. Its statements see every
// org (the worker serves all of them): give it a pool of a role exempt from
// row-level security (the worker's, the operator's). It is safe for
// concurrent use.
type Outbox struct {
	Data *data.DB
	Q    *sqlc.Queries
}

// NewOutbox returns the outbox of pool (from db.Open, which registers
// pgvector's types).
func NewOutbox(pool *pgxpool.Pool) *Outbox {
	d := data.New(pool)
	return &Outbox{Data: d, Q: d.Q()}
}

// PendingEntry is an entry that still waits for the vectors of its job's
// generation, with the text to embed.
type PendingEntry struct {
	Job         domain.EmbeddingJob
	Title, Body string
	RequestedAt time.Time
}

// jobReadSettings keep ListJobEntries on the generic plan a connection
// makes once (each job a probe of the primary key, a shape that pins the
// plan): left to plan_cache_mode auto, PostgreSQL planned it on every batch,
// 0.28 ms of planning for 0.04 of running it (pg_stat_statements, the
// 200-org load).
var jobReadSettings = []string{"plan_cache_mode", "force_generic_plan"}

// Pending returns the entries of jobs that still wait for exactly their
// job's generation; jobs whose entry is gone, re-requested since or done are
// left out (stale). It reads one org at a time (sql: ListJobEntries), on
// a Citus cluster on the worker that holds the org (docs/operators.md,
// "Running on a cluster").
func (o *Outbox) Pending(ctx context.Context, jobs []domain.EmbeddingJob) ([]PendingEntry, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	var out []PendingEntry
	for _, g := range data.ByOrg(len(jobs), func(i int) uuid.UUID { return jobs[i].OrgID }) {
		run := data.Pick(jobs, g)
		// On a cluster read on the org's worker.
		q, err := o.Data.Reads(ctx, run[0].OrgID, jobReadSettings...)
		if err != nil {
			return nil, fmt.Errorf("load entries: %w", err)
		}
		rows, err := q.ListJobEntries(ctx, sqlc.ListJobEntriesParams(orgJobArrays(run)))
		if err != nil {
			return nil, fmt.Errorf("load entries: %w", err)
		}
		for _, r := range rows {
			out = append(out, PendingEntry{
				Job:   domain.EmbeddingJob{OrgID: r.OrgID, EntryID: r.ID, Generation: r.EmbeddingGeneration},
				Title: r.Title, Body: r.Body, RequestedAt: r.EmbeddingRequestedAt,
			})
		}
	}
	return out, nil
}

// MaxEmbeddingErrorChars bounds the reason MarkFailed keeps on an entry.
const MaxEmbeddingErrorChars = 1000

// MarkFailed marks job's entry failed with reason (cut to
// MaxEmbeddingErrorChars), if it is still pending at the job's generation;
// marked says whether it was.
func (o *Outbox) MarkFailed(ctx context.Context, job domain.EmbeddingJob, reason string) (marked bool, err error) {
	msg := domain.ClipRunes(reason, MaxEmbeddingErrorChars)
	n, err := o.Q.MarkEmbeddingFailed(ctx, sqlc.MarkEmbeddingFailedParams{
		Error: &msg, OrgID: job.OrgID, ID: job.EntryID, Generation: job.Generation,
	})
	if err != nil {
		return false, fmt.Errorf("mark %s failed: %w", job.EntryID, err)
	}
	return n == 1, nil
}

// Writing vectors waits for no row lock (lock order: docs/operators.md,
// "Lock order"). A row another transaction holds (a purge or forget erasing
// it, a supersession, upkeep) is skipped and tried again after a back-off
// that doubles from writeBackoff, writeAttempts times in all; rows still
// held then fail the write with a retryable error (the task comes back; the
// writes are conditional on the generation, so nothing is written twice).
const (
	WriteAttempts = 6
	WriteBackoff  = 50 * time.Millisecond
)

// ErrRowsBusy is the error WriteVectors wraps when rows were still held by
// another transaction after WriteAttempts: nothing is lost, the task is
// retried (asynq's back-off), and a retry writes only what is still pending.
var ErrRowsBusy = errors.New("entries held by another transaction (a purge or forget in progress?)")

// VectorsWritten is what WriteVectors did.
type VectorsWritten struct {
	Ready int // entries given their vectors
	Stale int // entries no longer pending at their job's generation: nothing written
	// Lags are, for each entry made ready, the time from its embedding
	// request (the store, or the re-embed) to its vectors being written.
	Lags []time.Duration
}

// WriteVectors writes vecs[i], the vectors of model for entries[i] (the
// first the entry's own, the others its later chunks, replacing any left
// over), each only while the entry is still pending at its job's
// generation; the others are counted stale. It never waits for a row lock
// (see writeAttempts). It writes one transaction per org, on a Citus
// cluster on the org's worker. What was written before an error is counted in
// the result returned with it.
func (o *Outbox) WriteVectors(ctx context.Context, model string, entries []PendingEntry, vecs []EntryVectors) (VectorsWritten, error) {
	var out VectorsWritten
	// (org, id) order: the order the lock statement takes them in.
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := entries[a].Job, entries[b].Job
		if c := bytes.Compare(x.OrgID[:], y.OrgID[:]); c != 0 {
			return c
		}
		return bytes.Compare(x.EntryID[:], y.EntryID[:])
	})
	for _, g := range data.ByOrg(len(order), func(i int) uuid.UUID { return entries[order[i]].Job.OrgID }) {
		if err := o.WriteRun(ctx, model, entries, vecs, data.Pick(order, g), &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// writeRun writes the vectors of the entries named by order (indexes into
// entries, in (org, id) order), retrying the ones another transaction
// holds, and counts in out the ready and the stale among them.
func (o *Outbox) WriteRun(ctx context.Context, model string, entries []PendingEntry, vecs []EntryVectors, order []int, out *VectorsWritten) error {
	total := len(order)
	var written int
	wait := WriteBackoff
	for attempt := 1; ; attempt++ {
		n, lags, busy, err := o.WriteOnce(ctx, model, entries, vecs, order)
		if err != nil && !data.IsRetryableTx(err) {
			return err
		}
		if err == nil {
			written += n
			out.Lags = append(out.Lags, lags...)
			if len(busy) == 0 {
				break
			}
			order = busy
		}
		if attempt >= WriteAttempts {
			out.Ready += written
			if err != nil {
				return fmt.Errorf("write vectors: %w", err)
			}
			return fmt.Errorf("write vectors: %d %w after %d attempts; the task is retried", len(busy), ErrRowsBusy, attempt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	out.Ready += written
	out.Stale += total - written
	return nil
}

// writeOnce writes, in one transaction, the vectors of the entries named
// by idx (indexes into entries, in (org, id) order) it can lock without
// waiting. busy: the indexes of entries still pending at their generation
// that another transaction holds.
func (o *Outbox) WriteOnce(ctx context.Context, model string, entries []PendingEntry, vecs []EntryVectors, idx []int) (written int, lags []time.Duration, busy []int, err error) {
	picked := func(idx []int) []domain.EmbeddingJob {
		js := make([]domain.EmbeddingJob, len(idx))
		for k, i := range idx {
			js[k] = entries[i].Job
		}
		return js
	}
	jobs := picked(idx)
	org, ok := oneOrg(jobs)
	if !ok {
		return 0, nil, nil, errors.New("write vectors: the jobs of one transaction are of one org")
	}
	// On a Citus cluster, on the org's worker: the transaction takes row
	// locks only, and its statements then run there instead of each being
	// planned and relayed by the coordinator.
	err = o.Data.OrgTx(ctx, org, func(tx pgx.Tx) error {
		written, lags, busy = 0, nil, nil
		q := o.Q.WithTx(tx)
		// The lock in one round trip with the settings the transaction's
		// statements keep (VectorWriteConfig: generic plans).
		first := sqlc.New(pgbatch.New(tx))
		if err := first.VectorWriteConfig(ctx); err != nil {
			return fmt.Errorf("lock entries: %w", err)
		}
		locked, err := first.LockPendingForEmbedding(ctx, sqlc.LockPendingForEmbeddingParams(orgJobArrays(jobs)))
		if err != nil {
			return fmt.Errorf("lock entries: %w", err)
		}
		have := make(map[[2]uuid.UUID]bool, len(locked))
		for _, l := range locked {
			have[[2]uuid.UUID{l.OrgID, l.ID}] = true
		}
		var skipped []int
		for _, i := range idx {
			j := entries[i].Job
			if !have[[2]uuid.UUID{j.OrgID, j.EntryID}] {
				skipped = append(skipped, i)
				continue
			}
			lag, ok, err := WriteEntryVectors(ctx, q, model, j, vecs[i])
			if err != nil {
				return err
			}
			if ok {
				written++
				if lag != nil {
					lags = append(lags, *lag)
				}
			}
		}
		if len(skipped) == 0 {
			return nil
		}
		// Skipped: held by another transaction, or no longer pending at the
		// job's generation (erased, re-embedded, done). Only the first are
		// tried again.
		still, err := q.ListJobEntries(ctx, sqlc.ListJobEntriesParams(orgJobArrays(picked(skipped))))
		if err != nil {
			return fmt.Errorf("load skipped entries: %w", err)
		}
		pending := make(map[[2]uuid.UUID]bool, len(still))
		for _, r := range still {
			pending[[2]uuid.UUID{r.OrgID, r.ID}] = true
		}
		for _, i := range skipped {
			if j := entries[i].Job; pending[[2]uuid.UUID{j.OrgID, j.EntryID}] {
				busy = append(busy, i)
			}
		}
		return nil
	})
	return written, lags, busy, err
}

// oneOrg is the org of every job, when they are all of one.
func oneOrg(jobs []domain.EmbeddingJob) (uuid.UUID, bool) {
	if len(jobs) == 0 {
		return uuid.Nil, false
	}
	for _, j := range jobs[1:] {
		if j.OrgID != jobs[0].OrgID {
			return uuid.Nil, false
		}
	}
	return jobs[0].OrgID, true
}

// writeEntryVectors writes one locked entry's vectors: its own (with
// which any chunks left over go), then its later chunks (written only with
// the entry's vector, the row being still the job's). ok is false when the
// entry was not pending at the job's generation (nothing written); lag is the
// request-to-ready time, nil when unknown.
func WriteEntryVectors(ctx context.Context, q *sqlc.Queries, model string, j domain.EmbeddingJob, ev EntryVectors) (lag *time.Duration, ok bool, err error) {
	v := pgvector.NewVector(ev.Vecs[0])
	res, err := q.MarkEmbeddingReady(ctx, sqlc.MarkEmbeddingReadyParams{
		Embedding: &v, Model: &model, OrgID: j.OrgID, ID: j.EntryID, Generation: j.Generation,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil // cannot happen while locked pending; stale either way
	}
	if err != nil {
		return nil, false, fmt.Errorf("write vector of %s: %w", j.EntryID, err)
	}
	for c := 1; c < len(ev.Vecs); c++ {
		sp := ev.Spans[c]
		if err := q.InsertChunk(ctx, sqlc.InsertChunkParams{
			OrgID: j.OrgID, EntryID: j.EntryID, Chunk: int32(c), StartChar: int32(sp.Start), EndChar: int32(sp.End),
			EmbeddingModel: model, Embedding: pgvector.NewVector(ev.Vecs[c]),
		}); err != nil {
			return nil, false, fmt.Errorf("write chunk %d of %s: %w", c, j.EntryID, err)
		}
	}
	if res.EmbeddedAt == nil {
		return nil, true, nil
	}
	d := res.EmbeddedAt.Sub(res.EmbeddingRequestedAt)
	return &d, true, nil
}

// RequestReembed asks for new vectors for the entries of org and returns
// their jobs, to enqueue. Without all, only failed entries and ready
// entries of another model than space's or, when space.Dims > 0, of another
// width; with all, every entry. Each chosen entry gets a new generation (so
// jobs still in flight for the old one do nothing) and goes back to pending,
// its vector cleared (the schema ties 'ready' to a vector).
func (o *Outbox) RequestReembed(ctx context.Context, org uuid.UUID, space vecspace.Space, all bool) ([]domain.EmbeddingJob, error) {
	rows, err := o.Q.RequestReembed(ctx, sqlc.RequestReembedParams{OrgID: org, AllEntries: all, Model: space.Model, Dims: int32(space.Dims)})
	if err != nil {
		return nil, fmt.Errorf("request re-embed: %w", err)
	}
	return JobsOf(rows), nil
}

// Current returns the jobs that still name their entry's current
// generation, in any status: a job whose entry is gone or was re-requested
// since has nothing left to say.
func (o *Outbox) Current(ctx context.Context, jobs []domain.EmbeddingJob) ([]domain.EmbeddingJob, error) {
	rows, err := o.Q.ListCurrentJobs(ctx, sqlc.ListCurrentJobsParams(JobArrays(jobs)))
	if err != nil {
		return nil, err
	}
	return JobsOf(rows), nil
}

// Stale returns the jobs of entries pending since before before, the
// oldest first, at most max: those whose enqueue failed or whose task was
// lost, for the reconciler to enqueue again. Across orgs.
func (o *Outbox) Stale(ctx context.Context, before time.Time, max int) ([]domain.EmbeddingJob, error) {
	rows, err := o.Q.ListStalePending(ctx, sqlc.ListStalePendingParams{Before: before, MaxRows: int32(max)})
	if err != nil {
		return nil, err
	}
	return JobsOf(rows), nil
}

// Backlog is the size and age of the outbox.
type Backlog struct {
	Pending int64
	Oldest  time.Duration // age of the oldest pending request; 0 when none
}

// Backlog reads the outbox's size and age, across orgs (the worker's
// backlog gauges).
func (o *Outbox) Backlog(ctx context.Context) (Backlog, error) {
	r, err := o.Q.PendingBacklog(ctx)
	if err != nil {
		return Backlog{}, err
	}
	return Backlog{Pending: r.Pending, Oldest: time.Duration(r.OldestSeconds * float64(time.Second))}, nil
}

// jobRow is the columns naming a job in the statements' rows.
type JobRow = struct {
	OrgID               uuid.UUID
	ID                  uuid.UUID
	EmbeddingGeneration int32
}

// jobsOf is the jobs of rows.
func JobsOf[R ~JobRow](rows []R) []domain.EmbeddingJob {
	out := make([]domain.EmbeddingJob, len(rows))
	for i, r := range rows {
		j := JobRow(r)
		out[i] = domain.EmbeddingJob{OrgID: j.OrgID, EntryID: j.ID, Generation: j.EmbeddingGeneration}
	}
	return out
}

// orgJobIDs is the arguments of the statements that take one org's jobs
// (ListJobEntries, LockPendingForEmbedding: the org's equality is how
// their probes use the primary key, and how a Citus worker routes them).
type orgJobIDs struct {
	Ids         []uuid.UUID
	Generations []int32
	OrgID       uuid.UUID
}

// orgJobArrays is the arguments of jobs, all of one org (data.ByOrg).
func orgJobArrays(jobs []domain.EmbeddingJob) orgJobIDs {
	p := orgJobIDs{Ids: make([]uuid.UUID, len(jobs)), Generations: make([]int32, len(jobs))}
	for i, j := range jobs {
		p.Ids[i], p.Generations[i] = j.EntryID, j.Generation
	}
	if len(jobs) > 0 {
		p.OrgID = jobs[0].OrgID
	}
	return p
}

// jobIDs is the column arrays the job statements take (unnest).
type JobIDs struct {
	OrgIds      []uuid.UUID
	Ids         []uuid.UUID
	Generations []int32
}

func JobArrays(jobs []domain.EmbeddingJob) JobIDs {
	p := JobIDs{
		OrgIds:      make([]uuid.UUID, len(jobs)),
		Ids:         make([]uuid.UUID, len(jobs)),
		Generations: make([]int32, len(jobs)),
	}
	for i, j := range jobs {
		p.OrgIds[i], p.Ids[i], p.Generations[i] = j.OrgID, j.EntryID, j.Generation
	}
	return p
}
