package data

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestAStatementAcrossShardsKeepsOneConnectionPerWorker: on a Citus
// cluster a session runs a statement across shards over one connection to
// each worker, the one it keeps between transactions, however long the
// shards' tasks wait (db/migrations/00053). Citus's default opens one more
// a task that waits past citus.executor_slow_start_interval, up to 16 a
// worker, and closes them when the transaction ends: under load every
// such statement started and ended backends on the workers. Here the
// interval is 0, so without the setting the statement opens one
// connection for each of a worker's shards at once.
func TestAStatementAcrossShardsKeepsOneConnectionPerWorker(t *testing.T) {
	d := testenv.Postgres(t)
	if !testenv.IsCluster() {
		t.Skip("a Citus cluster's executor (go tool task test:cluster)")
	}
	t.Parallel()
	ctx := context.Background()
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET citus.executor_slow_start_interval = 0"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var rows, gpid int64
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "SELECT citus_backend_gpid()").Scan(&gpid); err != nil {
		t.Fatal(err)
	}
	// The session's connections, open until its transaction ends, counted
	// on every worker from another session.
	var shards, conns []int64
	q := fmt.Sprintf(`SELECT (SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
	                           WHERE s.logicalrelid = 'knowledge'::regclass AND p.groupid = n.groupid),
	                         (SELECT result::bigint FROM run_command_on_workers(
	                             $$SELECT count(*) FROM pg_stat_activity WHERE application_name = 'citus_internal gpid=%d'$$)
	                          r WHERE r.nodename = n.nodename AND r.nodeport = n.nodeport)
	                  FROM pg_dist_node n WHERE n.groupid <> 0 AND n.noderole = 'primary' ORDER BY n.nodeport`, gpid)
	res, err := d.Pool.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	for res.Next() {
		var s, c int64
		if err := res.Scan(&s, &c); err != nil {
			t.Fatal(err)
		}
		shards, conns = append(shards, s), append(conns, c)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if len(conns) < 2 {
		t.Fatalf("%d workers: the test needs a cluster of two", len(conns))
	}
	for i, c := range conns {
		if shards[i] < 2 {
			t.Fatalf("worker %d holds %d shards of knowledge: with one, one connection is all a statement could use, and the test proves nothing", i, shards[i])
		}
		if c != 1 {
			t.Errorf("worker %d: the statement across its %d shards held %d connections of the session, want 1", i, shards[i], c)
		}
	}
}
