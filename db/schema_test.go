package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

type ids struct{ org, agent, task, entry uuid.UUID }

// seed writes an org named name with an agent, a task and an entry of that
// agent.
func seed(t *testing.T, pool *pgxpool.Pool, name string) ids {
	t.Helper()
	ctx := context.Background()
	org := testfactory.Org(ctx, t, pool, &testfactory.OrgOpts{Name: name}).ID
	agent := testfactory.Agent(ctx, t, pool, &testfactory.AgentOpts{OrgID: org}).ID
	return ids{org: org, agent: agent,
		task:  testfactory.Task(ctx, t, pool, &testfactory.TaskOpts{OrgID: org}).ID,
		entry: testfactory.Entry(ctx, t, pool, &testfactory.EntryOpts{OrgID: org, AgentID: agent}).ID}
}

func pgCode(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestTaskKnowledgeCannotCrossOrgs proves the composite foreign keys: a
// link between an entry of one org and a task of another cannot exist,
// whichever org the row claims.
func TestTaskKnowledgeCannotCrossOrgs(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	a, b := seed(t, d.Pool, "a"), seed(t, d.Pool, "b")

	for _, c := range []struct {
		name       string
		org, task  uuid.UUID
		knowledgeI uuid.UUID
	}{
		{"org a, task of b", a.org, b.task, a.entry},
		{"org b, entry of a", b.org, b.task, a.entry},
		{"org a, task of b, entry of b", a.org, b.task, b.entry},
	} {
		_, err := d.Pool.Exec(ctx, "INSERT INTO task_knowledge (org_id, task_id, knowledge_id, kind) VALUES ($1, $2, $3, 'references')",
			c.org, c.task, c.knowledgeI)
		if pgCode(err) != "23503" {
			t.Errorf("%s: got %v, want a foreign key violation", c.name, err)
		}
	}
	if _, err := d.Pool.Exec(ctx, "INSERT INTO task_knowledge (org_id, task_id, knowledge_id, kind) VALUES ($1, $2, $3, 'produced')",
		a.org, a.task, a.entry); err != nil {
		t.Fatalf("same-org link refused: %v", err)
	}
	// Supersession cannot cross orgs either.
	_, err := d.Pool.Exec(ctx, "UPDATE knowledge SET superseded_by = $1, head_id = $1, superseded_at = now() WHERE org_id = $2 AND id = $3",
		b.entry, a.org, a.entry)
	if pgCode(err) != "23503" {
		t.Fatalf("cross-org supersession: %v", err)
	}
}

func TestChecksMirrorTheSpec(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	x := seed(t, d.Pool, "a")
	bad := map[string]string{
		"empty title":     "INSERT INTO knowledge (org_id, title, body) VALUES ($1, '', 'b')",
		"long title":      "INSERT INTO knowledge (org_id, title, body) VALUES ($1, repeat('é', 201), 'b')",
		"long body":       "INSERT INTO knowledge (org_id, title, body) VALUES ($1, 't', repeat('x', 32001))",
		"17 tags":         "INSERT INTO knowledge (org_id, title, body, tags) VALUES ($1, 't', 'b', array_fill('x'::text, ARRAY[17]))",
		"confidence 101":  "INSERT INTO knowledge (org_id, title, body, confidence) VALUES ($1, 't', 'b', 101)",
		"bad status":      "INSERT INTO knowledge (org_id, title, body, embedding_status) VALUES ($1, 't', 'b', 'done')",
		"ready no vector": "INSERT INTO knowledge (org_id, title, body, embedding_status) VALUES ($1, 't', 'b', 'ready')",
		"bad link kind":   "INSERT INTO task_knowledge (org_id, task_id, knowledge_id, kind) SELECT $1, id, id, 'likes' FROM tasks LIMIT 1",
		"future scope":    "INSERT INTO agent_tokens (org_id, agent_id, secret_hash, scopes) SELECT $1, id, decode(repeat('00', 32), 'hex'), '{knowledge:write_others}' FROM agents LIMIT 1",
	}
	for name, q := range bad {
		if _, err := d.Pool.Exec(ctx, q, x.org); pgCode(err) != "23514" {
			t.Errorf("%s: got %v, want a check violation", name, err)
		}
	}
	// 200 two-byte characters are 200 characters, not 400.
	if _, err := d.Pool.Exec(ctx, "INSERT INTO knowledge (org_id, title, body) VALUES ($1, repeat('é', 200), 'b')", x.org); err != nil {
		t.Fatalf("200-character title refused: %v", err)
	}
}

func TestMigrationsCreateEveryIndexAndReportStatus(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	want := map[string]string{
		"knowledge_embedding_space_idx": "btree",
		"knowledge_postings_pkey":       "btree",
		"knowledge_term_stats_pkey":     "btree",
		"knowledge_index_queue_org_idx": "btree",
		"knowledge_tags_idx":            "gin",
		"knowledge_head_idx":            "btree",
		"knowledge_pending_idx":         "btree",
	}
	rows, err := d.Pool.Query(ctx, `SELECT c.relname, am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam WHERE c.relkind = 'i'`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var n, am string
		if err := rows.Scan(&n, &am); err != nil {
			t.Fatal(err)
		}
		got[n] = am
	}
	for n, am := range want {
		if got[n] != am {
			t.Errorf("index %s: got access method %q, want %q", n, got[n], am)
		}
	}
	st, err := db.Status(ctx, d.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) == 0 {
		t.Fatal("no migrations known")
	}
	for _, m := range st {
		if !m.Applied {
			t.Errorf("migration %d %s not applied", m.Version, m.Name)
		}
	}
	// Up again is a no-op.
	applied, err := db.Migrate(ctx, d.Pool)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v (%v)", applied, err)
	}
}
