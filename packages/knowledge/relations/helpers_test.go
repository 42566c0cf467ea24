package relations_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// bundle is what one test works with: a fresh migrated database, the
// relations as the MCP server reaches them (the application's role, under
// row-level security) and as ctl does (the owner), two agents of one org
// and one of another. Its methods put the caller's org in the context as
// the facade does.
type bundle struct {
	ctx        context.Context
	pool       *pgxpool.Pool // the owner's
	rel        *relations.Relations
	ops        *relations.Relations
	org, other uuid.UUID
	alice, bob domain.Caller // agents of org
	eve        domain.Caller // agent of other
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	db := testenv.Postgres(t)
	b := &bundle{ctx: ctx, pool: db.Pool,
		rel: relations.New(data.New(db.AppPool(t)), relations.Options{}),
		ops: relations.New(data.New(db.Pool), relations.Options{})}
	b.org = testfactory.Org(ctx, t, b.pool, &testfactory.OrgOpts{Name: "org-a"}).ID
	b.other = testfactory.Org(ctx, t, b.pool, &testfactory.OrgOpts{Name: "org-b"}).ID
	agent := func(org uuid.UUID, name string) domain.Caller {
		return domain.Caller{OrgID: org, AgentID: testfactory.Agent(ctx, t, b.pool, &testfactory.AgentOpts{OrgID: org, Name: name}).ID}
	}
	b.alice, b.bob, b.eve = agent(b.org, "alice"), agent(b.org, "bob"), agent(b.other, "eve")
	return b
}

// entry writes a live entry of c's org by c (as a store leaves it).
func (b *bundle) entry(t *testing.T, c domain.Caller, title, body string) uuid.UUID {
	t.Helper()
	return testfactory.Entry(b.ctx, t, b.pool, &testfactory.EntryOpts{OrgID: c.OrgID, AgentID: c.AgentID, Title: title, Body: body}).ID
}

func (b *bundle) as(c domain.Caller) context.Context { return data.AsOrg(b.ctx, c.OrgID) }

func (b *bundle) Link(c domain.Caller, in domain.LinkInput) (*domain.RelationChange, error) {
	return b.rel.Link(b.as(c), c, in)
}

func (b *bundle) Unlink(c domain.Caller, from, to uuid.UUID, typ string) (*domain.RelationChange, error) {
	return b.rel.Unlink(b.as(c), c, from, to, typ)
}

func (b *bundle) Relations(c domain.Caller, in domain.RelationsInput) (*domain.RelationsResult, error) {
	return b.rel.Relations(b.as(c), c, in)
}

func (b *bundle) RelationTypes(c domain.Caller) ([]domain.RelationType, error) {
	return b.rel.RelationTypes(b.as(c), c)
}

func (b *bundle) Summary(c domain.Caller, id uuid.UUID) (*domain.RelationSummary, error) {
	return b.rel.Summary(b.as(c), c, id)
}

// AddRelationType is ctl's call: as the owner.
func (b *bundle) AddRelationType(org uuid.UUID, name, inverse string, symmetric bool) (*domain.RelationType, error) {
	return b.ops.AddRelationType(data.AsOrg(b.ctx, org), org, name, inverse, symmetric)
}

func (b *bundle) link(t *testing.T, c domain.Caller, from uuid.UUID, typ string, to uuid.UUID) *domain.RelationChange {
	t.Helper()
	r, err := b.Link(c, domain.LinkInput{FromID: from, ToID: to, Type: typ})
	if err != nil {
		t.Fatalf("link %s: %v", typ, err)
	}
	return r
}

func (b *bundle) relations(t *testing.T, c domain.Caller, in domain.RelationsInput) []domain.Relation {
	t.Helper()
	r, err := b.Relations(c, in)
	if err != nil {
		t.Fatalf("relations: %v", err)
	}
	return r.Relations
}

func relSet(rs []domain.Relation) map[string]bool {
	m := map[string]bool{}
	for _, r := range rs {
		m[fmt.Sprintf("%s %s %s", r.Type, r.Direction, r.OtherID)] = true
	}
	return m
}

// count runs a SELECT count(*)-like query as the owner.
func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return knowledgetest.Count(b.ctx, t, b.pool, sql, args...)
}

// wantCode fails unless err is a *errs.Error with code and field.
var wantCode = knowledgetest.WantCode

func ptr[T any](v T) *T { return &v }
