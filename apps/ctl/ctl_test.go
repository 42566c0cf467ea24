package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

type cli struct {
	t     *testing.T
	url   string // DATABASE_URL: the operator's role, as deployed
	owner string // OWNER_DATABASE_URL (ctl migrate)
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	d := testenv.Postgres(t)
	return &cli{t: t, url: d.OperatorURL(), owner: d.URL}
}

// run runs ctl and returns exit code, stdout and stderr.
func (c *cli) run(args ...string) (int, string, string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "DATABASE_URL":
			return c.url
		case "OWNER_DATABASE_URL":
			return c.owner
		}
		return ""
	}
	code := run(context.Background(), args, getenv, &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs a --json command that must succeed and decodes its output.
func (c *cli) ok(args ...string) map[string]any {
	c.t.Helper()
	code, out, errs := c.run(append(args, "--json")...)
	if code != 0 {
		c.t.Fatalf("ctl %v: exit %d: %s%s", args, code, errs, out)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		c.t.Fatalf("ctl %v: output is not JSON: %v\n%s", args, err, out)
	}
	return v
}

func TestOperatorFlow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.ok("migrate", "status")
	if ms := st["migrations"].([]any); len(ms) == 0 || ms[0].(map[string]any)["applied"] != true {
		t.Fatalf("migrate status: %v", st)
	}
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	agent := c.ok("agent", "create", "--org", org, "--name", "scout")["id"].(string)
	tok := c.ok("token", "create", "--org", org, "--agent", agent, "--scopes", "knowledge:read,knowledge:write", "--ttl", "720h")
	if !strings.HasPrefix(tok["token"].(string), "kn_") || tok["id"] == "" {
		t.Fatalf("token create: %v", tok)
	}
	q := c.ok("quota", "set", "--org", org, "--knowledge-stored", "5")
	if q["limit"].(float64) != 5 || q["used"].(float64) != 0 {
		t.Fatalf("quota set: %v", q)
	}
	qs := c.ok("quota", "show", "--org", org)["quotas"].([]any)
	if len(qs) != 1 || qs[0].(map[string]any)["limit"].(float64) != 5 {
		t.Fatalf("quota show: %v", qs)
	}
	if q := c.ok("quota", "set", "--org", org, "--knowledge-stored", "-1"); q["limit"] != nil {
		t.Fatalf("quota lift: %v", q)
	}
	c.ok("quota", "set", "--org", org, "--knowledge-stored", "5")
	if q := c.ok("quota", "set", "--org", org, "--knowledge-stored", "unlimited"); q["limit"] != nil {
		t.Fatalf("quota set unlimited: %v", q)
	}
	orgs := c.ok("org", "list")["orgs"].([]any)
	agents := c.ok("agent", "list", "--org", org)["agents"].([]any)
	if len(orgs) != 1 || len(agents) != 1 {
		t.Fatalf("lists: %v %v", orgs, agents)
	}
	list := c.ok("token", "list", "--org", org)["tokens"].([]any)
	if len(list) != 1 {
		t.Fatalf("token list: %v", list)
	}
	raw, _ := json.Marshal(list)
	if strings.Contains(string(raw), tok["token"].(string)) {
		t.Fatal("token list shows the token's text")
	}
	rev := c.ok("token", "revoke", "--id", tok["id"].(string))
	if rev["revokedAt"] == nil {
		t.Fatalf("token revoke: %v", rev)
	}
	task := c.ok("task", "create", "--org", org, "--title", "ship it")
	if task["id"] == "" {
		t.Fatalf("task create: %v", task)
	}
	// Human output too.
	if code, out, _ := c.run("quota", "show", "--org", org); code != 0 || !strings.Contains(out, "knowledge_stored: 0 used of unlimited") {
		t.Fatalf("human quota show: %d %q", code, out)
	}
}

