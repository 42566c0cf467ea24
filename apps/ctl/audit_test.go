package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestAudit: ctl audit reads one org's records, newest first, with every
// filter; another org's records never appear; bad flags are named.
func TestAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testenv.Postgres(t)
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	org := uuid.MustParse(c.ok("org", "create", "--name", "acme")["id"].(string))
	other := uuid.MustParse(c.ok("org", "create", "--name", "other")["id"].(string))
	scout, mole := uuid.New(), uuid.New()
	e1, e2 := uuid.New(), uuid.New()
	base := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Millisecond)
	ev := func(o uuid.UUID, agent uuid.UUID, name string, at time.Duration, ids ...uuid.UUID) tenancy.AuditEvent {
		kind := tenancy.AuditTool
		if !strings.HasSuffix(name, "_knowledge") {
			kind = tenancy.AuditResource
		}
		return tenancy.AuditEvent{OrgID: o, At: base.Add(at), AgentID: &agent, TokenID: &agent, Kind: kind, Name: name,
			EntryIDs: ids, Outcome: "ok", DurationUs: 1500}
	}
	ten := tenancy.New(d.Pool)
	if err := ten.WriteAudit(ctx, []tenancy.AuditEvent{
		ev(org, scout, "store_knowledge", 0, e1),
		ev(org, scout, "search_knowledge", time.Hour, e1, e2),
		ev(org, mole, "get_knowledge", 2*time.Hour, e2),
		ev(org, mole, "knowledge_entry", 2*time.Hour+time.Minute, e1),
		ev(other, uuid.New(), "store_knowledge", time.Hour, e1), // another org, same entry id
	}); err != nil {
		t.Fatal(err)
	}
	names := func(args ...string) string {
		t.Helper()
		out := c.ok(append([]string{"audit", "--org", org.String()}, args...)...)
		var got []string
		for _, e := range out["events"].([]any) {
			m := e.(map[string]any)
			if m["orgId"] != org.String() {
				t.Fatalf("a record of another org: %v", m)
			}
			got = append(got, m["name"].(string))
		}
		return strings.Join(got, ",")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "knowledge_entry,get_knowledge,search_knowledge,store_knowledge"},
		{[]string{"--agent", scout.String()}, "search_knowledge,store_knowledge"},
		{[]string{"--entry", e1.String()}, "knowledge_entry,search_knowledge,store_knowledge"},
		{[]string{"--entry", e2.String(), "--agent", mole.String()}, "get_knowledge"},
		{[]string{"--tool", "search_knowledge"}, "search_knowledge"},
		{[]string{"--since", base.Add(30 * time.Minute).Format(time.RFC3339Nano)}, "knowledge_entry,get_knowledge,search_knowledge"},
		{[]string{"--until", base.Add(time.Hour).Format(time.RFC3339Nano)}, "store_knowledge"},
		{[]string{"--since", "90m"}, "knowledge_entry,get_knowledge"},
		{[]string{"--limit", "1"}, "knowledge_entry"},
		{[]string{"--tool", "forget_knowledge"}, ""},
	} {
		if got := names(tc.args...); got != tc.want {
			t.Errorf("audit %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	code, out, _ := c.run("audit", "--org", org.String(), "--entry", e2.String())
	if code != 0 || !strings.Contains(out, "get_knowledge") || !strings.Contains(out, e2.String()) || strings.Contains(out, "store_knowledge") {
		t.Fatalf("human output: %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"audit"}, "--org"},
		{[]string{"audit", "--org", "x"}, "--org"},
		{[]string{"audit", "--org", org.String(), "--agent", "x"}, "--agent"},
		{[]string{"audit", "--org", org.String(), "--entry", "1"}, "--entry"},
		{[]string{"audit", "--org", org.String(), "--since", "yesterday"}, "--since"},
		{[]string{"audit", "--org", org.String(), "--until", "-5m"}, "--until"},
		{[]string{"audit", "--org", org.String(), "--since", "1h", "--until", "2h"}, "--until"},
		{[]string{"audit", "--org", org.String(), "--limit", "0"}, "--limit"},
		{[]string{"audit", "--org", org.String(), "--limit", "10001"}, "--limit"},
	} {
		if code, _, errs := c.run(tc.args...); code != 2 || !strings.Contains(errs, tc.flag) {
			t.Errorf("%v: exit %d, %q (want 2 naming %s)", tc.args, code, errs, tc.flag)
		}
	}
	if code, _, errs := c.run("audit", "--org", uuid.NewString()); code != 1 || !strings.Contains(errs, "org") {
		t.Errorf("unknown org: %d %q", code, errs)
	}
}

// TestAuditPrune: the operator's retention drops the days past it, of every
// org, whole, and keeps the younger ones; a bad --older-than is named.
func TestAuditPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testenv.Postgres(t)
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	org := uuid.MustParse(c.ok("org", "create", "--name", "acme")["id"].(string))
	other := uuid.MustParse(c.ok("org", "create", "--name", "other")["id"].(string))
	now := time.Now()
	var events []tenancy.AuditEvent
	for _, o := range []uuid.UUID{org, other} {
		for _, age := range []time.Duration{time.Minute, 5 * 24 * time.Hour, 40 * 24 * time.Hour} {
			events = append(events, tenancy.AuditEvent{OrgID: o, At: now.Add(-age), Kind: tenancy.AuditTool, Name: "get_knowledge", Outcome: "ok"})
		}
	}
	if err := tenancy.New(d.Pool).WriteAudit(ctx, events); err != nil {
		t.Fatal(err)
	}
	if got := c.ok("audit-prune", "--older-than", "30d")["dropped"]; got != float64(2) {
		t.Fatalf("audit-prune --older-than 30d dropped %v, want the two 40-day-old records", got)
	}
	for _, o := range []uuid.UUID{org, other} {
		if n := len(c.ok("audit", "--org", o.String())["events"].([]any)); n != 2 {
			t.Errorf("org %v keeps %d records, want 2", o, n)
		}
	}
	for _, bad := range []string{"10m", "x", "-3d"} {
		if code, _, errs := c.run("audit-prune", "--older-than", bad); code != 2 || !strings.Contains(errs, "--older-than") {
			t.Errorf("--older-than %s: exit %d, %q", bad, code, errs)
		}
	}
}
