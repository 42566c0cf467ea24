package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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

// last is the last statement recorded but a ROLLBACK (the failed one),
// on one line.
func (r *stmtRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.stmts) - 1; i >= 0; i-- {
		if !strings.EqualFold(strings.TrimSpace(r.stmts[i].sql), "rollback") {
			return oneLine(r.stmts[i].sql)
		}
	}
	return ""
}

func (r *stmtRecorder) step(label string) {
	r.mu.Lock()
	r.on, r.label = true, label
	r.mu.Unlock()
}

// shardNamed finds a shard's name (a distributed table's name and its
// shard id) in a statement.
var shardNamed = regexp.MustCompile(`\b(?:knowledge|org)[a-z_]*_[0-9]{6,}\b`)

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

// TestClusterRouterPlans runs every per-org operation of the product for
// one org on the cluster (planRun.steps: the MCP server's tools, the
// worker's embedding writes and lexical indexing, the operators' stats),
// records each statement sent, and EXPLAINs it on the coordinator: every
// statement must be one Citus scan of one task (a router plan, run whole
// on the worker that holds the org). A statement sent to the org's worker
// renamed to its shards (orgcall.QueryShards) names no distributed table
// and is only counted.
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
	p := newPlanRun(ctx, t, owner, app)
	for _, s := range p.steps() {
		rec.step(s.label)
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v\n    the step's last statement: %s", s.label, err, rec.last())
		}
	}
	rec.mu.Lock()
	rec.on = false
	stmts := rec.stmts
	rec.mu.Unlock()
	explainRouted(ctx, t, ownerURL, stmts)
}

// planRun is the org and the services whose statements the plan test
// records; its steps share the entries they make.
type planRun struct {
	ctx      context.Context
	c        knowledge.Caller
	task     uuid.UUID
	svc, ops *knowledge.Service
	handler  *jobs.EmbedHandler
	enq      *clusterEnqueuer
	ids      []uuid.UUID // the stored entries
	doc      *knowledge.DocumentResult
}

func newPlanRun(ctx context.Context, t *testing.T, owner, app *pgxpool.Pool) *planRun {
	a := testfactory.Agent(ctx, t, owner, &testfactory.AgentOpts{Name: "planner"})
	emb := embed.NewLocal()
	enq := &clusterEnqueuer{}
	return &planRun{
		ctx: ctx, c: knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID},
		task:    testfactory.Task(ctx, t, owner, &testfactory.TaskOpts{OrgID: a.OrgID}).ID,
		svc:     knowledge.New(app, knowledge.Options{Embedder: emb, Enqueuer: enq}),
		ops:     knowledge.New(owner, knowledge.Options{Embedder: emb}),
		handler: jobs.NewEmbedHandler(owner, emb, jobs.HandlerOptions{}),
		enq:     enq,
	}
}

// planStep is one labelled operation of the plan test.
type planStep struct {
	label string
	run   func() error
}

// steps are every per-org operation, in an order where each finds what it
// needs (entries, a document, relations) made by the ones before.
func (p *planRun) steps() []planStep {
	return slices.Concat(p.writeSteps(), p.workerSteps(), p.readSteps(), p.changeSteps())
}

// writeSteps store entries (with the entry fields and a task link),
// relate two, store a document and its replacement, and an upload.
func (p *planRun) writeSteps() []planStep {
	ctx, c := p.ctx, p.c
	return []planStep{
		{"store", func() error {
			for i := range 4 {
				in := knowledge.StoreInput{
					Title: fmt.Sprintf("Router plan note %d", i),
					Body:  fmt.Sprintf("Citus routes every statement of org %d to one worker: shard pruning by org_id, co-located tables, body %d.", i, i),
					Tags:  []string{"citus", fmt.Sprintf("t%d", i)},
					Kind:  knowledge.KindProcedural, Source: fmt.Sprintf("jira:PLAN-%d", i),
					Metadata: map[string]any{"team": "infra", "n": i},
				}
				if i == 3 {
					in.TaskRef = &knowledge.TaskRef{TaskID: p.task, Kind: knowledge.LinkProduced}
				}
				r, err := p.svc.Store(ctx, c, in)
				if err != nil {
					return err
				}
				p.ids = append(p.ids, r.ID)
			}
			return nil
		}},
		{"link", func() error {
			_, err := p.svc.Link(ctx, c, knowledge.LinkInput{FromID: p.ids[1], ToID: p.ids[3], Type: "DEPENDS_ON"})
			return err
		}},
		{"store document", func() (err error) {
			p.doc, err = p.svc.StoreDocument(ctx, c, routerPlanDocument("Restart the worker."))
			return err
		}},
		{"store document again (replacement)", func() error {
			_, err := p.svc.StoreDocument(ctx, c, routerPlanDocument("Restart the worker, then check its shards."))
			return err
		}},
		{"upload", func() error {
			content := "# Uploaded\n\nA handbook sent in parts.\n\n## Part two\n\nThe rest of it.\n"
			r, err := p.svc.UploadStart(ctx, c, knowledge.UploadStartInput{Title: "Uploaded handbook", Source: "upload:plan", TotalBytes: int64(len(content))})
			if err != nil {
				return err
			}
			for i, part := range []string{content[:20], content[20:]} {
				if _, err := p.svc.UploadAppend(ctx, c, knowledge.UploadAppendInput{UploadID: r.UploadID, Index: &i, Content: part}); err != nil {
					return err
				}
			}
			_, err = p.svc.UploadFinish(ctx, c, knowledge.UploadFinishInput{UploadID: r.UploadID})
			return err
		}},
	}
}

