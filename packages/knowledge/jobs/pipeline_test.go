package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

func TestStoreToReadyFoundByVector(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFake()
	b.enq = b.enq.WithShards(1) // one group: the three entries make one batch
	// Entries go in through the knowledge Service's Store, which enqueues
	// after its commit. Its duplicate check is off: with it, a store
	// writes the vector the check made (knowledge's TestSimilarByMeaning),
	// and this test is of the worker's way.
	svc := knowledge.New(b.pool, knowledge.Options{Embedder: fake, Enqueuer: b.enq, Testing: knowledge.TestingKnobs{SkipSimilar: true}})
	caller := knowledge.Caller{OrgID: b.org, AgentID: b.agent}
	storeSvc := func(title, body string) knowledge.EmbeddingJob {
		t.Helper()
		r, err := svc.Store(context.Background(), caller, knowledge.StoreInput{Title: title, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if r.EmbeddingStatus != knowledge.EmbeddingPending {
			t.Fatalf("store answered %q", r.EmbeddingStatus)
		}
		return knowledge.EmbeddingJob{OrgID: b.org, EntryID: r.ID, Generation: 1}
	}
	target := storeSvc("postgres connection pool exhausted", "raise max_connections or use pgbouncer in transaction mode")
	others := []knowledge.EmbeddingJob{
		storeSvc("banana smoothie", "blend bananas with milk"),
		storeSvc("kubernetes pod eviction", "the node ran out of memory"),
	}
	b.worker(t, fake, nil)
	all := append(others, target)
	b.waitStatus(t, knowledge.EmbeddingReady, 15*time.Second, ids(all...)...)

	st := b.state(t, target.EntryID)
	if !st.HasVector || st.Model == nil || *st.Model != "fake-v1" || st.Error != nil {
		t.Fatalf("state %+v", st)
	}
	// Three entries stored at once went to the provider in one call.
	if fake.Calls() != 1 {
		t.Errorf("%d provider calls for 3 entries stored together, want 1 batch", fake.Calls())
	}

	// The vector list: ordering by cosine distance to the query's vector
	// finds the entry first.
	qv, _ := fake.Embed(context.Background(), []string{"postgres pool exhausted"})
	var first uuid.UUID
	if err := b.pool.QueryRow(context.Background(),
		`SELECT id FROM knowledge WHERE org_id = $1 AND embedding IS NOT NULL ORDER BY embedding <=> $2 LIMIT 1`,
		b.org, pgvector.NewVector(qv[0])).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if first != target.EntryID {
		t.Fatalf("nearest vector is %s, want %s", first, target.EntryID)
	}

	// And the service's hybrid search ranks it first in the vector list.
	res, err := svc.Search(context.Background(), caller, knowledge.SearchInput{Query: "postgres pool exhausted"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.VectorSearch || len(res.Hits) == 0 || res.Hits[0].ID != target.EntryID || res.Hits[0].VectorRank != 1 {
		t.Fatalf("search: %+v", res)
	}
}

func TestProviderFailingThenRecovering(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFake()
	fake.fail = func(n int, _ []string) error {
		if n <= 2 {
			return errFlaky
		}
		return nil
	}
	j := b.store(t, "flaky", "provider down for two calls")
	b.worker(t, fake, nil)
	b.waitStatus(t, knowledge.EmbeddingReady, 15*time.Second, j.EntryID)
	if fake.Calls() != 3 {
		t.Fatalf("%d calls, want 2 failures and 1 success", fake.Calls())
	}
	if st := b.state(t, j.EntryID); st.Error != nil {
		t.Fatalf("error left behind: %s", *st.Error)
	}
}

func TestProviderFailingForGoodMarksFailedAndArchives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFake()
	fake.fail = func(int, []string) error { return errFlaky }
	j := b.store(t, "doomed", "the provider never comes back")
	b.worker(t, fake, func(o *jobs.WorkerOptions) { o.MaxRetry = 2 })
	b.waitStatus(t, knowledge.EmbeddingFailed, 15*time.Second, j.EntryID)
	st := b.state(t, j.EntryID)
	if st.Error == nil || !strings.Contains(*st.Error, "retries exhausted") || !strings.Contains(*st.Error, "503") {
		t.Fatalf("state %+v", st)
	}
	if fake.Calls() != 3 {
		t.Fatalf("%d calls, want 1 + 2 retries", fake.Calls())
	}
	waitArchived(t, b, 1)
}

func TestRefusedInputFailsOnlyItsEntry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFake()
	fake.fail = permanentIf("POISON")
	b.enq = b.enq.WithShards(1)
	good1 := b.store(t, "good one", "fine text")
	bad := b.store(t, "bad one", "POISON the provider refuses")
	good2 := b.store(t, "good two", "more fine text")
	b.worker(t, fake, nil)
	b.waitStatus(t, knowledge.EmbeddingReady, 15*time.Second, good1.EntryID, good2.EntryID)
	b.waitStatus(t, knowledge.EmbeddingFailed, 5*time.Second, bad.EntryID)
	if st := b.state(t, bad.EntryID); st.Error == nil || !strings.Contains(*st.Error, "refused") {
		t.Fatalf("bad entry state %+v", st)
	}
	// The batch was refused once, then isolated: 1 + 3 calls, no retries.
	if fake.Calls() != 4 {
		t.Fatalf("%d calls, want 4", fake.Calls())
	}
	waitArchived(t, b, 1)
}

func waitArchived(t *testing.T, b *bundle, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tasks, err := b.insp.ListArchivedTasks(jobs.Queue)
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatal(err)
		}
		if len(tasks) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d archived tasks, want %d", len(tasks), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestJobProcessedTwiceAndLateJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFake()
	h := jobs.NewEmbedHandler(b.pool, fake, jobs.HandlerOptions{})
	ctx := context.Background()
	j := b.insert(t, "twice", "processed twice")

	// The same job enqueued twice collapses into one task.
	if err := b.enq.EnqueueEmbedding(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := b.enq.EnqueueEmbedding(ctx, j); err != nil {
		t.Fatalf("duplicate enqueue: %v", err)
	}
	info, err := b.insp.GetQueueInfo(jobs.Queue)
	if err != nil || info.Aggregating != 1 {
		t.Fatalf("queue %+v (%v), want 1 aggregating task", info, err)
	}

	// Handled twice: the second run finds nothing pending and calls nobody.
	for range 2 {
		if err := h.Process(ctx, []knowledge.EmbeddingJob{j}); err != nil {
			t.Fatal(err)
		}
	}
	if fake.Calls() != 1 || b.state(t, j.EntryID).Status != knowledge.EmbeddingReady {
		t.Fatalf("calls %d state %+v", fake.Calls(), b.state(t, j.EntryID))
	}

	// A re-embed makes generation 2; a late job of generation 1 writes nothing.
	newModel := &fakeEmbedder{local: fake.local, model: "fake-v2", started: make(chan struct{})}
	n, err := jobs.ReembedModel(ctx, b.pool, b.enq, b.org, "fake-v2", false)
	if err != nil || n != 1 {
		t.Fatalf("reembed: %d %v", n, err)
	}
	if err := jobs.NewEmbedHandler(b.pool, fake, jobs.HandlerOptions{}).Process(ctx, []knowledge.EmbeddingJob{j}); err != nil {
		t.Fatal(err)
	}
	st := b.state(t, j.EntryID)
	if st.Status != knowledge.EmbeddingPending || st.Generation != 2 {
		t.Fatalf("late generation-1 job changed the entry: %+v", st)
	}
	// The generation-2 job does the work with the new model.
	j2 := j
	j2.Generation = 2
	if err := jobs.NewEmbedHandler(b.pool, newModel, jobs.HandlerOptions{}).Process(ctx, []knowledge.EmbeddingJob{j2}); err != nil {
		t.Fatal(err)
	}
	if st := b.state(t, j.EntryID); st.Status != knowledge.EmbeddingReady || *st.Model != "fake-v2" {
		t.Fatalf("after generation 2: %+v", st)
	}
	// An old-model worker finishing late cannot overwrite it either.
	if err := h.Process(ctx, []knowledge.EmbeddingJob{j, j2}); err != nil {
		t.Fatal(err)
	}
	if st := b.state(t, j.EntryID); *st.Model != "fake-v2" {
		t.Fatalf("overwritten by a late job: %+v", st)
	}
}

func TestLostEnqueueRecoveredByReconciler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFake()
	// A crash between commit and enqueue: rows pending, nothing in Redis.
	lost := []knowledge.EmbeddingJob{b.insert(t, "lost one", "never enqueued"), b.insert(t, "lost two", "never enqueued")}
	// A flushed Redis: enqueued, then the queue is gone.
	flushed := b.store(t, "flushed", "enqueued then flushed")
	if err := b.rdb.Client.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	b.worker(t, fake, func(o *jobs.WorkerOptions) {
		o.ReconcileInterval = 200 * time.Millisecond
		o.Reconciler.Grace = 300 * time.Millisecond
	})
	all := append(lost, flushed)
	b.waitStatus(t, knowledge.EmbeddingReady, 20*time.Second, ids(all...)...)
}

func TestReconcilerReenqueuesOverAFinishedTaskAndCoolsDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	j := b.insert(t, "archived", "its entry task was archived while the entry stayed pending")
	// An entry task handled on its own (no group) and archived.
	payload, _ := json.Marshal(j)
	if _, err := b.client.Enqueue(asynq.NewTask(jobs.TypeEmbedEntry, payload),
		asynq.Queue(jobs.Queue), asynq.TaskID(jobs.TaskID(j))); err != nil {
		t.Fatal(err)
	}
	if err := b.insp.ArchiveTask(jobs.Queue, jobs.TaskID(j)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE knowledge SET embedding_requested_at = now() - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	rec := jobs.NewReconciler(b.pool, b.enq, b.insp, jobs.ReconcilerOptions{Grace: time.Minute})
	n, err := rec.RunOnce(ctx)
	if err != nil || n != 1 {
		t.Fatalf("first pass: %d %v, want 1 re-enqueued despite the archived task", n, err)
	}
	info, err := b.insp.GetTaskInfo(jobs.Queue, jobs.TaskID(j))
	if err != nil || info.State != asynq.TaskStateAggregating {
		t.Fatalf("task after re-enqueue: %+v %v", info, err)
	}
	// A second pass within the cooldown adds nothing.
	if n, err := rec.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("second pass: %d %v, want 0", n, err)
	}
}

