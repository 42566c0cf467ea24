package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// The cluster tests run against the coordinator of a Citus cluster
// (go tool task cluster:up) named by CLUSTER_DATABASE_URL, the schema
// owner's URL (e.g. postgres://postgres@127.0.0.1:5440/knowledge?sslmode=disable),
// and are skipped without it. They work in orgs of their own in that
// database (the cluster's databases are not cloned per test).
func clusterURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("CLUSTER_DATABASE_URL")
	if u == "" {
		t.Skip("CLUSTER_DATABASE_URL is not set (go tool task cluster:up prints the URLs; docs/operators.md, \"Running on a cluster\")")
	}
	return u
}

// appURL is u as the application's role.
func appURL(u string) string {
	return regexp.MustCompile(`://[^@/]*@`).ReplaceAllString(u, "://"+db.DefaultAppRole+"@")
}

// stmtRecorder is a pgx tracer that records every statement (and batch
// statement) sent with its arguments.
type stmtRecorder struct {
	mu    sync.Mutex
	on    bool
	label string
	stmts []recorded
}

type recorded struct {
	label    string
	sql      string
	args     []any
	settings []recorded // the set_config statements sent before it in its step
}

func (r *stmtRecorder) add(sql string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		var settings []recorded
		for _, p := range r.stmts {
			if p.label == r.label && strings.Contains(p.sql, "set_config(") && !strings.Contains(p.sql, "app.org_id") {
				settings = append(settings, recorded{sql: p.sql, args: p.args})
			}
		}
		r.stmts = append(r.stmts, recorded{label: r.label, sql: sql, args: args, settings: settings})
	}
}