func TestIssuedTokenVerifies(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	agent := c.ok("agent", "create", "--org", org, "--name", "scout")["id"].(string)
	tok := c.ok("token", "create", "--org", org, "--agent", agent, "--scopes", "knowledge:read")["token"].(string)
	p, err := tenancy.New(d.Pool).VerifyToken(context.Background(), tok)
	if err != nil || p.OrgID.String() != org || p.AgentID.String() != agent {
		t.Fatalf("issued token does not verify: %+v %v", p, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	agent := c.ok("agent", "create", "--org", org, "--name", "scout")["id"].(string)
	other := c.ok("org", "create", "--name", "other")["id"].(string)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"org", "create"}, 2, "--name is required"},
		{[]string{"org", "create", "--name", "acme"}, 1, "already exists"},
		{[]string{"org", "create", "--name", strings.Repeat("x", 201)}, 1, "--name: must be at most 200"},
		{[]string{"agent", "create", "--org", "nope", "--name", "x"}, 2, `--org: "nope" is not a uuid`},
		{[]string{"agent", "create", "--org", "6f1c0a39-3f7e-4a43-9d0b-8b6f0c1f2a11", "--name", "x"}, 1, "not found"},
		{[]string{"token", "create", "--org", org, "--agent", agent, "--scopes", "knowledge:write_others"}, 1, "not a known scope"},
		{[]string{"token", "create", "--org", org, "--agent", agent}, 1, "at least one scope"},
		{[]string{"token", "create", "--org", org, "--agent", agent, "--scopes", "knowledge:read,knowledge:delete_others"}, 1, "knowledge:delete_others widens knowledge:delete: give both"},
		{[]string{"token", "create", "--org", other, "--agent", agent, "--scopes", "knowledge:read"}, 1, "not found"},
		{[]string{"token", "create", "--org", org, "--agent", agent, "--scopes", "knowledge:read", "--ttl", "-1h"}, 2, "--ttl"},
		{[]string{"token", "revoke", "--id", "6f1c0a39-3f7e-4a43-9d0b-8b6f0c1f2a11"}, 1, "not found"},
		{[]string{"quota", "set", "--org", org}, 2, "--knowledge-stored is required"},
		{[]string{"quota", "set", "--org", org, "--knowledge-stored", "-5"}, 2, "must be a whole number of entries (0 or more), or unlimited"},
		{[]string{"quota", "set", "--org", org, "--knowledge-stored", "lots"}, 2, "--knowledge-stored must be a whole number"},
		{[]string{"quota", "show", "--org", "6f1c0a39-3f7e-4a43-9d0b-8b6f0c1f2a11"}, 1, "not found"},
		{[]string{"org", "list", "stray"}, 2, "unexpected argument"},
	}
	for _, tc := range cases {
		code, out, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("ctl %v: exit %d, output %q; want exit %d containing %q", tc.args, code, out+errs, tc.code, tc.want)
		}
	}
	// Nothing half-written: the refused commands left one token-less agent.
	toks := c.ok("token", "list", "--org", org)["tokens"].([]any)
	agents := c.ok("agent", "list", "--org", org)["agents"].([]any)
	if len(toks) != 0 || len(agents) != 1 {
		t.Fatalf("refused commands wrote: tokens %v agents %v", toks, agents)
	}
}

func TestDevBootstrapIsRepeatable(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a := c.ok("dev", "bootstrap")
	b := c.ok("dev", "bootstrap")
	if a["orgId"] != b["orgId"] || a["agentId"] != b["agentId"] || a["token"] == b["token"] {
		t.Fatalf("bootstrap not repeatable: %v then %v", a, b)
	}
	toks := c.ok("token", "list", "--org", a["orgId"].(string))["tokens"].([]any)
	if len(toks) != 2 {
		t.Fatalf("want 2 tokens, got %d", len(toks))
	}
	// It issues every scope, as its help says.
	var scopes []string
	for _, s := range toks[0].(map[string]any)["scopes"].([]any) {
		scopes = append(scopes, s.(string))
	}
	if !slices.Equal(scopes, tenancy.Catalogue) {
		t.Errorf("dev bootstrap's token has %v, want every scope %v", scopes, tenancy.Catalogue)
	}
	_, help, _ := c.run("help")
	if !strings.Contains(help, "issue a token with every scope") || strings.Contains(help, "read+write") {
		t.Errorf("help of dev bootstrap: %q", help)
	}
}

func TestMigrateUpOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	d := testenv.EmptyPostgres(t)
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	code, out, _ := c.run("migrate", "status")
	if code != 0 || !strings.Contains(out, "pending") {
		t.Fatalf("status before: %d %q", code, out)
	}
	up := c.ok("migrate", "up")
	if n := len(up["applied"].([]any)); n == 0 {
		t.Fatalf("migrate up applied nothing: %v", up)
	}
	var tables int
	if err := d.Pool.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name IN ('orgs','agents','agent_tokens','org_quotas','tasks','knowledge','knowledge_supersessions','task_knowledge')`).Scan(&tables); err != nil || tables != 8 {
		t.Fatalf("tables after migrate up: %d (%v)", tables, err)
	}
	code, out, _ = c.run("migrate", "status")
	if code != 0 || strings.Contains(out, "pending") || !strings.Contains(out, "applied") {
		t.Fatalf("status after: %d %q", code, out)
	}
	if again := c.ok("migrate", "up"); len(again["applied"].([]any)) != 0 {
		t.Fatalf("second migrate up applied %v", again)
	}
}

func TestReembed(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "DATABASE_URL":
			return d.OperatorURL()
		case "REDIS_URL":
			return r.URL
		}
		return ""
	}
	ctx := context.Background()
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	// One entry ready under another model, one failed, one ready under the current model.
	vec := slices.Repeat([]float32{0.1}, 768)
	for _, o := range []testfactory.EntryOpts{
		{Title: "old model", Body: "b", Embedding: vec, Model: "some-old-model"},
		{Title: "failed", Body: "b", EmbeddingError: "boom"},
		{Title: "current", Body: "b", Embedding: vec, Model: "local-hash-v1"},
	} {
		o.OrgID = uuid.MustParse(org)
		testfactory.Entry(ctx, t, d.Pool, &o)
	}
	if code := run(ctx, []string{"reembed", "--org", org, "--json"}, getenv, &out, &errb); code != 0 {
		t.Fatalf("reembed: %d %s %s", code, out.String(), errb.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res["pending"].(float64) != 2 {
		t.Fatalf("reembed answer %s (%v)", out.String(), err)
	}
	var pending int
	if err := d.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge WHERE embedding_status = 'pending'").Scan(&pending); err != nil || pending != 2 {
		t.Fatalf("pending after reembed: %d (%v)", pending, err)
	}
	// The jobs are on the embeddings queue.
	if n, err := r.Client.Keys(ctx, "asynq:*embeddings*").Result(); err != nil || len(n) == 0 {
		t.Fatalf("nothing enqueued: %v %v", n, err)
	}
	out.Reset()
	if code := run(ctx, []string{"reembed", "--org", org, "--all", "--json"}, getenv, &out, &errb); code != 0 {
		t.Fatalf("reembed --all: %d %s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res["pending"].(float64) != 3 {
		t.Fatalf("reembed --all answer %s", out.String())
	}
	if code := run(ctx, []string{"reembed", "--org", "6f1c0a39-3f7e-4a43-9d0b-8b6f0c1f2a11"}, getenv, &out, &errb); code != 1 {
		t.Fatalf("reembed of an unknown org: exit %d", code)
	}
}

// The domain names its fields; ctl words them as its flags.
func TestFlagOfDomainField(t *testing.T) {
	quotaSet, _ := lookup([]string{"quota", "set"})
	for _, tc := range []struct {
		cmd         *command
		field, want string
	}{
		{&command{}, "name", "--name"},
		{&command{}, "perMinute", "--per-minute"},
		{&command{}, "ignoreQuota", "--ignore-quota"},
		{quotaSet, "limit", "--knowledge-stored"},
	} {
		if got := tc.cmd.flagOf(tc.field); got != tc.want {
			t.Errorf("%q: flag %q, want %q", tc.field, got, tc.want)
		}
	}
}

// TestMigrateRefusesADatabaseURLOfAnotherDatabase: with DATABASE_URL
// naming one database and OWNER_DATABASE_URL (set or not) another, migrate
// and isolate-org refuse, naming both, and touch neither; with
// --ignore-database-url, or an owner's URL of the same database, they run
// and name the database written.
func TestMigrateRefusesADatabaseURLOfAnotherDatabase(t *testing.T) {
	t.Parallel()
	mine, other := testenv.EmptyPostgres(t), testenv.EmptyPostgres(t)
	for name, c := range map[string]*cli{
		"owner unset": {t: t, url: mine.OperatorURL()},
		"owner set":   {t: t, url: mine.OperatorURL(), owner: other.URL},
	} {
		for _, args := range [][]string{{"migrate", "up"}, {"migrate", "status"}, {"isolate-org", "--org", uuid.NewString()}} {
			code, out, errs := c.run(args...)
			owner := other.Name + " on 127.0.0.1:5432"
			if c.owner == "" {
				owner = "knowledge on 127.0.0.1:5432"
			}
			if code != 1 || out != "" || !strings.Contains(errs, "DATABASE_URL names database "+mine.Name+" on 127.0.0.1:5432") ||
				!strings.Contains(errs, "which names database "+owner) || !strings.Contains(errs, "--ignore-database-url") {
				t.Errorf("%s, %v: exit %d, %q %q; want exit 1 naming both databases and the flag", name, args, code, out, errs)
			}
		}
	}
	for _, d := range []*testenv.Database{mine, other} {
		var n int
		if err := d.Pool.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s after the refusals: %d tables (%v), want none", d.Name, n, err)
		}
	}

	// The flag: the owner's database it is, and ctl says so.
	c := &cli{t: t, url: mine.OperatorURL(), owner: other.URL}
	code, out, errs := c.run("migrate", "up", "--ignore-database-url", "--json")
	if code != 0 || errs != "ctl migrate up: wrote database "+other.Name+" on 127.0.0.1:5432 as postgres\n" {
		t.Fatalf("migrate up --ignore-database-url: exit %d, %q %q", code, out, errs)
	}
	var up map[string]any
	if err := json.Unmarshal([]byte(out), &up); err != nil || len(up["applied"].([]any)) == 0 {
		t.Fatalf("migrate up --json: %v %q", err, out)
	}
	// The owner's URL of DATABASE_URL's database: no flag needed. The
	// owner's role and the operator's differ, and localhost is 127.0.0.1.
	c = &cli{t: t, url: strings.Replace(mine.OperatorURL(), "127.0.0.1", "localhost", 1), owner: mine.URL}
	if code, out, errs := c.run("migrate", "up"); code != 0 || !strings.Contains(out, "applied 00001") ||
		errs != "ctl migrate up: wrote database "+mine.Name+" on 127.0.0.1:5432 as postgres\n" {
		t.Fatalf("migrate up of DATABASE_URL's database: exit %d, %q %q", code, out, errs)
	}
}

// TestWritesNameTheDatabase: every command that writes names, on stderr,
// the database it wrote; one that only reads, or fails, says nothing there,
// and stdout is the command's output alone.
func TestWritesNameTheDatabase(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	wrote := func(cmd string) string {
		return "ctl " + cmd + ": wrote database " + d.Name + " on 127.0.0.1:5432 as knowledge_operator\n"
	}
	code, out, errs := c.run("org", "create", "--name", "acme", "--json")
	var org map[string]any
	if code != 0 || errs != wrote("org create") || json.Unmarshal([]byte(out), &org) != nil {
		t.Fatalf("org create: exit %d, %q %q", code, out, errs)
	}
	id := org["id"].(string)
	for _, args := range [][]string{
		{"agent", "create", "--org", id, "--name", "scout"},
		{"quota", "set", "--org", id, "--knowledge-stored", "5"},
		{"task", "create", "--org", id, "--title", "t"},
		{"dev", "bootstrap"},
		{"ratelimit", "set", "--org", id, "--kind", "read", "--per-minute", "60"},
		{"audit-prune"},
	} {
		cmd := strings.Join(args[:min(2, len(args))], " ")
		if args[0] == "audit-prune" {
			cmd = "audit-prune"
		}
		if code, _, errs := c.run(args...); code != 0 || errs != wrote(cmd) {
			t.Errorf("%v: exit %d, stderr %q, want %q", args, code, errs, wrote(cmd))
		}
	}
	for _, args := range [][]string{{"org", "list"}, {"quota", "show", "--org", id}, {"org", "create", "--name", "acme"}} {
		if _, _, errs := c.run(args...); strings.Contains(errs, "wrote") {
			t.Errorf("%v: stderr %q; a read or a failed write names no database written", args, errs)
		}
	}
}
