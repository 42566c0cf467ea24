package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

func TestStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testenv.Postgres(t)
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	scout := c.ok("agent", "create", "--org", org, "--name", "scout")["id"].(string)
	mole := c.ok("agent", "create", "--org", org, "--name", "mole")["id"].(string)
	other := c.ok("org", "create", "--name", "other")["id"].(string)
	otherAgent := c.ok("agent", "create", "--org", other, "--name", "x")["id"].(string)
	c.ok("quota", "set", "--org", org, "--knowledge-stored", "100")
	svc := knowledge.New(d.Pool, knowledge.Options{})
	caller := func(o, a string) knowledge.Caller {
		return knowledge.Caller{OrgID: uuid.MustParse(o), AgentID: uuid.MustParse(a)}
	}
	store := func(cl knowledge.Caller, title string, tags ...string) uuid.UUID {
		r, err := svc.Store(ctx, cl, knowledge.StoreInput{Title: title, Body: "body " + title, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	a := store(caller(org, scout), "a", "db", "ops")
	b := store(caller(org, scout), "b", "db")
	store(caller(org, mole), "c", "db", "net")
	exp := store(caller(org, mole), "d")
	store(caller(other, otherAgent), "not ours", "db", "secret-tag")
	if _, err := svc.Supersede(ctx, caller(org, scout), a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `UPDATE knowledge SET expires_at = now() - interval '1 hour' WHERE id = $1`, exp); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `UPDATE knowledge SET embedding_status = 'failed', embedding_error = 'x' WHERE id = $1`, b); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `UPDATE knowledge SET embedding_status = 'ready', embedding_model = 'm1', embedded_at = now(),
		embedding = array_fill(0.1::real, ARRAY[768])::vector, embedding_requested_at = now() - interval '1 hour' WHERE id = $1`, exp); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `UPDATE knowledge SET embedding_requested_at = now() - interval '10 minutes' WHERE id = $1`, a); err != nil {
		t.Fatal(err)
	}
	st := c.ok("stats", "--org", org, "--top-tags", "2")
	num := func(path ...string) float64 {
		var v any = st
		for _, p := range path {
			v = v.(map[string]any)[p]
		}
		return v.(float64)
	}
	if num("entries") != 4 || num("heads") != 2 || num("superseded") != 1 || num("expired") != 1 {
		t.Fatalf("states: %v", st)
	}
	if num("byKind", "semantic") != 2 || num("byKind", "reference") != 0 || num("documents") != 0 || num("sections") != 0 {
		t.Fatalf("current entries by kind (all semantic, the expired one left out), documents: %v %v %v", st["byKind"], st["documents"], st["sections"])
	}
	if num("embeddings", "pending") != 2 || num("embeddings", "ready") != 1 || num("embeddings", "failed") != 1 ||
		num("embeddings", "readyByModel", "m1") != 1 {
		t.Fatalf("embeddings: %v", st["embeddings"])
	}
	if age := num("embeddings", "oldestPendingSeconds"); age < 590 || age > 900 {
		t.Fatalf("oldest pending %v s, want about 600", age)
	}
	tags := st["topTags"].([]any)
	if len(tags) != 2 || tags[0].(map[string]any)["tag"] != "db" || tags[0].(map[string]any)["entries"].(float64) != 3 {
		t.Fatalf("top tags: %v (the other org's tags must not count)", tags)
	}
	per := map[string]float64{}
	names := st["agentNames"].(map[string]any)
	for _, p := range st["perAgent"].([]any) {
		m := p.(map[string]any)
		per[names[m["agentId"].(string)].(string)] = m["entries"].(float64)
	}
	if per["scout"] != 2 || per["mole"] != 2 || len(per) != 2 {
		t.Fatalf("per agent: %v", per)
	}
	q := st["quotas"].([]any)[0].(map[string]any)
	if q["used"].(float64) != 4 || q["limit"].(float64) != 100 {
		t.Fatalf("quota: %v", q)
	}
	code, out, _ := c.run("stats", "--org", org)
	if code != 0 || !strings.Contains(out, "4 entries (2 current, 1 superseded, 1 expired)") ||
		!strings.Contains(out, "current by kind: semantic 2 episodic 0 procedural 0 reference 0") || strings.Contains(out, "secret-tag") {
		t.Fatalf("human output: %d\n%s", code, out)
	}
	for _, args := range [][]string{{"stats"}, {"stats", "--org", "x"}, {"stats", "--org", org, "--top-tags", "0"}} {
		if code, _, errs := c.run(args...); code != 2 || !strings.Contains(errs, "--") {
			t.Errorf("%v: %d %q", args, code, errs)
		}
	}
	if code, _, errs := c.run("stats", "--org", uuid.NewString()); code != 1 || !strings.Contains(errs, "org") {
		t.Errorf("unknown org: %d %q", code, errs)
	}
}