func TestWorkerStoppedMidBatchAndRestarted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stuck := newFake()
	stuck.block = make(chan struct{}) // never released: the provider hangs
	var all []knowledge.EmbeddingJob
	for i := range 10 {
		all = append(all, b.store(t, "entry", strings.Repeat("word ", i+1)))
	}
	w1 := jobs.NewWorker(b.redis, b.pool, stuck, jobs.WorkerOptions{
		BatchGrace: time.Second, ShutdownTimeout: 200 * time.Millisecond, ReconcileInterval: time.Hour,
	})
	if err := w1.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stuck.started:
	case <-time.After(15 * time.Second):
		t.Fatal("the batch never reached the provider")
	}
	w1.Shutdown() // mid-batch: the batch goes back to the queue
	for _, j := range all {
		if st := b.state(t, j.EntryID); st.Status != knowledge.EmbeddingPending {
			t.Fatalf("entry %s is %s after an interrupted batch", j.EntryID, st.Status)
		}
	}
	fresh := newFake()
	b.worker(t, fresh, nil)
	b.waitStatus(t, knowledge.EmbeddingReady, 20*time.Second, ids(all...)...)
}

func TestReembed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ready := b.insert(t, "ready old model", "x")
	failed := b.insert(t, "failed", "y")
	current := b.insert(t, "ready current model", "z")
	pending := b.insert(t, "pending", "w")
	vec := pgvector.NewVector(make([]float32, 768))
	vec.Slice()[0] = 1
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	mustExec("UPDATE knowledge SET embedding_status='ready', embedding=$1, embedding_model='old', embedded_at=now() WHERE id=$2", vec, ready.EntryID)
	mustExec("UPDATE knowledge SET embedding_status='ready', embedding=$1, embedding_model='fake-v1', embedded_at=now() WHERE id=$2", vec, current.EntryID)
	mustExec("UPDATE knowledge SET embedding_status='failed', embedding_error='boom' WHERE id=$1", failed.EntryID)

	n, err := jobs.ReembedModel(ctx, b.pool, b.enq, b.org, "fake-v1", false)
	if err != nil || n != 2 {
		t.Fatalf("reembed changed/failed: %d %v, want 2", n, err)
	}
	for id, want := range map[uuid.UUID]int32{ready.EntryID: 2, failed.EntryID: 2, current.EntryID: 1, pending.EntryID: 1} {
		if st := b.state(t, id); st.Generation != want {
			t.Errorf("entry %s generation %d, want %d", id, st.Generation, want)
		}
	}
	b.worker(t, newFake(), nil)
	b.waitStatus(t, knowledge.EmbeddingReady, 15*time.Second, ready.EntryID, failed.EntryID)

	n, err = jobs.ReembedModel(ctx, b.pool, b.enq, b.org, "fake-v1", true)
	if err != nil || n != 4 {
		t.Fatalf("reembed all: %d %v, want 4", n, err)
	}
	b.waitStatus(t, knowledge.EmbeddingReady, 15*time.Second, ready.EntryID, failed.EntryID, current.EntryID, pending.EntryID)
	// Another org is untouched.
	if n, err := jobs.ReembedModel(ctx, b.pool, b.enq, uuid.New(), "fake-v1", true); err != nil || n != 0 {
		t.Fatalf("unknown org: %d %v", n, err)
	}
}
