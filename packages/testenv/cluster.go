package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/db"
)

// Cluster mode: with TEST_CITUS_WORKERS set (host:port of each worker,
// comma-separated; `go tool task test:cluster` sets it from
// scripts/cluster.sh), TEST_DATABASE_URL names the coordinator of a Citus
// cluster and every test database is a Citus database of that cluster:
// the same database name on the coordinator and on every worker, the
// extensions made on each, the workers registered, the schema migrated
// (and so distributed) by the coordinator.
//
// Making that takes seconds (the distribution makes 32 shards of every
// table), so it is done once per migration hash, as a template database of
// the same name on every node, and each test gets a clone of it made on
// every node with CREATE DATABASE ... TEMPLATE: a Citus database holds its
// metadata (nodes, shards, placements) in its own catalogue, and reaches
// the workers' databases of its own name, so same-named clones on every
// node are again one consistent cluster database. The templates refuse
// connections (ALLOW_CONNECTIONS false) so that Citus's maintenance
// daemon, which connects to every database with the extension, cannot hold
// them open while they are cloned.

// CitusWorkers are the workers of the cluster mode (TEST_CITUS_WORKERS),
// none when it is unset.
func CitusWorkers() []string {
	var out []string
	for _, w := range strings.Split(os.Getenv("TEST_CITUS_WORKERS"), ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// citusShardCount is the shard count of the cluster mode's distributed
// tables (TEST_CITUS_SHARD_COUNT, a number), "" for Citus's default (32).
// Fewer shards make each test's clone of the template smaller and faster
// to make; the statements are routed to one shard all the same.
func citusShardCount() string {
	n := strings.TrimSpace(os.Getenv("TEST_CITUS_SHARD_COUNT"))
	if _, err := strconv.Atoi(n); err != nil {
		return ""
	}
	return n
}

// IsCluster says whether test databases are Citus databases (cluster mode).
func IsCluster() bool { return len(CitusWorkers()) > 0 }

// nodeURL is base (the coordinator's admin URL) on worker hostport.
func nodeURL(base, hostport string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return "", fmt.Errorf("TEST_CITUS_WORKERS: %q is not host:port", hostport)
	}
	u.Host = hostport
	return u.String(), nil
}

// onNodes runs f with an admin connection to every node of the cluster,
// the workers first and the coordinator (admin) last.
func onNodes(ctx context.Context, admin *pgx.Conn, f func(c *pgx.Conn) error) error {
	for _, w := range CitusWorkers() {
		u, err := nodeURL(DatabaseURL(), w)
		if err != nil {
			return err
		}
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return fmt.Errorf("testenv: cannot reach Citus worker %s: %w", w, err)
		}
		err = f(c)
		c.Close(context.Background())
		if err != nil {
			return fmt.Errorf("testenv: worker %s: %w", w, err)
		}
	}
	return f(admin)
}

// makeClusterTemplate makes the template name on every node: the
// extensions on each, the workers registered, migrated by the coordinator.
func makeClusterTemplate(ctx context.Context, admin *pgx.Conn, base, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	err := onNodes(ctx, admin, func(c *pgx.Conn) error {
		// A half-made template of a killed run may be sealed on some nodes.
		var sealed bool
		if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&sealed); err != nil {
			return err
		}
		if sealed {
			if _, err := c.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false"); err != nil {
				return err
			}
		}
		if err := dropDatabase(ctx, c, name); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, "CREATE DATABASE "+id); err != nil {
			return err
		}
		u, err := urlFor(c.Config().ConnString(), name)
		if err != nil {
			return err
		}
		nc, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer nc.Close(context.Background())
		for _, ext := range []string{"citus", "vector", "pg_trgm"} { // citus first
			if _, err := nc.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+ext); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := citusShardCount(); n != "" {
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+id+" SET citus.shard_count = "+n); err != nil {
			return err
		}
	}
	u, err := urlFor(base, name)
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, u)
	if err != nil {
		return err
	}
	defer pool.Close()
	host, port, err := net.SplitHostPort(admin.Config().Host + ":" + fmt.Sprint(admin.Config().Port))
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2::int)", host, port); err != nil {
		return err
	}
	for _, w := range CitusWorkers() {
		h, p, _ := net.SplitHostPort(w)
		if _, err := pool.Exec(ctx, "SELECT citus_add_node($1, $2::int)", h, p); err != nil {
			return fmt.Errorf("citus_add_node %s: %w", w, err)
		}
	}
	if _, err := db.Migrate(ctx, pool); err != nil {
		return err
	}
	return db.EnsureRoles(ctx, pool, db.DefaultRoles())
}

// sealTemplate marks name a template on every node that takes no
// connections, and ends the ones it has (Citus's maintenance daemon).
func sealTemplate(ctx context.Context, admin *pgx.Conn, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	return onNodes(ctx, admin, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
			return err
		}
		_, err := c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
		return err
	})
}

// SkipOnCluster skips t in cluster mode, printing why: for a test whose
// subject cannot hold on Citus as it does on one PostgreSQL (what it
// checks is a single node's plan, catalogue or lock). docs/operators.md
// lists these tests.
func SkipOnCluster(t testing.TB, why string) {
	t.Helper()
	if IsCluster() {
		t.Skip("not on a Citus cluster: " + why)
	}
}

// SkipUnlessFaults skips t unless the fault tests were asked for:
// TEST_CLUSTER_FAULTS=1 in cluster mode (go tool task test:cluster:faults).
// A fault test stops a node of the cluster for seconds, which would fail
// any other test using it then, so no ordinary run starts one.
func SkipUnlessFaults(t testing.TB, what string) {
	t.Helper()
	if !IsCluster() || os.Getenv("TEST_CLUSTER_FAULTS") != "1" {
		t.Skip(what + ": runs with TEST_CLUSTER_FAULTS=1 in cluster mode (go tool task test:cluster:faults)")
	}
}

// RedisClusterURL is the Redis Cluster of the fault tests
// (TEST_REDIS_CLUSTER_URL, a redis+cluster:// URL naming its masters;
// scripts/test-cluster.sh sets it from scripts/cluster.sh), "" when unset.
// Other tests lease the single Redis (LeaseRedis) in every mode.
func RedisClusterURL() string { return os.Getenv("TEST_REDIS_CLUSTER_URL") }

// NodeStop is a node of the cluster stopped by a fault test (StopNode).
type NodeStop struct {
	t       testing.TB
	what    string
	start   *exec.Cmd
	stopped bool
}

// StopNode stops a node of the cluster, the process pid (what names it in
// failures), with sig, and waits until the process is gone (within at
// most). start is the command that starts it again: Start runs it, and so
// does t's cleanup if the test has not, so the cluster gets its node back
// whatever happens.
func StopNode(t testing.TB, what string, pid int, sig syscall.Signal, within time.Duration, start *exec.Cmd) *NodeStop {
	t.Helper()
	n := &NodeStop{t: t, what: what, start: start, stopped: true}
	t.Cleanup(n.Start)
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("testenv: stopping %s (pid %d): %v", what, pid, err)
	}
	for end := time.Now().Add(within); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("testenv: %s (pid %d) still runs %v after %v", what, pid, within, sig)
		}
	}
	return n
}

// Start starts the node again with the command given to StopNode (once),
// and returns when the command does.
func (n *NodeStop) Start() {
	if !n.stopped {
		return
	}
	n.stopped = false
	if out, err := n.start.CombinedOutput(); err != nil {
		n.t.Errorf("testenv: starting %s again: %v: %s", n.what, err, out)
	}
}
