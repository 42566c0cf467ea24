package search_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// bundle is what one test works with: a fresh migrated database, a leased
// Redis database, a Service as the MCP server runs it (the application's
// role) and one as the worker and ctl do (the owner), two agents of one org
// and one of another org.
type bundle struct {
	ctx        context.Context
	db         *testenv.Database
	pool       *pgxpool.Pool
	redis      *testenv.Redis
	svc        *knowledge.Service // as the application's role (row-level security applies)
	ops        *knowledge.Service // as the schema's owner: the worker's and ctl's calls across orgs
	enq        *recordingEnqueuer
	opts       knowledge.Options // svc's and ops': a service on another pool is made with them
	org, other uuid.UUID
	alice, bob knowledge.Caller // agents of org
	eve        knowledge.Caller // agent of other
}

type option func(*knowledge.Options)

// inTime is a budget (embed, duplicate check) that no load makes a prompt
// answer miss: tests that assert what the check finds run with it, so a
// loaded machine cannot turn their answer into a partial check.
const inTime = time.Minute

func setup(t testing.TB, opts ...option) *bundle {
	t.Helper()
	ctx := context.Background()
	db := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	b := &bundle{ctx: ctx, db: db, pool: db.Pool, redis: r, enq: &recordingEnqueuer{}}
	b.org = b.mkOrg(t, "org-a")
	b.other = b.mkOrg(t, "org-b")
	b.alice = knowledge.Caller{OrgID: b.org, AgentID: b.mkAgent(t, b.org, "alice")}
	b.bob = knowledge.Caller{OrgID: b.org, AgentID: b.mkAgent(t, b.org, "bob")}
	b.eve = knowledge.Caller{OrgID: b.other, AgentID: b.mkAgent(t, b.other, "eve")}
	o := knowledge.Options{Redis: r.Client, Enqueuer: b.enq, Testing: knowledge.TestingKnobs{SimilarBudget: inTime}}
	for _, f := range opts {
		f(&o)
	}
	b.opts = o
	b.svc = knowledge.New(db.AppPool(t), o)
	b.ops = knowledge.New(db.Pool, o)
	return b
}

func (b *bundle) mkOrg(t testing.TB, name string) uuid.UUID {
	t.Helper()
	return testfactory.Org(b.ctx, t, b.pool, &testfactory.OrgOpts{Name: name}).ID
}

func (b *bundle) mkAgent(t testing.TB, org uuid.UUID, name string) uuid.UUID {
	t.Helper()
	return testfactory.Agent(b.ctx, t, b.pool, &testfactory.AgentOpts{OrgID: org, Name: name}).ID
}

func (b *bundle) mkTask(t *testing.T, org uuid.UUID) uuid.UUID {
	t.Helper()
	return testfactory.Task(b.ctx, t, b.pool, &testfactory.TaskOpts{OrgID: org}).ID
}

// count runs a SELECT count(*)-like query.
func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return knowledgetest.Count(b.ctx, t, b.pool, sql, args...)
}

// store stores an entry or fails the test.
func (b *bundle) store(t *testing.T, c knowledge.Caller, title, body string, tags ...string) uuid.UUID {
	t.Helper()
	r, err := b.svc.Store(b.ctx, c, knowledge.StoreInput{Title: title, Body: body, Tags: tags})
	if err != nil {
		t.Fatalf("store %q: %v", title, err)
	}
	return r.ID
}

// embedPending plays the embeddings worker: every pending entry gets the
// local embedder's vector of its title and body, status ready.
func (b *bundle) embedPending(t *testing.T) {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, "SELECT org_id, id, title || E'\n' || body FROM knowledge WHERE embedding_status = 'pending'")
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		org, id uuid.UUID
		text    string
	}
	var items []item
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.org, &it.id, &it.text); err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	l := embed.NewLocal()
	for _, it := range items {
		vs, _ := l.Embed(b.ctx, []string{it.text})
		markReady(b.ctx, t, b.pool, it.org, it.id, vs[0], l.Model())
	}
}

