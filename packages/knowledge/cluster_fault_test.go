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

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// One Citus worker stopped (its postmaster, by pid: a fast shutdown) and
// started again, under the knowledge service on the coordinator: the org
// whose shards are on the other worker stores and searches with no error;
// the org on the stopped worker gets the retryable unavailable within the
// call's deadline and changes nothing; once the worker is back, the same
// service stores for it again by itself (no restart, no operator); every
// store that was acknowledged is there afterwards.
//
// It stops a node of the shared loopback cluster (seconds), so it runs only
// when asked: TEST_CLUSTER_FAULTS=1 with the cluster mode (go tool task
// test:cluster:faults).
func TestClusterWorkerStopped(t *testing.T) {
	if !testenv.IsCluster() || os.Getenv("TEST_CLUSTER_FAULTS") != "1" {
		t.Skip("stops a Citus worker: TEST_CLUSTER_FAULTS=1 in cluster mode (go tool task test:cluster:faults)")
	}
	ctx := context.Background()
	d := testenv.Postgres(t)
	svc := knowledge.New(d.AppPool(t), knowledge.Options{})

	// Two orgs, one on each of two workers.
	var orgs [2]knowledge.Caller
	var ports [2]int
	for n := 0; n < 40 && ports[1] == 0; n++ {
		a := testfactory.Agent(ctx, t, d.Pool, nil)
		var port int
		if err := d.Pool.QueryRow(ctx, `SELECT nodeport FROM pg_dist_shard_placement
			WHERE shardid = get_shard_id_for_distribution_column('knowledge', $1)`, a.OrgID).Scan(&port); err != nil {
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
	up, down := orgs[0], orgs[1]
	acked := map[uuid.UUID]uuid.UUID{} // entry -> org
	store := func(c knowledge.Caller, deadline time.Duration, note string) (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		r, err := svc.Store(cctx, c, knowledge.StoreInput{Title: "Fault " + note, Body: "Stored while a worker is " + note + "."})
		if err == nil {
			acked[r.ID] = c.OrgID
		}
		return time.Since(start), err
	}
	search := func(c knowledge.Caller, deadline time.Duration) error {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		_, err := svc.Search(cctx, c, knowledge.SearchInput{Query: "fault worker"})
		return err
	}
	for _, c := range orgs {
		if _, err := store(c, 10*time.Second, "up"); err != nil {
			t.Fatalf("before the stop: %v", err)
		}
	}

	dir, pid := workerPostmaster(t, d.URL, ports[1])
	t.Logf("org %s on worker %d, org %s on worker %d (postmaster %d): stopping it", up.OrgID, ports[0], down.OrgID, ports[1], pid)
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		out, err := exec.Command("runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl", "-D", dir,
			"-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start").CombinedOutput()
		if err != nil {
			t.Errorf("starting the worker again: %v: %s", err, out)
		}
	}
	t.Cleanup(restart)                                        // whatever happens, the shared cluster gets its worker back
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil { // fast shutdown
		t.Fatal(err)
	}
	for i := 0; i < 300 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}

	const deadline = 5 * time.Second
	for i := range 3 {
		if _, err := store(up, deadline, "down elsewhere"); err != nil {
			t.Errorf("org on the running worker, store %d: %v", i, err)
		}
		if err := search(up, deadline); err != nil {
			t.Errorf("org on the running worker, search %d: %v", i, err)
		}
		took, err := store(down, deadline, "down")
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.CodeUnavailable {
			t.Errorf("org on the stopped worker, store %d: %v, want unavailable", i, err)
		} else if took >= deadline {
			t.Errorf("org on the stopped worker, store %d: unavailable after %v, past the call's deadline", i, took)
		}
		if err := search(down, deadline); !errors.As(err, &e) || e.Code != errs.CodeUnavailable {
			t.Errorf("org on the stopped worker, search %d: %v, want unavailable", i, err)
		}
	}

	restart()
	var err error
	resumed := time.Now()
	for time.Since(resumed) < 30*time.Second {
		if _, err = store(down, deadline, "back"); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the org on the restarted worker still fails 30 s later: %v", err)
	}
	t.Logf("the org on the restarted worker stored again %v after the start", time.Since(resumed).Round(time.Millisecond))
	if err := search(down, deadline); err != nil {
		t.Errorf("search after the restart: %v", err)
	}
	for id, org := range acked {
		if _, err := svc.Get(ctx, knowledge.Caller{OrgID: org, AgentID: uuid.Nil}, id); err != nil {
			t.Errorf("acknowledged entry %s of org %s: %v", id, org, err)
		}
	}
	t.Logf("%d acknowledged stores, all read back", len(acked))
}

// workerPostmaster is the data directory and postmaster pid of the worker
// on port (its postmaster.pid's first line).
func workerPostmaster(t *testing.T, coordinatorURL string, port int) (string, int) {
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
	return dir, pid
}
