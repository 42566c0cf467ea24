package jobs_test

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// recorder is an Observer that keeps the indexer and upkeep passes.
type recorder struct {
	jobs.NopObserver
	mu       sync.Mutex
	indexed  int
	indexErr []error
	upkeeps  []knowledge.UpkeepReport
	upkErr   []error
}

func (r *recorder) Indexed(n int, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.indexed += n
	if err != nil {
		r.indexErr = append(r.indexErr, err)
	}
}

func (r *recorder) Upkeep(rep knowledge.UpkeepReport, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.upkeeps = append(r.upkeeps, rep)
	if err != nil {
		r.upkErr = append(r.upkErr, err)
	}
}

func (r *recorder) snapshot() (indexed int, indexErrs int, upkeeps []knowledge.UpkeepReport, upkErrs []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.indexed, len(r.indexErr), slices.Clone(r.upkeeps), slices.Clone(r.upkErr)
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bundle) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, b.org).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// vacuums is how many times table was vacuumed (pg_stat_user_tables; a
// vacuum reports it as it ends).
func (b *bundle) vacuums(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(),
		"SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = $1", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	queuedSQL   = "SELECT count(*) FROM knowledge_index_queue WHERE org_id = $1"
	postingsSQL = "SELECT count(*) FROM knowledge_postings WHERE org_id = $1"
)

// TestWorkerIndexesAndKeepsTablesUp: a bulk load (one statement, past
// Upkeep's threshold) lands while a worker idles; it waits in the index
// queue, the worker indexes it within a few of its IndexInterval, search
// then finds it through the inverted index, the postings it wrote are
// vacuumed and the upkeep pass the bulk index asks for analyzes them, and
// Shutdown returns promptly. The load lands after the worker's first
// upkeep pass (the one at start) has ended, so that what is checked is
// the bulk index's upkeep.
// postingsOrShard is the postings table's name, or one of its shards' on a
// Citus cluster.
var postingsOrShard = regexp.MustCompile(`^knowledge_postings(_[0-9]+)?$`)

func TestWorkerIndexesAndKeepsTablesUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	rec := &recorder{}
	w := b.worker(t, embed.NewLocal(), func(o *jobs.WorkerOptions) {
		o.Observer = rec
		o.IndexInterval = 50 * time.Millisecond
		// Only the pass at start, and the one a bulk index asks for.
		o.UpkeepInterval = time.Hour
	})
	var atStart int
	eventually(t, 20*time.Second, "the upkeep pass at start ended", func() bool {
		_, _, reps, _ := rec.snapshot()
		atStart = len(reps)
		return atStart > 0
	})

	vacuumsBefore := b.vacuums(t, "knowledge_postings")

	// Past Upkeep's threshold (UpkeepBaseRows + UpkeepScale of n), and one
	// entry to look for, in one transaction so the indexer sees it all at
	// once. Statistics counters reach
	// pg_stat when a backend flushes them (up to 10 s after it goes idle):
	// pg_stat_force_next_flush makes this backend flush at once, so all of
	// it runs on one connection.
	const n = knowledge.UpkeepBaseRows * 6 / 5
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'entry ' || i, 'the flux capacitor needs 1.21 gigawatts, note ' || i, $2 FROM generate_series(1, $3) AS i`,
		b.org, b.agent, n); err != nil {
		t.Fatal(err)
	}
	target := testfactory.Entry(ctx, t, tx, &testfactory.EntryOpts{OrgID: b.org, AgentID: b.agent,
		Title: "tachyon emitter calibration", Body: "align the tachyon emitter before the warp test"}).ID
	var queued int
	if err := tx.QueryRow(ctx, queuedSQL, b.org).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if queued != n+1 {
		t.Fatalf("%d entries queued for the index, want %d", queued, n+1)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	conn.Release()

	eventually(t, 20*time.Second, "index queue drained", func() bool { return b.count(t, queuedSQL) == 0 })
	if p := b.count(t, postingsSQL); p == 0 {
		t.Fatal("queue drained but no postings written")
	}
	eventually(t, 5*time.Second, "observer told of every entry indexed", func() bool {
		indexed, _, _, _ := rec.snapshot()
		return indexed == n+1
	})

	// Found through the index: the queued tail is empty now.
	svc := knowledge.New(b.pool, knowledge.Options{})
	res, err := svc.Search(ctx, knowledge.Caller{OrgID: b.org, AgentID: b.agent}, knowledge.SearchInput{Query: "tachyon emitter"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 || res.Hits[0].ID != target || res.Hits[0].FullTextRank != 1 || res.Hits[0].Signals.BM25 == nil {
		t.Fatalf("search after indexing: %+v", res)
	}

	// The postings of the bulk index were vacuumed after it (the indexer
	// does it at the end of its pass; the upkeep pass the bulk index asked
	// for may vacuum them again) and analyzed by that upkeep pass. Which
	// pages a vacuum can mark all-visible depends on what else holds the
	// cluster's horizon or pins a page at that moment: the package's
	// TestIndexAllVacuumsWhatABulkLoadChurned checks the indexer's vacuum.
	eventually(t, 20*time.Second, "the postings vacuumed after the bulk index", func() bool {
		return b.vacuums(t, "knowledge_postings") > vacuumsBefore
	})
	eventually(t, 20*time.Second, "upkeep analyzed the postings after the bulk index", func() bool {
		_, _, reps, _ := rec.snapshot()
		for _, r := range reps[atStart:] {
			// On a Citus cluster upkeep works shard by shard and names
			// the shards it analyzed (knowledge_postings_102518).
			if slices.ContainsFunc(r.Analyzed, postingsOrShard.MatchString) {
				return true
			}
		}
		return false
	})
	if _, indexErrs, _, upkErrs := rec.snapshot(); indexErrs != 0 || len(upkErrs) != 0 {
		t.Fatalf("%d indexer errors, upkeep errors %v", indexErrs, upkErrs)
	}

	start := time.Now()
	w.Shutdown()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Shutdown took %s", d)
	}
}

// lockStats holds the org's search statistics row, which every indexer
// transaction of the org locks first: the indexer blocks as on a hung
// database. The lock is released when t ends or release is called.
func (b *bundle) lockStats(t *testing.T) (release func()) {
	t.Helper()
	ctx := context.Background()
	// The row exists once the org has been indexed.
	if _, err := knowledge.NewMaintenance(knowledge.New(b.pool, knowledge.Options{}), knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM knowledge_search_stats WHERE org_id = $1 FOR UPDATE", b.org); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

// waitingOnLock reports whether a backend of the test database waits for a
// lock (the blocked indexer).
func (b *bundle) waitingOnLock(t *testing.T) bool {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestIndexerPassTimesOutAndRecovers: a pass blocked by the database ends
// at IndexTimeout as a reported error, and the loop goes on: once the
// database answers again, the queue drains.
func TestIndexerPassTimesOutAndRecovers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(t, "first", "makes the org's statistics row")
	release := b.lockStats(t)
	b.insert(t, "blocked", "waits for the lock")

	rec := &recorder{}
	b.worker(t, embed.NewLocal(), func(o *jobs.WorkerOptions) {
		o.Observer = rec
		o.IndexInterval = 50 * time.Millisecond
		// Long enough for a pass on a loaded machine (at load 25 passes
		// of 200 ms timed out after the release too, and the queue never
		// drained), short enough that the blocked one reports soon.
		o.IndexTimeout = time.Second
		o.UpkeepInterval = time.Hour
	})
	eventually(t, 30*time.Second, "a timed-out pass reported", func() bool {
		_, errs, _, _ := rec.snapshot()
		return errs > 0
	})
	if q := b.count(t, queuedSQL); q != 1 {
		t.Fatalf("%d entries queued while the indexer is blocked, want 1", q)
	}
	release()
	eventually(t, time.Minute, "queue drained after the lock is gone", func() bool { return b.count(t, queuedSQL) == 0 })
}

// TestShutdownCancelsABlockedPass: Shutdown does not wait for a pass stuck
// in the database (IndexTimeout far away); the entry stays queued.
func TestShutdownCancelsABlockedPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(t, "first", "makes the org's statistics row")
	b.lockStats(t)
	b.insert(t, "blocked", "waits for the lock")

	w := b.worker(t, embed.NewLocal(), func(o *jobs.WorkerOptions) {
		o.IndexInterval = 50 * time.Millisecond
		o.IndexTimeout = time.Hour
		o.UpkeepInterval = time.Hour
	})
	eventually(t, 10*time.Second, "the indexer blocked on the lock", func() bool { return b.waitingOnLock(t) })
	start := time.Now()
	w.Shutdown()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Shutdown took %s with a blocked indexer pass", d)
	}
	if q := b.count(t, queuedSQL); q != 1 {
		t.Fatalf("%d entries queued after the cancelled pass, want 1", q)
	}
}