// markReady writes an entry's vector as the embeddings worker does (pool:
// the owner's): the row ready, with model's vector.
func markReady(ctx context.Context, t testing.TB, pool *pgxpool.Pool, org, id uuid.UUID, vec []float32, model string) {
	t.Helper()
	if _, err := pool.Exec(ctx, `UPDATE knowledge SET embedding = $3, embedding_status = 'ready',
		embedding_model = $4, embedded_at = now() WHERE org_id = $1 AND id = $2`,
		org, id, pgvector.NewVector(vec), model); err != nil {
		t.Fatal(err)
	}
}

// wantCode fails unless err is a *errs.Error with code and field.
var wantCode = knowledgetest.WantCode

// recordingEnqueuer records the embedding jobs instead of queueing them.
type recordingEnqueuer = knowledgetest.Enqueuer

func ptr[T any](v T) *T { return &v }

// indexAll runs the lexical indexer until the queue is empty, as the worker does.
func (b *bundle) indexAll(t *testing.T) {
	t.Helper()
	if _, err := maint(b.ops).IndexAll(b.ctx); err != nil {
		t.Fatal(err)
	}
}

// maint is the maintenance of svc's tables, with the default tuning: what
// the worker runs between a test's writes and its reads.
func maint(svc *knowledge.Service) *knowledge.Maintenance {
	return knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{})
}

func (b *bundle) link(t *testing.T, c knowledge.Caller, from uuid.UUID, typ string, to uuid.UUID) *knowledge.RelationChange {
	t.Helper()
	r, err := b.svc.Link(b.ctx, c, knowledge.LinkInput{FromID: from, ToID: to, Type: typ})
	if err != nil {
		t.Fatalf("link %s: %v", typ, err)
	}
	return r
}

// manual is a small Markdown document of n sections, each with body text
// v (so a test can change one section's text).
func manual(n int, text func(i int) string) string {
	var b strings.Builder
	b.WriteString("Preface of the manual.\n\n")
	for i := range n {
		fmt.Fprintf(&b, "# Chapter %d\n\n%s\n\n", i, text(i))
	}
	return b.String()
}

func same(i int) string {
	return fmt.Sprintf("The text of chapter %d, about valves and pumps number %d.", i, i)
}

func (b *bundle) storeDoc(t *testing.T, c knowledge.Caller, in knowledge.DocumentInput) *knowledge.DocumentResult {
	t.Helper()
	r, err := b.svc.StoreDocument(b.ctx, c, in)
	if err != nil {
		t.Fatalf("store document %q: %v", in.Title, err)
	}
	return r
}

// fullText returns the full-text list of q in c's org: ids best first,
// and each id's BM25.
func (b *bundle) fullText(t *testing.T, c knowledge.Caller, q string) ([]uuid.UUID, map[uuid.UUID]float64) {
	t.Helper()
	l, err := knowledge.SearchLists(b.ctx, b.svc, c, knowledge.SearchInput{Query: q}, 100)
	if err != nil {
		t.Fatalf("lists of %q: %v", q, err)
	}
	var out []uuid.UUID
	scores := map[uuid.UUID]float64{}
	for _, h := range l.FullText {
		out = append(out, h.ID)
		scores[h.ID] = h.Score
	}
	return out, scores
}

