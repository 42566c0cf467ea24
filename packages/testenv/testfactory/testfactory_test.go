package testfactory_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

func TestZeroOptionsGiveValidRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool

	o1, o2 := testfactory.Org(ctx, t, pool, nil), testfactory.Org(ctx, t, pool, &testfactory.OrgOpts{})
	if o1.ID == o2.ID || o1.Name == o2.Name {
		t.Fatalf("two orgs share an id or a name: %+v %+v", o1, o2)
	}
	a := testfactory.Agent(ctx, t, pool, nil)
	tok := testfactory.Token(ctx, t, pool, nil)
	task := testfactory.Task(ctx, t, pool, nil)
	e := testfactory.Entry(ctx, t, pool, nil)
	for what, org := range map[string]uuid.UUID{"agent": a.OrgID, "token": tok.OrgID, "task": task.OrgID, "entry": e.OrgID} {
		if org == uuid.Nil || org == o1.ID || org == o2.ID {
			t.Errorf("%s's org %s: want a new org of its own", what, org)
		}
	}
	var scopes []string
	var agentOrg uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT t.scopes, a.org_id FROM agent_tokens t JOIN agents a ON a.org_id = t.org_id AND a.id = t.agent_id
		WHERE t.id = $1`, tok.ID).Scan(&scopes, &agentOrg); err != nil {
		t.Fatal(err)
	}
	if len(scopes) != len(testfactory.Scopes) || agentOrg != tok.OrgID {
		t.Fatalf("token scopes %v, agent's org %s (token's %s)", scopes, agentOrg, tok.OrgID)
	}
	var status string
	var gen int32
	var author *uuid.UUID
	if err := pool.QueryRow(ctx, "SELECT embedding_status, embedding_generation, created_by_agent_id FROM knowledge WHERE org_id = $1 AND id = $2",
		e.OrgID, e.ID).Scan(&status, &gen, &author); err != nil {
		t.Fatal(err)
	}
	if status != "pending" || gen != e.Generation || author != nil {
		t.Fatalf("entry: status %s generation %d (returned %d) author %v", status, gen, e.Generation, author)
	}
}

func TestOptionsAreWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool

	org := testfactory.Org(ctx, t, pool, &testfactory.OrgOpts{Name: "acme"})
	a := testfactory.Agent(ctx, t, pool, &testfactory.AgentOpts{OrgID: org.ID, Name: "scout"})
	// An agent without its org: the token finds the org.
	tok := testfactory.Token(ctx, t, pool, &testfactory.TokenOpts{AgentID: a.ID, Scopes: []string{"knowledge:read"}})
	if tok.OrgID != org.ID || tok.AgentID != a.ID {
		t.Fatalf("token %+v: want agent %s of org %s", tok, a.ID, org.ID)
	}
	conf := 55
	vec := make([]float32, 64) // the narrowest width the schema takes
	vec[0] = 1
	expires := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	ready := testfactory.Entry(ctx, t, pool, &testfactory.EntryOpts{OrgID: org.ID, AgentID: a.ID, Title: "t", Body: "b",
		Tags: []string{"x"}, Confidence: &conf, ExpiresAt: &expires, Embedding: vec})
	failed := testfactory.Entry(ctx, t, pool, &testfactory.EntryOpts{OrgID: org.ID, Origin: "operator", EmbeddingError: "boom"})

	var title, model, source string
	var tags []string
	var c int
	var exp time.Time
	if err := pool.QueryRow(ctx, `SELECT title, tags, confidence, expires_at, embedding_model, origin FROM knowledge
		WHERE org_id = $1 AND id = $2 AND embedding_status = 'ready' AND created_by_agent_id = $3`, org.ID, ready.ID, a.ID).
		Scan(&title, &tags, &c, &exp, &model, &source); err != nil {
		t.Fatal(err)
	}
	if title != "t" || len(tags) != 1 || c != conf || !exp.Equal(expires) || model != testfactory.EmbeddingModel || source != "agent" {
		t.Fatalf("ready entry: %q %v %d %v %q %q", title, tags, c, exp, model, source)
	}
	var msg string
	if err := pool.QueryRow(ctx, "SELECT embedding_error, origin FROM knowledge WHERE org_id = $1 AND id = $2 AND embedding_status = 'failed'",
		org.ID, failed.ID).Scan(&msg, &source); err != nil || msg != "boom" || source != "operator" {
		t.Fatalf("failed entry: %q %q %v", msg, source, err)
	}
	task := testfactory.Task(ctx, t, pool, &testfactory.TaskOpts{OrgID: org.ID, Title: "ship"})
	if task.OrgID != org.ID {
		t.Fatalf("task of org %s, want %s", task.OrgID, org.ID)
	}
}