func (r *stmtRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL, d.Args)
	return ctx
}
func (r *stmtRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *stmtRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (r *stmtRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(d.SQL, d.Args)
}
func (r *stmtRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *stmtRecorder) step(label string) {
	r.mu.Lock()
	r.on, r.label = true, label
	r.mu.Unlock()
}

// notPlanned are statements with nothing to plan on the shards.
var notPlanned = regexp.MustCompile(`(?is)^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET\s|SELECT set_config\(|SELECT pg_advisory|SELECT 1\s*$)`)

// citusTasks reads an EXPLAIN (FORMAT JSON) of a statement: how many
// Citus scans it has (a subplan is one more) and each one's task count.
func citusTasks(plan any) (scans int, tasks []int) {
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, _ := x["Custom Plan Provider"].(string); strings.HasPrefix(p, "Citus") {
				scans++
			}
			if n, ok := x["Task Count"].(float64); ok {
				tasks = append(tasks, int(n))
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(plan)
	return scans, tasks
}

// TestClusterRouterPlans runs every per-org operation of the product (the
// MCP server's store, search with each of its lists, get, list, supersede,
// forget, stats; the worker's embedding writes and lexical indexing) for
// one org on the cluster, records each statement sent, and EXPLAINs it on
// the coordinator: every statement must be one Citus scan of one task (a
// router plan, run whole on the worker that holds the org).
func TestClusterRouterPlans(t *testing.T) {
	ownerURL := clusterURL(t)
	ctx := context.Background()
	rec := &stmtRecorder{}
	owner, err := db.Open(ctx, ownerURL, db.Tracer(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	app, err := db.Open(ctx, appURL(ownerURL), db.Tracer(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if citus, err := db.IsCitus(ctx, owner); err != nil || !citus {
		t.Fatalf("CLUSTER_DATABASE_URL is not a Citus coordinator (citus extension: %v, %v)", citus, err)
	}

	a := testfactory.Agent(ctx, t, owner, &testfactory.AgentOpts{Name: "planner"})
	org, c := a.OrgID, knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
	emb := embed.NewLocal()
	enq := &clusterEnqueuer{}
	svc := knowledge.New(app, knowledge.Options{Embedder: emb, Enqueuer: enq})
	ops := knowledge.New(owner, knowledge.Options{Embedder: emb})
	handler := jobs.NewEmbedHandler(owner, emb, jobs.HandlerOptions{})

	var ids []uuid.UUID
	rec.step("store")
	for i := range 4 {
		r, err := svc.Store(ctx, c, knowledge.StoreInput{
			Title: fmt.Sprintf("Router plan note %d", i),
			Body:  fmt.Sprintf("Citus routes every statement of org %d to one worker: shard pruning by org_id, co-located tables, body %d.", i, i),
			Tags:  []string{"citus", fmt.Sprintf("t%d", i)},
		})
		if err != nil {
			t.Fatalf("store: %v", err)
		}
		ids = append(ids, r.ID)
	}
	rec.step("worker: embed")
	if err := handler.Process(ctx, enq.take()); err != nil {
		t.Errorf("embed: %v", err)
	}
	rec.step("worker: index")
	if _, err := knowledge.NewMaintenance(ops, knowledge.MaintenanceConfig{}).IndexPending(ctx, org, 100); err != nil {
		t.Errorf("index: %v", err)
	}
	rec.step("search")
	if _, err := svc.Search(ctx, c, knowledge.SearchInput{Query: "router plan shard pruning", Tags: []string{"citus"}}); err != nil {
		t.Errorf("search: %v", err)
	}
	rec.step("search lists")
	if _, err := knowledge.SearchLists(ctx, svc, c, knowledge.SearchInput{Query: "co-located tables worker"}, 20); err != nil {
		t.Errorf("search lists: %v", err)
	}
	rec.step("get")
	if _, err := svc.Get(ctx, c, ids[0]); err != nil {
		t.Errorf("get: %v", err)
	}
	rec.step("list")
	if _, err := svc.List(ctx, c, knowledge.ListInput{}); err != nil {
		t.Errorf("list: %v", err)
	}
	rec.step("supersede")
	if _, err := svc.Supersede(ctx, c, ids[0], ids[1]); err != nil {
		t.Errorf("supersede: %v", err)
	}
	rec.step("forget")
	if _, err := svc.Forget(ctx, c, ids[2], "plan test", false); err != nil {
		t.Errorf("forget: %v", err)
	}
	rec.step("stats")
	if _, err := ops.Stats(ctx, org, 10); err != nil {
		t.Errorf("stats: %v", err)
	}
	rec.mu.Lock()
	rec.on = false
	stmts := rec.stmts
	rec.mu.Unlock()

	// The planner's reasons (Citus DEBUG messages) go with a failure.
	var notes []string
	ccfg, err := pgx.ParseConfig(ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	ccfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.Severity == "DEBUG" && !strings.Contains(n.Message, "StartTransaction") && !strings.Contains(n.Message, "CommitTransaction") {
			notes = append(notes, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET client_min_messages TO debug2"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1 FROM pg_type WHERE typname = 'vector'"); err != nil {
		t.Fatal(err)
	}
	pgxvecRegister(ctx, t, conn)
	seen := map[string]bool{}
	var bad []string
	checked, coordinatorOnly := 0, 0
	for _, s := range stmts {
		if notPlanned.MatchString(s.sql) || seen[s.sql] {
			continue
		}
		seen[s.sql] = true
		var raw []byte
		notes = nil
		// Planned as it ran: after the settings its step sent before it
		// (SearchConfig, ListConfig...), in a transaction rolled back.
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, c := range s.settings {
				if _, err := tx.Exec(ctx, c.sql, c.args...); err != nil {
					return err
				}
			}
			if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+s.sql, s.args...).Scan(&raw); err != nil {
				return err
			}
			return errRollback
		})
		if err == errRollback {
			err = nil
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("[%s] EXPLAIN failed: %v\n    %s\n    planner: %s", s.label, err, oneLine(s.sql), strings.Join(notes, " | ")))
			continue
		}
		var plan any
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		checked++
		scans, tasks := citusTasks(plan)
		if scans == 0 {
			// No distributed table: the coordinator answers alone (a
			// set_config, a catalog look-up, an advisory lock).
			coordinatorOnly++
			continue
		}
		if name := sqlcName(s.sql); crossOrg[name] != "" {
			t.Logf("cross-org on purpose: %s (%d tasks): %s", name, sum(tasks), crossOrg[name])
			continue
		}
		if scans != 1 || len(tasks) != 1 || tasks[0] != 1 {
			bad = append(bad, fmt.Sprintf("[%s] not a single-task router plan (Citus scans %d, task counts %v):\n    %s\n    planner: %s", s.label, scans, tasks, oneLine(s.sql), strings.Join(notes, " | ")))
		}
	}
	t.Logf("%d distinct statements planned: %d on the coordinator alone (no distributed table), %d not single-task router plans", checked, coordinatorOnly, len(bad))
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

func sqlcName(sql string) string {
	if m := regexp.MustCompile(`-- name: (\w+)`).FindStringSubmatch(sql); m != nil {
		return m[1]
	}
	return ""
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

var errRollback = errors.New("rollback")

// crossOrg are the statements that read every org on purpose, with why
// that is acceptable; each is logged, not failed.
var crossOrg = map[string]string{
	"SearchTableDocs": "the whole table's entry count for the vector plan's choice, read once per 30 s per process (search.go, tableDocsCache)",
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

type clusterEnqueuer struct {
	mu   sync.Mutex
	jobs []knowledge.EmbeddingJob
}

func (e *clusterEnqueuer) EnqueueEmbedding(_ context.Context, j knowledge.EmbeddingJob) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.jobs = append(e.jobs, j)
	return nil
}

func (e *clusterEnqueuer) take() []knowledge.EmbeddingJob {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs
	e.jobs = nil
	return j
}

func pgxvecRegister(ctx context.Context, t *testing.T, conn *pgx.Conn) {
	t.Helper()
	if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
		t.Fatal(err)
	}
}