// filler stores n entries that hold none of the test's words, so that
// document frequencies mean something.
func (b *bundle) filler(t *testing.T, c knowledge.Caller, n int) {
	t.Helper()
	for i := range n {
		b.store(t, c, fmt.Sprintf("Filler note %d", i), fmt.Sprintf("Routine observation number %d about nothing in particular.", i))
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}

func ids(hits []knowledge.Hit) []uuid.UUID {
	out := make([]uuid.UUID, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func (b *bundle) search(t *testing.T, c knowledge.Caller, in knowledge.SearchInput) *knowledge.SearchResult {
	t.Helper()
	r, err := b.svc.Search(b.ctx, c, in)
	if err != nil {
		t.Fatalf("search %+v: %v", in, err)
	}
	// Every hit: a score in (0, 1] that is at most the plain RRF of its
	// ranks (evidence weighs each list's term by at most 1), at least the
	// gate, best first, and a raw signal for exactly the lists that found it.
	gate := knowledge.DefaultMinScore
	if in.MinScore != nil {
		gate = *in.MinScore
	}
	for i, h := range r.Hits {
		rrf := knowledge.RRFScore(h.VectorRank, h.FullTextRank, h.TitleRank)
		if h.Score <= 0 || h.Score > 1 || h.Score > rrf+1e-12 || h.Score < gate {
			t.Fatalf("hit %s: score %v, RRF of ranks (%d,%d,%d) is %v, gate %v", h.Title, h.Score, h.VectorRank, h.FullTextRank, h.TitleRank, rrf, gate)
		}
		if i > 0 && h.Score > r.Hits[i-1].Score {
			t.Fatalf("hit %d scores %v, above hit %d's %v", i, h.Score, i-1, r.Hits[i-1].Score)
		}
		if (h.VectorRank > 0) != (h.Signals.Cosine != nil) || (h.FullTextRank > 0) != (h.Signals.BM25 != nil) ||
			(h.TitleRank > 0) != (h.Signals.TitleBM25 != nil) {
			t.Fatalf("hit %s: ranks (%d,%d,%d) but signals %+v", h.Title, h.VectorRank, h.FullTextRank, h.TitleRank, h.Signals)
		}
		if len([]rune(h.Snippet)) > knowledge.SnippetChars {
			t.Fatalf("snippet of %d characters", len([]rune(h.Snippet)))
		}
	}
	return r
}

// queryIDs runs sql on q (a pool, a connection or a transaction) and
// returns the ids its rows hold, one a row.
func queryIDs(ctx context.Context, t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) []uuid.UUID {
	t.Helper()
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// ran says whether plan (auto_explain's, with log_analyze) shows a node on
// what that ran; a node that never ran reads "(never executed)".
func ran(plan, what string) bool {
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, what) && !strings.Contains(line, "never executed") {
			return true
		}
	}
	return false
}

// vectorPlan is the plan of the vector list's HNSW function for an org and
// a query vector (the statement the function makes, as the planner planned
// it), read with auto_explain on a connection of its own: the function
// builds its statement at run time, so EXPLAIN of the call shows nothing of
// it.
func vectorPlan(t *testing.T, pool *pgxpool.Pool, fn string, org uuid.UUID, model string, vec []float32) string {
	t.Helper()
	ctx := context.Background()
	conn, notices := testenv.ExplainConn(t, pool, "SET auto_explain.log_nested_statements = on", "SET hnsw.iterative_scan = relaxed_order")
	parts := make([]string, len(vec))
	for i, x := range vec {
		parts[i] = fmt.Sprint(x)
	}
	if _, err := conn.Exec(ctx, "SELECT * FROM "+fn+"($1, $2::text::vector, $3, '{}', false, false, 40, NULL, NULL, NULL, NULL)",
		org, "["+strings.Join(parts, ",")+"]", model); err != nil {
		t.Fatal(err)
	}
	return strings.Join(*notices, "\n")
}

// listAll pages through a listing and returns the ids in order.
func (b *bundle) listAll(t *testing.T, c knowledge.Caller, in knowledge.ListInput) []uuid.UUID {
	t.Helper()
	var out []uuid.UUID
	for range 100 {
		r, err := b.svc.List(b.ctx, c, in)
		if err != nil {
			t.Fatalf("list %+v: %v", in, err)
		}
		for _, h := range r.Hits {
			out = append(out, h.ID)
		}
		if r.NextCursor == "" {
			return out
		}
		in.Cursor = r.NextCursor
	}
	t.Fatal("the listing never ended")
	return nil
}
