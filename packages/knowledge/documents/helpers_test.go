package documents_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge/documents"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// bundle is what one test works with: a fresh migrated database, the
// documents as the MCP server reaches them (the application's role, under
// row-level security), two agents of one org and one of another org.
type bundle struct {
	ctx        context.Context
	db         *testenv.Database
	pool       *pgxpool.Pool // the owner's
	svc        server
	enq        *recordingEnqueuer
	org, other uuid.UUID
	alice, bob domain.Caller // agents of org
	eve        domain.Caller // agent of other
}

type option func(*documents.Options)

func setup(t testing.TB, opts ...option) *bundle {
	t.Helper()
	ctx := context.Background()
	db := testenv.Postgres(t)
	b := &bundle{ctx: ctx, db: db, pool: db.Pool, enq: &recordingEnqueuer{}}
	b.org = testfactory.Org(ctx, t, b.pool, &testfactory.OrgOpts{Name: "org-a"}).ID
	b.other = testfactory.Org(ctx, t, b.pool, &testfactory.OrgOpts{Name: "org-b"}).ID
	agent := func(org uuid.UUID, name string) domain.Caller {
		return domain.Caller{OrgID: org, AgentID: testfactory.Agent(ctx, t, b.pool, &testfactory.AgentOpts{OrgID: org, Name: name}).ID}
	}
	b.alice, b.bob, b.eve = agent(b.org, "alice"), agent(b.org, "bob"), agent(b.other, "eve")
	o := documents.Options{Enqueuer: b.enq}
	for _, f := range opts {
		f(&o)
	}
	b.svc = b.server(t, o)
	return b
}

// server returns documents on a pool of their own, as another MCP server
// on the same database would have.
func (b *bundle) server(t testing.TB, o documents.Options) server {
	return server{documents.New(data.New(b.db.AppPool(t)), o)}
}

// server calls Documents as the facade does: with the caller's org in the
// context.
type server struct{ d *documents.Documents }

func (s server) StoreDocument(ctx context.Context, c domain.Caller, in domain.DocumentInput) (*domain.DocumentResult, error) {
	return s.d.StoreDocument(data.AsOrg(ctx, c.OrgID), c, in)
}

func (s server) UploadStart(ctx context.Context, c domain.Caller, in domain.UploadStartInput) (*domain.UploadStartResult, error) {
	return s.d.UploadStart(data.AsOrg(ctx, c.OrgID), c, in)
}

func (s server) UploadAppend(ctx context.Context, c domain.Caller, in domain.UploadAppendInput) (*domain.UploadAppendResult, error) {
	return s.d.UploadAppend(data.AsOrg(ctx, c.OrgID), c, in)
}

func (s server) UploadFinish(ctx context.Context, c domain.Caller, in domain.UploadFinishInput) (*domain.DocumentResult, error) {
	return s.d.UploadFinish(data.AsOrg(ctx, c.OrgID), c, in)
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

// wantCode fails unless err is a *errs.Error with code and field.
var wantCode = knowledgetest.WantCode

// recordingEnqueuer records the embedding jobs instead of queueing them.
type recordingEnqueuer = knowledgetest.Enqueuer

// testClock is a clock a test moves by hand.
type testClock struct{ t atomic.Pointer[time.Time] }

func newTestClock() *testClock {
	c := &testClock{}
	c.set(time.Now())
	return c
}
func (c *testClock) now() time.Time          { return *c.t.Load() }
func (c *testClock) set(t time.Time)         { c.t.Store(&t) }
func (c *testClock) advance(d time.Duration) { c.set(c.now().Add(d)) }

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

func (b *bundle) storeDoc(t *testing.T, c domain.Caller, in domain.DocumentInput) *domain.DocumentResult {
	t.Helper()
	r, err := b.svc.StoreDocument(b.ctx, c, in)
	if err != nil {
		t.Fatalf("store document %q: %v", in.Title, err)
	}
	return r
}

func (b *bundle) startUpload(t *testing.T, svc server, c domain.Caller, total int) uuid.UUID {
	t.Helper()
	r, err := svc.UploadStart(b.ctx, c, domain.UploadStartInput{Title: "Handbook", TotalBytes: int64(total)})
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxPartBytes != documents.MaxUploadPartBytes || r.TotalBytes != int64(total) {
		t.Fatalf("start answered %+v", r)
	}
	return r.UploadID
}

func (b *bundle) appendPart(t *testing.T, svc server, c domain.Caller, id uuid.UUID, index int, content string) *domain.UploadAppendResult {
	t.Helper()
	r, err := svc.UploadAppend(b.ctx, c, domain.UploadAppendInput{UploadID: id, Index: &index, Content: content})
	if err != nil {
		t.Fatalf("append %d: %v", index, err)
	}
	return r
}
