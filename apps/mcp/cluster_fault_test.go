package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// One master of the Redis Cluster stopped (its pid, SIGTERM) and started
// again under a running MCP server and embeddings worker, both on the
// cluster (REDIS_URL redis+cluster://, as deployed). Redis is an
// accelerator, never the record (docs/scale-out.md, "Faults"), so while the
// master is down every store (with a client token) and search answers;
// a store retried with its token is answered with its entry (PostgreSQL's
// unique client token stands in for the idempotence key); the rate limiter
// lets calls through (fail open, counted). Once the master is back the
// worker's reconciler enqueues what the stores could not, and every
// acknowledged entry is embedded, none lost and none doubled.
//
// The master stopped is the one holding the embeddings queue, so the
// stores' enqueues fail from the first call; with no replicas the rest of
// the cluster refuses every command too once it marks the master failed
// (cluster-node-timeout), so the calls meet both kinds of failure.
func TestClusterRedisMasterStopped(t *testing.T) {
	testenv.SkipUnlessFaults(t, "stops a Redis master")
	rurl := testenv.RedisClusterURL()
	if rurl == "" {
		t.Fatal("TEST_REDIS_CLUSTER_URL is unset: run it with go tool task test:cluster:faults")
	}
	ctx := context.Background()
	d := testenv.Postgres(t)
	tok := testfactory.Token(ctx, t, d.Pool, &testfactory.TokenOpts{
		Scopes: []string{tenancy.ScopeKnowledgeRead, tenancy.ScopeKnowledgeWrite}})
	srv := startRun(t, map[string]string{"MCP_ADDR": "127.0.0.1:0", "DATABASE_URL": d.AppURL(), "REDIS_URL": rurl})
	rcfg, err := knowledge.ParseRedisURL(rurl)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, rcfg, d.Pool)
	c := &faultClient{t: t, cs: mcpSession(t, srv.base, tok.Text), run: uuid.NewString()[:8]}

	c.store("before", uuid.New())
	before := c.store("before, replayed after", uuid.New())
	c.search()

	cc, ok := rcfg.Client().(*redis.ClusterClient)
	if !ok {
		t.Fatalf("%s is not a Redis Cluster URL", rurl)
	}
	defer cc.Close()
	addr, pid, start := redisMasterFor(t, cc, "asynq:{"+jobs.Queue+"}:pending")
	t.Logf("stopping the Redis master %s (pid %d), which holds the embeddings queue", addr, pid)
	// SIGTERM: Redis's own shutdown, its append-only file written.
	master := testenv.StopNode(t, "the Redis master "+addr, pid, syscall.SIGTERM, 15*time.Second, start)

	// Calls for a while: the first ones meet the stopped master, the later
	// ones (past the node timeout) a cluster that refuses every command.
	var during []storeAnswer
	var timed []string
	c.slowest, c.timed = 0, &timed
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
		token := uuid.New()
		r := c.store("during", token)
		if again := c.store("during", token); again.ID != r.ID {
			t.Errorf("a store retried with its client token while Redis is down made %s, the first made %s", again.ID, r.ID)
		}
		c.search()
		during = append(during, r)
	}
	c.timed = nil
	t.Logf("%d stores (each retried with its token) and %d searches while the master was down: every one answered, the slowest in %v (%s)",
		len(during), len(during), c.slowest.Round(time.Millisecond), strings.Join(timed, ", "))

	restarted := time.Now()
	master.Start()
	waitClusterOK(t, addr)
	t.Logf("the cluster was ok again %v after the master's start", time.Since(restarted).Round(time.Millisecond))
	c.store("after", uuid.New())
	c.search()
	if again := c.store("before, replayed after", before.token); again.ID != before.ID {
		t.Errorf("a store of before the stop retried after it made %s, the first made %s", again.ID, before.ID)
	}
	for _, r := range during {
		if again := c.store("during", r.token); again.ID != r.ID {
			t.Errorf("a store of the outage retried after it made %s, the first made %s", again.ID, r.ID)
		}
	}
	waitEmbedded(t, d, tok.OrgID, c.acked, restarted)

	if n := failOpenCount(t, srv.base); n == 0 {
		t.Error("the rate limiter never failed open: the calls did not meet the stopped master")
	}
	if !strings.Contains(srv.logs.String(), "idempotence key unavailable") {
		t.Error("no store went on without its idempotence key: the calls did not meet the stopped master")
	}
}

// faultClient calls the knowledge tools over MCP, failing the test on any
// error, and keeps what was acknowledged.
type faultClient struct {
	t       *testing.T
	cs      *mcp.ClientSession
	run     string                 // in every title, so the search has something of its own
	acked   map[uuid.UUID]struct{} // entries of acknowledged stores
	slowest time.Duration          // the slowest call since it was zeroed
	timed   *[]string              // when set, each call's tool and time are added
}

// storeAnswer is a store's answer with the client token it was called with.
type storeAnswer struct {
	knowledge.StoreResult
	token uuid.UUID
}

