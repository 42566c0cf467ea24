package erasure_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/erasure"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// bundle is what one test works with: a fresh migrated database, the
// erasure as the MCP server reaches it (the application's role, under
// row-level security) and as ctl does (the owner), two agents of one org
// and one of another. Entries are written with plain SQL (testfactory):
// the tests of erasure alone need no store. The whole round trip (store,
// forget, search, replay) is tested through the facade in package
// knowledge.
type bundle struct {
	ctx        context.Context
	pool       *pgxpool.Pool // the owner's
	er         *erasure.Erasure
	ops        *erasure.Erasure
	org, other uuid.UUID
	alice, bob domain.Caller // agents of org
	eve        domain.Caller // agent of other
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	db := testenv.Postgres(t)
	b := &bundle{ctx: ctx, pool: db.Pool,
		er:  erasure.New(data.New(db.AppPool(t)), erasure.Options{}),
		ops: erasure.New(data.New(db.Pool), erasure.Options{})}
	b.org = testfactory.Org(ctx, t, b.pool, &testfactory.OrgOpts{Name: "org-a"}).ID
	b.other = testfactory.Org(ctx, t, b.pool, &testfactory.OrgOpts{Name: "org-b"}).ID
	agent := func(org uuid.UUID, name string) domain.Caller {
		return domain.Caller{OrgID: org, AgentID: testfactory.Agent(ctx, t, b.pool, &testfactory.AgentOpts{OrgID: org, Name: name}).ID}
	}
	b.alice, b.bob, b.eve = agent(b.org, "alice"), agent(b.org, "bob"), agent(b.other, "eve")
	return b
}

// entry writes a live entry of c's org by c.
func (b *bundle) entry(t *testing.T, c domain.Caller, title string) uuid.UUID {
	t.Helper()
	return testfactory.Entry(b.ctx, t, b.pool, &testfactory.EntryOpts{OrgID: c.OrgID, AgentID: c.AgentID, Title: title}).ID
}

// supersede makes old superseded by next in a chain whose head is head,
// as the owner, with its recorded edge.
func (b *bundle) supersede(t *testing.T, c domain.Caller, old, next, head uuid.UUID) {
	t.Helper()
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET superseded_by = $3, head_id = $4, superseded_at = now() WHERE org_id = $1 AND id = $2`,
		c.OrgID, old, next, head); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO knowledge_supersessions (org_id, old_id, new_id, agent_id) VALUES ($1, $2, $3, $4)`,
		c.OrgID, old, next, c.AgentID); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) forget(c domain.Caller, id uuid.UUID, reason string, othersAllowed bool) (*domain.ForgetResult, error) {
	return b.er.Forget(data.AsOrg(b.ctx, c.OrgID), c, id, reason, othersAllowed)
}

func (b *bundle) purge(org uuid.UUID, scope domain.PurgeScope, dryRun bool) (*domain.PurgeReport, error) {
	return b.ops.Purge(data.AsOrg(b.ctx, org), org, scope, dryRun)
}

type link struct{ next, head *uuid.UUID }

func (b *bundle) link(t *testing.T, id uuid.UUID) link {
	t.Helper()
	var l link
	if err := b.pool.QueryRow(b.ctx, "SELECT superseded_by, head_id FROM knowledge WHERE org_id = $1 AND id = $2", b.org, id).
		Scan(&l.next, &l.head); err != nil {
		t.Fatal(err)
	}
	return l
}

// count runs a SELECT count(*)-like query as the owner.
func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return knowledgetest.Count(b.ctx, t, b.pool, sql, args...)
}

// wantCode fails unless err is a *errs.Error with code and field.
var wantCode = knowledgetest.WantCode

// newAgent adds an agent to the org and returns its id.
func (b *bundle) newAgent(t *testing.T, name string) uuid.UUID {
	t.Helper()
	return testfactory.Agent(b.ctx, t, b.pool, &testfactory.AgentOpts{OrgID: b.org, Name: name}).ID
}
