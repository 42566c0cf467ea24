package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

func TestFormatPayloadIsOneLine(t *testing.T) {
	t.Parallel()
	org := uuid.New()
	var js []knowledge.EmbeddingJob
	for i := range 32 {
		js = append(js, knowledge.EmbeddingJob{OrgID: org, EntryID: uuid.New(), Generation: int32(1 + i%2)})
	}
	b, _ := json.Marshal(jobs.BatchPayload{Jobs: js})
	got := jobs.FormatPayload(jobs.TypeEmbedBatch, b)
	for _, want := range []string{"batch of 32 entries", org.String(), "gen 1-2", js[0].EntryID.String(), "(+30)"} {
		if !strings.Contains(got, want) {
			t.Errorf("batch summary %q lacks %q", got, want)
		}
	}
	if len(got) > 220 || strings.Contains(got, "\n") {
		t.Errorf("batch summary is not one short line (%d bytes): %q", len(got), got)
	}
	e, _ := json.Marshal(js[3])
	if got := jobs.FormatPayload(jobs.TypeEmbedEntry, e); !strings.HasPrefix(got, "entry "+js[3].EntryID.String()) {
		t.Errorf("entry summary %q", got)
	}
	if got := jobs.FormatPayload("other", []byte{0xff, 0x00}); !strings.Contains(got, "binary") {
		t.Errorf("binary payload: %q", got)
	}
	if got := jobs.FormatResult(jobs.TypeEmbedBatch, nil); got != "no result recorded" {
		t.Errorf("empty result: %q", got)
	}
	if got := jobs.FormatResult(jobs.TypeEmbedBatch, []byte(`{"ready":3,"failed":1,"stale":2}`)); got != "3 ready, 1 failed, 2 stale (nothing to do)" {
		t.Errorf("result: %q", got)
	}
	if got := jobs.FormatResult(jobs.TypeEmbedBatch, []byte(`{"ready":3,"similar":2}`)); got != "3 ready, 2 duplicate checks done" {
		t.Errorf("result with checks: %q", got)
	}
}

// The dashboard names orgs beside their whole ids; an org it cannot name
// keeps its id alone.
func TestFormatPayloadNamesOrgs(t *testing.T) {
	t.Parallel()
	named, unnamed := uuid.New(), uuid.New()
	names := func(id uuid.UUID) string {
		if id == named {
			return "Acme Fleet"
		}
		return ""
	}
	e, _ := json.Marshal(knowledge.EmbeddingJob{OrgID: named, EntryID: uuid.New(), Generation: 2})
	if got, want := jobs.FormatPayloadNamed(jobs.TypeEmbedEntry, e, names), "org Acme Fleet ("+named.String()+")"; !strings.HasSuffix(got, want) {
		t.Errorf("entry: %q, want it to end with %q", got, want)
	}
	b, _ := json.Marshal(jobs.BatchPayload{Jobs: []knowledge.EmbeddingJob{{OrgID: unnamed, EntryID: uuid.New(), Generation: 1}}})
	if got, want := jobs.FormatPayloadNamed(jobs.TypeEmbedBatch, b, names), "org "+unnamed.String()+" · gen 1"; !strings.Contains(got, want) {
		t.Errorf("batch of an unnamed org: %q, want %q in it", got, want)
	}
}

// TaskIDs of one org's entries must differ before the first "-": the
// dashboard shows only that part.
func TestTaskIDsAreDistinctWhereTheDashboardCutsThem(t *testing.T) {
	t.Parallel()
	org := uuid.New()
	a := jobs.TaskID(knowledge.EmbeddingJob{OrgID: org, EntryID: uuid.New(), Generation: 1})
	b := jobs.TaskID(knowledge.EmbeddingJob{OrgID: org, EntryID: uuid.New(), Generation: 1})
	cut := func(s string) string { s, _, _ = strings.Cut(s, "-"); return s }
	if cut(a) == cut(b) {
		t.Fatalf("%q and %q show the same id %q", a, b, cut(a))
	}
}

func TestCompletedBatchRecordsItsOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one, two := b.store(t, "one", "first body"), b.store(t, "two", "second body")
	b.worker(t, newFake(), nil)
	b.waitStatus(t, knowledge.EmbeddingReady, 20*time.Second, one.EntryID, two.EntryID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, err := b.insp.ListCompletedTasks(jobs.Queue)
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, ti := range done {
			var r jobs.BatchResult
			if ti.Type == jobs.TypeEmbedBatch && json.Unmarshal(ti.Result, &r) == nil {
				ready += r.Ready
			}
		}
		if ready == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed batches record %d ready entries, want 2 (%d tasks)", ready, len(done))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The leftover after `ctl reembed`: an archived batch of failed entries stays
// while the failure is open, and goes once a re-embed made it stale.
func TestPruneArchivedAfterReembed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := setup(t) // another org's archived batch (in its own Redis) stays put
	ctx := context.Background()
	fake := newFake()
	fake.fail = permanentIf("refuse")
	bad := b.store(t, "bad", "refuse this input")
	w := b.worker(t, fake, nil)
	b.waitStatus(t, knowledge.EmbeddingFailed, 20*time.Second, bad.EntryID)
	w.Shutdown()
	archived := func() int {
		ts, err := b.insp.ListArchivedTasks(jobs.Queue)
		if err != nil {
			t.Fatal(err)
		}
		return len(ts)
	}
	if n := archived(); n != 1 {
		t.Fatalf("%d archived tasks, want the failed batch", n)
	}
	// A task of another org in the same queue is not ours to prune.
	foreign := knowledge.EmbeddingJob{OrgID: other.org, EntryID: uuid.New(), Generation: 1}
	ft, _ := jobs.NewEmbedBatchTask([]knowledge.EmbeddingJob{foreign}, jobs.BatchOptions{})
	info, err := b.client.Enqueue(ft)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.insp.ArchiveTask(jobs.Queue, info.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := jobs.PruneArchived(ctx, b.pool, b.insp, b.org); err != nil || n != 0 {
		t.Fatalf("prune before re-embed: %d %v, want 0 (the failure is still open)", n, err)
	}
	if n, err := jobs.ReembedModel(ctx, b.pool, b.enq, b.org, fake.Model(), false); err != nil || n != 1 {
		t.Fatalf("reembed: %d %v", n, err)
	}
	if n, err := jobs.PruneArchived(ctx, b.pool, b.insp, b.org); err != nil || n != 1 {
		t.Fatalf("prune after re-embed: %d %v, want 1", n, err)
	}
	ts, err := b.insp.ListArchivedTasks(jobs.Queue)
	if err != nil || len(ts) != 1 || ts[0].ID != info.ID {
		t.Fatalf("archived after prune: %v %v, want only the other org's task", ts, err)
	}
}

// A purge deletes the tasks whose every job is an erased entry, keeps
// batches that also hold surviving entries (their erased jobs do nothing),
// and never touches another org's tasks.
func TestPurgeTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gone, kept := b.store(t, "gone", "erased"), b.insert(t, "kept", "survives")
	other := knowledge.EmbeddingJob{OrgID: uuid.New(), EntryID: gone.EntryID, Generation: 1} // same entry id, another org
	enqueue := func(js ...knowledge.EmbeddingJob) string {
		task, _ := jobs.NewEmbedBatchTask(js, jobs.BatchOptions{})
		info, err := b.client.Enqueue(task)
		if err != nil {
			t.Fatal(err)
		}
		return info.ID
	}
	onlyGone, mixed, foreign := enqueue(gone), enqueue(gone, kept), enqueue(other)
	if err := b.insp.ArchiveTask(jobs.Queue, onlyGone); err != nil {
		t.Fatal(err)
	}
	erased := func(j knowledge.EmbeddingJob) bool { return j.EntryID == gone.EntryID }
	deleted, keptN, err := jobs.PurgeTasks(ctx, b.insp, b.org, erased)
	if err != nil || deleted != 2 || keptN != 1 { // the archived batch and the aggregating entry task; the mixed batch kept
		t.Fatalf("PurgeTasks: deleted %d, kept %d, %v", deleted, keptN, err)
	}
	for id, want := range map[string]bool{onlyGone: false, mixed: true, foreign: true} {
		_, err := b.insp.GetTaskInfo(jobs.Queue, id)
		if (err == nil) != want {
			t.Errorf("task %s: exists %v, want %v", id, err == nil, want)
		}
	}
	if _, err := b.insp.GetTaskInfo(jobs.Queue, jobs.TaskID(gone)); err == nil {
		t.Error("the erased entry's waiting task is still there")
	}
}