func (c *faultClient) store(note string, token uuid.UUID) storeAnswer {
	c.t.Helper()
	var r knowledge.StoreResult
	// The token in the text: no store is a duplicate of another (the same
	// text twice is the same call, retried).
	c.call(kt.ToolStore, map[string]any{"title": "Redis fault " + c.run + " " + note + " " + token.String()[:8],
		"body": "Stored " + note + " a Redis master's stop, call " + token.String() + ".", "clientToken": token.String()}, &r)
	if r.ID == uuid.Nil {
		c.t.Fatalf("store %s: no entry id in the answer", note)
	}
	if c.acked == nil {
		c.acked = map[uuid.UUID]struct{}{}
	}
	c.acked[r.ID] = struct{}{}
	return storeAnswer{r, token}
}

func (c *faultClient) search() {
	c.t.Helper()
	var r struct {
		Results []json.RawMessage `json:"results"`
	}
	c.call(kt.ToolSearch, map[string]any{"query": "redis fault " + c.run}, &r)
}

// call calls tool within 20 s and decodes its structured answer into out.
func (c *faultClient) call(tool string, args map[string]any, out any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	took := time.Since(start)
	c.slowest = max(c.slowest, took)
	if c.timed != nil {
		*c.timed = append(*c.timed, fmt.Sprintf("%s %v", tool, took.Round(time.Millisecond)))
	}
	if err != nil {
		c.t.Fatalf("%s after %v: %v", tool, took, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		c.t.Fatalf("%s after %v: a tool error: %s", tool, took, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		c.t.Fatalf("%s: answer %s: %v", tool, b, err)
	}
}

// mcpSession is an MCP client session over HTTP with token, closed when t
// ends.
func mcpSession(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "fault-test", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             base + server.PathMCP,
		HTTPClient:           &http.Client{Transport: bearer(token), Timeout: 30 * time.Second},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// bearer sends its token with every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// startWorker runs the embeddings worker (the asynq server and the
// reconciler, as apps/worker does) on the cluster until t ends, with a
// short reconciler interval and grace so the test need not wait minutes.
func startWorker(t *testing.T, rcfg knowledge.RedisConfig, pool *pgxpool.Pool) {
	t.Helper()
	logs := &testenv.Buffer{}
	w := jobs.NewWorker(rcfg.Asynq(), pool, embed.NewLocal(), jobs.WorkerOptions{
		ReconcileInterval: 500 * time.Millisecond,
		Reconciler:        jobs.ReconcilerOptions{Grace: time.Second, Cooldown: time.Second},
		ShutdownTimeout:   2 * time.Second,
		Logger:            slog.New(slog.NewJSONHandler(logs, nil)),
	})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Shutdown()
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
}

// redisMasterFor is the address and pid of the master that holds key's
// slot, and the command that starts it again: its binary with the
// settings it runs with, read from the server itself.
func redisMasterFor(t *testing.T, cc *redis.ClusterClient, key string) (string, int, *exec.Cmd) {
	t.Helper()
	ctx := context.Background()
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	addr := m.Options().Addr
	pid, err := strconv.Atoi(infoField(info, "process_id"))
	if err != nil {
		t.Fatalf("INFO server of %s: process_id: %v", addr, err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatalf("the Redis master's binary: %v (the test must run on the cluster's machine)", err)
	}
	args := []string{"--daemonize", "yes"}
	for _, name := range []string{"bind", "port", "dir", "cluster-enabled", "cluster-config-file",
		"cluster-node-timeout", "appendonly", "save", "pidfile", "logfile"} {
		v, err := m.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--"+name, v[name])
	}
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = "redis-server" // Debian's binary is one for several tools, chosen by its name
	return addr, pid, cmd
}

func infoField(info, name string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// waitClusterOK waits until the node at addr answers and says the cluster
// is ok (every slot served).
func waitClusterOK(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var info string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		info, _ = c.ClusterInfo(context.Background()).Result()
		if infoField(info, "cluster_state") == "ok" {
			return
		}
	}
	t.Fatalf("the cluster is not ok 60 s after the master's start: %q", infoField(info, "cluster_state"))
}

// waitEmbedded waits until every entry of acked is embedded, and checks the
// org has no other entry (a retried store made none).
func waitEmbedded(t *testing.T, d *testenv.Database, org uuid.UUID, acked map[uuid.UUID]struct{}, since time.Time) {
	t.Helper()
	ids := make([]uuid.UUID, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	var ready, all, ours int
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := d.Pool.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE id = ANY($2) AND embedding_status = 'ready'), count(*), count(*) FILTER (WHERE id = ANY($2))
			FROM knowledge WHERE org_id = $1`, org, ids).Scan(&ready, &all, &ours)
		if err != nil {
			t.Fatal(err)
		}
		if ready == len(ids) || time.Now().After(end) {
			break
		}
	}
	if ours != len(ids) || all != len(ids) {
		t.Errorf("%d acknowledged entries: %d of them stored, %d entries in the org", len(ids), ours, all)
	}
	if ready != len(ids) {
		t.Fatalf("%d of %d acknowledged entries embedded 90 s after the master's start", ready, len(ids))
	}
	t.Logf("all %d acknowledged entries embedded %v after the master's start", len(ids), time.Since(since).Round(time.Millisecond))
}

// failOpenCount is the server's count of calls the rate limiter let
// through because Redis did not answer (its /metrics).
func failOpenCount(t *testing.T, base string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, `mcp_rate_limit_fail_open_total{reason="redis"} `); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}
