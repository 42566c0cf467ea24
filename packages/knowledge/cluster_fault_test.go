package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// faultDeadline is the deadline of every call of the fault test: an org on
// the stopped worker must have its answer (unavailable) before it.
const faultDeadline = 5 * time.Second

// One Citus worker stopped (its postmaster, by pid: a fast shutdown) and
// started again, under the knowledge service on the coordinator:
//
//   - the org whose shards are on the other worker stores and searches
//     with no error, before, during and after;
//   - the org on the stopped worker gets the retryable unavailable within
//     the call's deadline, for stores and searches, and its failed stores
//     write nothing;
//   - once the worker is back, the same service (no restart, no operator)
//     stores and searches for it again by itself;
//   - every store that was acknowledged, of either org, reads back.
//
// It stops a node of the cluster, so it runs only when asked
// (testenv.SkipUnlessFaults: go tool task test:cluster:faults).
func TestClusterWorkerStopped(t *testing.T) {
	testenv.SkipUnlessFaults(t, "stops a Citus worker")
	d := testenv.Postgres(t)
	f := &workerFault{t: t, svc: knowledge.New(d.AppPool(t), knowledge.Options{}), acked: map[uuid.UUID]uuid.UUID{}}
	orgs, ports := orgsOnTwoWorkers(t, d)
	up, down := orgs[0], orgs[1]
	for _, c := range orgs {
		f.mustStore(c, "up")
		f.mustSearch(c)
	}

	pid, start := workerPostmaster(t, d.URL, ports[1])
	t.Logf("org %s on worker %d, org %s on worker %d (postmaster %d): stopping it", up.OrgID, ports[0], down.OrgID, ports[1], pid)
	// SIGINT: a fast shutdown, sessions ended without waiting for clients.
	worker := testenv.StopNode(t, fmt.Sprintf("the worker on %d", ports[1]), pid, syscall.SIGINT, 30*time.Second, start)

	var slowest time.Duration
	for range 3 {
		f.mustStore(up, "down elsewhere")
		f.mustSearch(up)
		slowest = max(slowest, f.wantUnavailable(down, "store", func(ctx context.Context) error {
			_, err := f.svc.Store(ctx, down, knowledge.StoreInput{Title: "Fault down", Body: "Stored while its worker is down."})
			return err
		}))
		slowest = max(slowest, f.wantUnavailable(down, "search", func(ctx context.Context) error {
			_, err := f.svc.Search(ctx, down, knowledge.SearchInput{Query: "fault worker"})
			return err
		}))
	}
	t.Logf("the org on the stopped worker: 6 calls answered, the slowest in %v (deadline %v)", slowest.Round(time.Millisecond), faultDeadline)
	checkShardActivityWithoutWorker(t, d, ports[0], ports[1])
	pool := d.AppPool(t)
	if err := checkSpaces(pool); !errors.Is(err, knowledge.ErrSpacesUnread) {
		t.Errorf("an app's start check of the stored models with a worker stopped: %v, want ErrSpacesUnread (the app starts and checks again)", err)
	}

	worker.Start() // pg_ctl start -w: returns once it takes connections
	resumed := f.resume(up, down)
	t.Logf("the org on the restarted worker stored again %v after the worker was up", resumed.Round(time.Millisecond))
	if err := checkSpaces(pool); err != nil {
		t.Errorf("an app's start check of the stored models with every worker back: %v", err)
	}
	f.mustSearch(down)
	f.mustStore(up, "back")
	f.checkAcked(d, orgs)
}

// checkSpaces is an app's start check of the stored vectors' models
// (knowledge.CheckEmbeddingSpace) within faultDeadline.
func checkSpaces(pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	_, err := knowledge.CheckEmbeddingSpace(ctx, pool, embed.NewLocal(), false)
	return err
}

