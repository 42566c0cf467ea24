package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

func TestPurgeOrg(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	getenv := func(k string) string {
		switch k {
		case "DATABASE_URL":
			return d.OperatorURL()
		case "REDIS_URL":
			return r.URL
		}
		return ""
	}
	runCtl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, getenv, &out, &errb)
		return code, out.String(), errb.String()
	}
	ctx := context.Background()
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	opt := asynq.RedisClientOpt{Addr: r.Options.Addr, DB: r.DB}
	client := asynq.NewClient(opt)
	defer client.Close()
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	svc := knowledge.New(d.Pool, knowledge.Options{Redis: r.Client, Enqueuer: jobs.NewEnqueuer(client)})

	type org struct {
		id, agent uuid.UUID
		token     string
		entries   []uuid.UUID
	}
	mk := func(name string) org {
		o := org{id: uuid.MustParse(c.ok("org", "create", "--name", name)["id"].(string))}
		o.agent = uuid.MustParse(c.ok("agent", "create", "--org", o.id.String(), "--name", "scout")["id"].(string))
		o.token = c.ok("token", "create", "--org", o.id.String(), "--agent", o.agent.String(), "--scopes", "knowledge:read,knowledge:write")["token"].(string)
		for i := range 3 {
			tok := uuid.New()
			res, err := svc.Store(ctx, knowledge.Caller{OrgID: o.id, AgentID: o.agent},
				knowledge.StoreInput{Title: name + " secret", Body: "confidential body " + strings.Repeat("x", i+1), ClientToken: &tok})
			if err != nil {
				t.Fatal(err)
			}
			o.entries = append(o.entries, res.ID)
		}
		return o
	}
	acme, other := mk("acme"), mk("other")
	if _, err := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	// An archived batch of acme's, as a provider outage leaves it.
	bt, _ := jobs.NewEmbedBatchTask([]knowledge.EmbeddingJob{{OrgID: acme.id, EntryID: acme.entries[0], Generation: 1}}, jobs.BatchOptions{})
	info, err := client.Enqueue(bt)
	if err != nil {
		t.Fatal(err)
	}
	if err := insp.ArchiveTask(jobs.Queue, info.ID); err != nil {
		t.Fatal(err)
	}
	countAcme := func() int {
		var n int
		if err := d.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge WHERE org_id = $1", acme.id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	orgTasks := func(o uuid.UUID) int {
		n := 0
		groups, _ := insp.Groups(jobs.Queue)
		for _, g := range groups {
			if strings.HasPrefix(g.Group, o.String()) {
				n += g.Size
			}
		}
		arch, _ := insp.ListArchivedTasks(jobs.Queue)
		for _, a := range arch {
			if strings.Contains(string(a.Payload), o.String()) {
				n++
			}
		}
		return n
	}
	if orgTasks(acme.id) != 4 || orgTasks(other.id) != 3 {
		t.Fatalf("queued tasks: acme %d, other %d", orgTasks(acme.id), orgTasks(other.id))
	}

	// Wrong command lines name the flags; nothing is erased.
	for _, args := range [][]string{
		{"purge", "--org", acme.id.String()},
		{"purge", "--org", acme.id.String(), "--all", "--entry", acme.entries[0].String()},
		{"purge", "--org", acme.id.String(), "--entry", "nope"},
		{"purge", "--org", acme.id.String(), "--agent", other.agent.String(), "--yes"},
		{"purge", "--all", "--yes"},
	} {
		code, _, errs := runCtl(args...)
		if code != 2 || !strings.Contains(errs, "--") {
			t.Fatalf("%v: exit %d %q", args, code, errs)
		}
	}
	// Without --yes a script is refused (the question needs a person at a
	// terminal), and nothing is erased.
	code, _, errs := runCtl("purge", "--org", acme.id.String(), "--all", "--json")
	if code != 2 || !strings.Contains(errs, "--yes") || countAcme() != 3 {
		t.Fatalf("unconfirmed purge: exit %d %q, %d entries", code, errs, countAcme())
	}
	dry := c.okEnv(getenv, "purge", "--org", acme.id.String(), "--all", "--dry-run")
	if dry["entries"].(float64) != 3 || dry["dryRun"] != true || dry["postings"].(float64) == 0 || countAcme() != 3 {
		t.Fatalf("dry run: %v", dry)
	}
	// The dry run counts the postings the real run drops uncounted, and
	// says so (issue 40).
	code, out, errs := runCtl("purge", "--org", acme.id.String(), "--all", "--dry-run")
	if want := "the purge itself reports 0 index postings: --all drops the org's whole lexical index at once"; code != 0 ||
		!strings.Contains(out, " index postings, ") || !strings.Contains(out, want) || strings.Contains(errs, "wrote") {
		t.Fatalf("human dry run: exit %d, %q %q; want the postings counted and %q, and no database written", code, out, errs, want)
	}

	code, out, errs = runCtl("purge", "--org", acme.id.String(), "--all", "--yes", "--json")
	if code != 0 {
		t.Fatalf("purge: %d %s %s", code, out, errs)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got["entries"].(float64) != 3 || got["tokensRevoked"].(float64) != 1 || got["queuedTasksDeleted"].(float64) != 4 ||
		got["idempotenceKeys"].(float64) != 3 || got["vacuumed"] != true ||
		got["postings"].(float64) != 0 || got["orgIndexDropped"] != true || !strings.HasPrefix(got["note"].(string), "an MCP server may accept a revoked token") {
		t.Fatalf("purge answer: %s", out)
	}
	if countAcme() != 0 || orgTasks(acme.id) != 0 {
		t.Fatalf("after purge: %d entries, %d tasks", countAcme(), orgTasks(acme.id))
	}
	ten := tenancy.New(d.Pool)
	if _, err := ten.VerifyToken(ctx, acme.token); err == nil {
		t.Fatal("the purged org's token still verifies")
	}
	if _, err := ten.VerifyToken(ctx, other.token); err != nil {
		t.Fatalf("the other org's token: %v", err)
	}
	// Nothing of acme is found by the other org (nor was it before).
	res, err := svc.Search(ctx, knowledge.Caller{OrgID: other.id, AgentID: other.agent}, knowledge.SearchInput{Query: "secret confidential body"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		for _, id := range acme.entries {
			if h.ID == id {
				t.Fatal("another org finds a purged entry")
			}
		}
	}
	if orgTasks(other.id) != 3 || len(res.Hits) != 3 {
		t.Fatalf("the other org: %d tasks, %d hits", orgTasks(other.id), len(res.Hits))
	}
	// Running it again is harmless.
	if again := c.okEnv(getenv, "purge", "--org", acme.id.String(), "--all", "--yes"); again["entries"].(float64) != 0 || again["note"] != nil {
		t.Fatalf("second purge: %v (no token revoked, no note about revoked tokens)", again)
	}
	// No token left to revoke: the output says 0 and nothing about revoked
	// tokens; the index line says why it counts no postings.
	code, out, _ = runCtl("purge", "--org", acme.id.String(), "--all", "--yes")
	if code != 0 || !strings.Contains(out, "0 tokens revoked: the org had none left unrevoked\n") || strings.Contains(out, "tokens revoked;") ||
		!strings.Contains(out, "the org's whole index (its postings uncounted)") || strings.Contains(out, "0 index postings") {
		t.Fatalf("third purge, human: exit %d, %q", code, out)
	}
}

// okEnv is cli.ok with a given environment (Redis as well as Postgres).
func (c *cli) okEnv(getenv func(string) string, args ...string) map[string]any {
	c.t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), append(args, "--json"), getenv, &out, &errb); code != 0 {
		c.t.Fatalf("ctl %v: exit %d: %s%s", args, code, errb.String(), out.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		c.t.Fatalf("ctl %v: output is not JSON: %v\n%s", args, err, out.String())
	}
	return v
}