// routerPlanDocument is a three-section document whose last section reads
// last (a replacement changes that section alone).
func routerPlanDocument(last string) knowledge.DocumentInput {
	return knowledge.DocumentInput{
		Title:    "Runbook: shards",
		Source:   "wiki:runbook-shards",
		Tags:     []string{"runbook"},
		Metadata: map[string]any{"team": "infra"},
		Content:  "# Runbook\n\nWhat to do when a worker is down.\n\n## Detect\n\nThe calls of its orgs answer unavailable.\n\n## Recover\n\n" + last + "\n",
	}
}

// workerSteps are the embeddings worker's writes and the lexical indexer.
func (p *planRun) workerSteps() []planStep {
	return []planStep{
		{"worker: embed", func() error { return p.handler.Process(p.ctx, p.enq.take()) }},
		{"worker: index", func() error {
			_, err := knowledge.NewMaintenance(p.ops, knowledge.MaintenanceConfig{}).IndexPending(p.ctx, p.c.OrgID, 100)
			return err
		}},
	}
}

// readSteps are search (each list, each mode, the entry-field filters,
// hops, as of a time), get (by id, by source), list (filters, a document's
// sections, the next page), relations, task links and completions.
func (p *planRun) readSteps() []planStep {
	ctx, c := p.ctx, p.c
	search := func(in knowledge.SearchInput) func() error {
		return func() error { _, err := p.svc.Search(ctx, c, in); return err }
	}
	list := func(in knowledge.ListInput) func() error {
		return func() error { _, err := p.svc.List(ctx, c, in); return err }
	}
	fields := knowledge.Filters{Kind: knowledge.KindProcedural, SourcePrefix: "jira:", Metadata: map[string]any{"team": "infra"}}
	past := time.Now().Add(-time.Second)
	two := 2
	return []planStep{
		{"search", search(knowledge.SearchInput{Query: "router plan shard pruning", Tags: []string{"citus"}})},
		{"search lists", func() error {
			_, err := knowledge.SearchLists(ctx, p.svc, c, knowledge.SearchInput{Query: "co-located tables worker"}, 20)
			return err
		}},
		{"search: entry-field filters", search(knowledge.SearchInput{Query: "router plan", Filters: fields})},
		{"search: exact source", search(knowledge.SearchInput{Query: "worker down", Filters: knowledge.Filters{Source: "wiki:runbook-shards"}})},
		{"search: a kind", search(knowledge.SearchInput{Query: "worker down", Filters: knowledge.Filters{Kind: knowledge.KindProcedural}})},
		{"search: a source prefix", search(knowledge.SearchInput{Query: "worker down", Filters: knowledge.Filters{SourcePrefix: "wiki:"}})},
		{"search: a document's sections", func() error { // the document is stored by a step before
			return search(knowledge.SearchInput{Query: "router plan", DocumentID: &p.doc.ID, Hops: 1})()
		}},
		{"search: lexical", search(knowledge.SearchInput{Query: "shard pruning", Mode: knowledge.ModeLexical})},
		{"search: semantic", search(knowledge.SearchInput{Query: "shard pruning", Mode: knowledge.ModeSemantic})},
		{"search: hops", search(knowledge.SearchInput{Query: "router plan", Hops: 1})},
		{"search: as of", search(knowledge.SearchInput{Query: "router plan", AsOf: &past})},
		{"get", func() error { _, err := p.svc.Get(ctx, c, p.ids[0]); return err }},
		{"get: a section", func() error { _, err := p.svc.Get(ctx, c, p.doc.Sections[1].ID); return err }},
		{"get by source", func() error { _, err := p.svc.GetBySource(ctx, c, "wiki:runbook-shards"); return err }},
		{"list", list(knowledge.ListInput{})},
		{"list: entry-field filters", list(knowledge.ListInput{Filters: fields, Tags: []string{"citus"}, AuthorAgentID: &c.AgentID})},
		{"list: by task", list(knowledge.ListInput{TaskID: &p.task})},
		{"list: a document's sections", func() error { // the document is stored by a step before
			return list(knowledge.ListInput{DocumentID: &p.doc.ID, IncludeSuperseded: true})()
		}},
		{"list: next page", func() error {
			r, err := p.svc.List(ctx, c, knowledge.ListInput{Limit: &two})
			if err != nil || r.NextCursor == "" {
				return err
			}
			_, err = p.svc.List(ctx, c, knowledge.ListInput{Limit: &two, Cursor: r.NextCursor})
			return err
		}},
		{"task knowledge", func() error { _, err := p.svc.TaskKnowledge(ctx, c, p.task, ""); return err }},
		{"complete", func() error {
			for _, what := range []string{knowledge.CompleteEntry, knowledge.CompleteTask, knowledge.CompleteAgent, knowledge.CompleteTag} {
				if _, _, err := p.svc.Complete(ctx, c, what, "r"); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

// changeSteps read and end a relation, link to a task, correct,
// supersede, forget; then the operators' per-org reads (statistics, index
// status, export, a purge's dry run).
func (p *planRun) changeSteps() []planStep {
	ctx, c := p.ctx, p.c
	return []planStep{
		{"relations", func() error {
			_, err := p.svc.Relations(ctx, c, knowledge.RelationsInput{ID: p.ids[1], Direction: "both"})
			return err
		}},
		{"unlink", func() error { _, err := p.svc.Unlink(ctx, c, p.ids[1], p.ids[3], "DEPENDS_ON"); return err }},
		{"link task", func() error {
			_, err := p.svc.LinkTask(ctx, c, p.ids[0], knowledge.TaskRef{TaskID: p.task, Kind: knowledge.LinkReferences})
			return err
		}},
		{"correct", func() error {
			_, err := p.svc.Correct(ctx, c, p.ids[3], knowledge.StoreInput{Title: "Router plan note 3, corrected", Body: "Citus routes the correction to one worker too."})
			return err
		}},
		{"supersede", func() error { _, err := p.svc.Supersede(ctx, c, p.ids[0], p.ids[1]); return err }},
		{"forget", func() error { _, err := p.svc.Forget(ctx, c, p.ids[2], "plan test", false); return err }},
		{"relation types", func() error { _, err := p.svc.RelationTypes(ctx, c); return err }},
		{"operator: stats", func() error { _, err := p.ops.Operations().Stats(ctx, c.OrgID, 10); return err }},
		{"operator: index status", func() error { _, err := p.ops.Operations().SearchIndexStatus(ctx, c.OrgID); return err }},
		{"operator: export", func() error {
			_, err := p.ops.Operations().Export(ctx, c.OrgID, io.Discard, knowledge.ExportOptions{Vectors: true})
			return err
		}},
		{"operator: purge (dry run)", func() error {
			_, err := p.ops.Operations().Purge(ctx, c.OrgID, knowledge.PurgeScope{All: true}, true)
			return err
		}},
	}
}

// explainRouted EXPLAINs every distinct statement recorded (after the
// settings its step sent before it, in a transaction rolled back) on the
// coordinator and fails on each that is not one Citus scan of one task,
// with the planner's reasons (Citus's DEBUG messages).
func explainRouted(ctx context.Context, t *testing.T, ownerURL string, stmts []recorded) {
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
	pgxvecRegister(ctx, t, conn)
	seen := map[string]bool{}
	var bad []string
	checked, coordinatorOnly, onShards := 0, 0, 0
	for _, s := range stmts {
		if notPlanned.MatchString(s.sql) || seen[s.sql] {
			continue
		}
		seen[s.sql] = true
		if shardNamed.MatchString(s.sql) {
			// Sent to the org's worker renamed to its shards
			// (orgcall.QueryShards): plain tables there, one node's
			// by construction; the coordinator has no such tables.
			onShards++
			continue
		}
		notes = nil
		plan, err := explainAsRun(ctx, conn, s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("[%s] EXPLAIN failed: %v\n    %s\n    planner: %s", s.label, err, oneLine(s.sql), strings.Join(notes, " | ")))
			continue
		}
		checked++
		scans, tasks := citusTasks(plan)
		switch name := sqlcName(s.sql); {
		case scans == 0:
			// No distributed table: the coordinator answers alone (a
			// catalog look-up, a reference-free statement).
			coordinatorOnly++
		case crossOrg[name] != "":
			t.Logf("cross-org on purpose: %s (%d tasks): %s", name, sum(tasks), crossOrg[name])
		case scans != 1 || len(tasks) != 1 || tasks[0] != 1:
			bad = append(bad, fmt.Sprintf("[%s] not a single-task router plan (Citus scans %d, task counts %v):\n    %s\n    planner: %s", s.label, scans, tasks, oneLine(s.sql), strings.Join(notes, " | ")))
		}
	}
	t.Logf("%d distinct statements planned: %d on the coordinator alone (no distributed table), %d not single-task router plans; %d sent to the org's worker on its shards by name",
		checked, coordinatorOnly, len(bad), onShards)
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// explainAsRun is the EXPLAIN (FORMAT JSON) of s planned as it ran: after
// the settings its step sent before it (SearchConfig, ListConfig...), in
// a transaction rolled back.
func explainAsRun(ctx context.Context, conn *pgx.Conn, s recorded) (any, error) {
	var raw []byte
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
	if err != errRollback {
		return nil, err
	}
	var plan any
	return plan, json.Unmarshal(raw, &plan)
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