// checkShardActivityWithoutWorker checks Upkeep's figures of the shards
// (knowledge_shard_activity, one statement per worker: migration 00044)
// while the worker on port down is stopped: each of its shards is a row
// that says the worker did not answer, and each of the shards on port up
// has its figures, so Upkeep goes on with them.
func checkShardActivityWithoutWorker(t *testing.T, d *testenv.Database, up, down int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	rows, err := d.Pool.Query(ctx, `SELECT shard, port, ok, coalesce(error, '') FROM knowledge_shard_activity(ARRAY['knowledge'])`)
	if err != nil {
		t.Fatalf("shard activity with a worker stopped: %v", err)
	}
	seen := map[int]int{}
	for rows.Next() {
		var shard, msg string
		var port int
		var ok bool
		if err := rows.Scan(&shard, &port, &ok, &msg); err != nil {
			t.Fatal(err)
		}
		seen[port]++
		switch {
		case port == down && (ok || msg == ""):
			t.Errorf("shard %s on the stopped worker: ok %v, error %q; want not ok, with the worker's error", shard, ok, msg)
		case port == up && !ok:
			t.Errorf("shard %s on the running worker: not read (%s)", shard, msg)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen[up] == 0 || seen[down] == 0 {
		t.Errorf("shard activity rows per worker port: %v, want some on %d and on %d", seen, up, down)
	}
}

// workerFault calls the service for the fault test and keeps the entries
// of the stores it acknowledged.
type workerFault struct {
	t     *testing.T
	svc   *knowledge.Service
	acked map[uuid.UUID]uuid.UUID // entry -> org
}

// store stores for c within faultDeadline, remembering what is acknowledged.
func (f *workerFault) store(c knowledge.Caller, note string) error {
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	r, err := f.svc.Store(ctx, c, knowledge.StoreInput{Title: "Fault " + note, Body: "Stored while a worker is " + note + "."})
	if err == nil {
		f.acked[r.ID] = c.OrgID
	}
	return err
}

func (f *workerFault) mustStore(c knowledge.Caller, note string) {
	f.t.Helper()
	if err := f.store(c, note); err != nil {
		f.t.Errorf("org %s, store (%s): %v", c.OrgID, note, err)
	}
}

func (f *workerFault) mustSearch(c knowledge.Caller) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	if _, err := f.svc.Search(ctx, c, knowledge.SearchInput{Query: "fault worker"}); err != nil {
		f.t.Errorf("org %s, search: %v", c.OrgID, err)
	}
}

// wantUnavailable runs call with faultDeadline and checks it fails with
// the retryable unavailable before the deadline; it returns how long the
// answer took.
func (f *workerFault) wantUnavailable(c knowledge.Caller, what string, call func(context.Context) error) time.Duration {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	took := time.Since(start)
	var e *errs.Error
	switch {
	case !errors.As(err, &e) || e.Code != errs.CodeUnavailable || !e.Retryable:
		f.t.Errorf("org %s on the stopped worker, %s: %v after %v, want the retryable unavailable", c.OrgID, what, err, took)
	case took >= faultDeadline:
		f.t.Errorf("org %s on the stopped worker, %s: unavailable after %v, past the call's deadline", c.OrgID, what, took)
	}
	return took
}

// resume stores for down until it succeeds (30 s at most), the org up
// storing beside it without error, and returns how long it took.
func (f *workerFault) resume(up, down knowledge.Caller) time.Duration {
	f.t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < 30*time.Second {
		f.mustStore(up, "coming back elsewhere")
		if err = f.store(down, "back"); err == nil {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatalf("the org on the restarted worker still fails 30 s later: %v", err)
	return 0
}

// checkAcked reads back every acknowledged entry, and checks each org has
// no other entry (a store answered unavailable wrote nothing).
func (f *workerFault) checkAcked(d *testenv.Database, orgs [2]knowledge.Caller) {
	f.t.Helper()
	per := map[uuid.UUID]int{}
	for id, org := range f.acked {
		per[org]++
		if _, err := f.svc.Get(context.Background(), knowledge.Caller{OrgID: org}, id); err != nil {
			f.t.Errorf("acknowledged entry %s of org %s: %v", id, org, err)
		}
	}
	for _, c := range orgs {
		var n int
		if err := d.Pool.QueryRow(context.Background(), "SELECT count(*) FROM knowledge WHERE org_id = $1", c.OrgID).Scan(&n); err != nil {
			f.t.Fatal(err)
		}
		if n != per[c.OrgID] {
			f.t.Errorf("org %s has %d entries, %d stores acknowledged", c.OrgID, n, per[c.OrgID])
		}
	}
	f.t.Logf("%d acknowledged stores, all read back, none beside them", len(f.acked))
}

// orgsOnTwoWorkers makes orgs (an agent each) until two have their shards
// on two different workers, and gives them with their workers' ports.
func orgsOnTwoWorkers(t *testing.T, d *testenv.Database) ([2]knowledge.Caller, [2]int) {
	t.Helper()
	ctx := context.Background()
	var orgs [2]knowledge.Caller
	var ports [2]int
	for n := 0; n < 40 && ports[1] == 0; n++ {
		a := testfactory.Agent(ctx, t, d.Pool, nil)
		var port int
		if err := d.Pool.QueryRow(ctx, `SELECT nodeport FROM pg_dist_shard_placement
			WHERE shardid = get_shard_id_for_distribution_column('knowledge', $1::uuid)`, a.OrgID).Scan(&port); err != nil {
			t.Fatal(err)
		}
		i := 0
		if ports[0] != 0 {
			if port == ports[0] {
				continue
			}
			i = 1
		}
		orgs[i], ports[i] = knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}, port
	}
	if ports[1] == 0 {
		t.Fatal("no two orgs on two workers in 40 tries")
	}
	return orgs, ports
}

// workerPostmaster is the pid of the postmaster of the worker on port
// (its postmaster.pid's first line), found through the coordinator's URL,
// and the command that starts it again: pg_ctl beside its binary, as the
// data directory's owner (pg_ctl refuses to run as root).
func workerPostmaster(t *testing.T, coordinatorURL string, port int) (int, *exec.Cmd) {
	t.Helper()
	cfg, err := pgx.ParseConfig(coordinatorURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Port = uint16(port)
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var dir string
	if err := conn.QueryRow(context.Background(), "SHOW data_directory").Scan(&dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(fmt.Errorf("postmaster.pid: %w", err))
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("the worker's binary: %v (the test must run on the cluster's machine)", err)
	}
	args := []string{filepath.Join(filepath.Dir(exe), "pg_ctl"), "-D", dir, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start"}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	return pid, exec.Command(args[0], args[1:]...)
}
