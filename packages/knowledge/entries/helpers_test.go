package entries_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/entries"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// bundle is what one test works with: a fresh migrated database, a leased
// Redis database, the entries as the MCP server reaches them (the
// application's role, under row-level security), two agents of one org
// and one of another org.
type bundle struct {
	ctx        context.Context
	db         *testenv.Database
	pool       *pgxpool.Pool
	redis      *testenv.Redis
	svc        *facade // as the application's role (row-level security applies)
	enq        *recordingEnqueuer
	org, other uuid.UUID
	alice, bob domain.Caller // agents of org
	eve        domain.Caller // agent of other
}

// testOptions are the entries' options and those of the search they
// rank new text with (Searcher: its embedder, its budgets).
type testOptions struct {
	entries.Options
	Searcher search.Options
}

type option func(*testOptions)

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
	b.alice = domain.Caller{OrgID: b.org, AgentID: b.mkAgent(t, b.org, "alice")}
	b.bob = domain.Caller{OrgID: b.org, AgentID: b.mkAgent(t, b.org, "bob")}
	b.eve = domain.Caller{OrgID: b.other, AgentID: b.mkAgent(t, b.other, "eve")}
	o := testOptions{Options: entries.Options{Redis: r.Client, Enqueuer: b.enq, SimilarBudget: inTime}}
	for _, f := range opts {
		f(&o)
	}
	b.svc = newFacade(db.AppPool(t), o)
	return b
}

// newFacade returns the entries of pool's database made with o, their
// search made with o.Searcher.
func newFacade(pool *pgxpool.Pool, o testOptions) *facade {
	d := data.New(pool)
	o.Search = search.New(d, o.Searcher)
	return &facade{e: entries.New(d, o.Options)}
}

// facade calls the entries as knowledge.Service does: the caller's org put
// in the context once.
type facade struct{ e *entries.Entries }

func as(ctx context.Context, c domain.Caller) context.Context { return data.AsOrg(ctx, c.OrgID) }

func (f *facade) Store(ctx context.Context, c domain.Caller, in domain.StoreInput) (*domain.StoreResult, error) {
	return f.e.Store(as(ctx, c), c, in)
}

func (f *facade) Supersede(ctx context.Context, c domain.Caller, oldID, newID uuid.UUID) (*domain.SupersedeResult, error) {
	return f.e.Supersede(as(ctx, c), c, oldID, newID)
}

func (f *facade) Correct(ctx context.Context, c domain.Caller, oldID uuid.UUID, replacement domain.StoreInput) (*domain.CorrectResult, error) {
	return f.e.Correct(as(ctx, c), c, oldID, replacement)
}

func (f *facade) Get(ctx context.Context, c domain.Caller, id uuid.UUID) (*domain.Entry, error) {
	return f.e.Get(as(ctx, c), c, id)
}

func (f *facade) LinkTask(ctx context.Context, c domain.Caller, knowledgeID uuid.UUID, ref domain.TaskRef) (*domain.TaskLink, error) {
	return f.e.LinkTask(as(ctx, c), c, knowledgeID, ref)
}

func (f *facade) TaskKnowledge(ctx context.Context, c domain.Caller, taskID uuid.UUID, kind domain.LinkKind) ([]domain.TaskEntry, error) {
	return f.e.TaskKnowledge(as(ctx, c), c, taskID, kind)
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

func (b *bundle) setQuota(t *testing.T, org uuid.UUID, limit int64) {
	t.Helper()
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO org_quotas (org_id, resource, limit_value) VALUES ($1, 'knowledge_stored', $2)
		ON CONFLICT (org_id, resource) DO UPDATE SET limit_value = excluded.limit_value`, org, limit); err != nil {
		t.Fatal(err)
	}
}

// count runs a SELECT count(*)-like query.
func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return knowledgetest.Count(b.ctx, t, b.pool, sql, args...)
}

func (b *bundle) entries(t *testing.T) int {
	return b.count(t, "SELECT count(*) FROM knowledge")
}

func (b *bundle) quotaUsed(t *testing.T, org uuid.UUID) int {
	return b.count(t, "SELECT coalesce((SELECT used FROM org_quotas WHERE org_id = $1 AND resource = 'knowledge_stored'), 0)", org)
}

// store stores an entry or fails the test.
func (b *bundle) store(t *testing.T, c domain.Caller, title, body string, tags ...string) uuid.UUID {
	t.Helper()
	r, err := b.svc.Store(b.ctx, c, domain.StoreInput{Title: title, Body: body, Tags: tags})
	if err != nil {
		t.Fatalf("store %q: %v", title, err)
	}
	return r.ID
}

// storeReported stores an entry with ifSimilar: report (its check by
// meaning in the answer: with a provider, the entry is written with the
// check's vector, ready at once) or fails the test.
func (b *bundle) storeReported(t *testing.T, c domain.Caller, title, body string) uuid.UUID {
	t.Helper()
	r, err := b.svc.Store(b.ctx, c, domain.StoreInput{Title: title, Body: body, IfSimilar: domain.IfSimilarReport})
	if err != nil {
		t.Fatalf("store %q: %v", title, err)
	}
	return r.ID
}

// wantCode fails unless err is a *errs.Error with code and field.
var wantCode = knowledgetest.WantCode

// recordingEnqueuer records the embedding jobs instead of queueing them.
type recordingEnqueuer = knowledgetest.Enqueuer

func ptr[T any](v T) *T { return &v }

// checkChains walks every chain of b's org: no cycle, heads have no cached
// head, every superseded entry caches its walked head, and each has its
// one history edge.
func checkChains(t *testing.T, b *bundle) {
	t.Helper()
	type row struct{ by, head *uuid.UUID }
	state := map[uuid.UUID]row{}
	rows, err := b.pool.Query(b.ctx, "SELECT id, superseded_by, head_id FROM knowledge WHERE org_id = $1", b.org)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var r row
		if err := rows.Scan(&id, &r.by, &r.head); err != nil {
			t.Fatal(err)
		}
		state[id] = r
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	superseded := 0
	for id, r := range state {
		cur := id
		for steps := 0; state[cur].by != nil; steps++ {
			if steps > len(state) {
				t.Fatalf("cycle through %s", id)
			}
			cur = *state[cur].by
			if _, ok := state[cur]; !ok {
				t.Fatalf("%s points at %s, which is gone", id, cur)
			}
		}
		if cur == id {
			if r.head != nil {
				t.Fatalf("head %s has a cached head %s", id, *r.head)
			}
			continue
		}
		superseded++
		if r.head == nil || *r.head != cur {
			t.Fatalf("entry %s: cached head %v, walked head %s", id, r.head, cur)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge k JOIN knowledge_supersessions s
		ON s.org_id = k.org_id AND s.old_id = k.id AND s.new_id = k.superseded_by WHERE k.org_id = $1`, b.org); n != superseded {
		t.Fatalf("%d history edges for %d superseded entries", n, superseded)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_supersessions WHERE org_id = $1", b.org); n != superseded {
		t.Fatalf("%d history edges in all for %d superseded entries", n, superseded)
	}
}

// maint is the maintenance of b's tables (as the owner, as the worker
// runs it), with the default tuning: what the worker runs between a
// test's writes and its reads.
func (b *bundle) maint() *maintenance.Maintenance {
	return maintenance.New(data.New(b.pool), maintenance.Options{})
}

// indexAll runs the lexical indexer until the queue is empty, as the worker does.
func (b *bundle) indexAll(t *testing.T) {
	t.Helper()
	if _, err := b.maint().IndexAll(b.ctx); err != nil {
		t.Fatal(err)
	}
}
