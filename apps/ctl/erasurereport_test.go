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
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// ctl erasure-report: an entry stored is found (its row, its index, the
// store's Redis record; its queued embedding task holds its id, kept by
// design) and the command exits 3; after ctl purge nothing is found and it
// exits 0, by entry and by text; another org's entry reads as a missing
// one; a scan cut short says so and exits 3; a wrong command line exits 2.
func TestErasureReport(t *testing.T) {
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
	report := func(wantCode int, args ...string) knowledge.ErasureReport {
		t.Helper()
		code, out, errs := runCtl(append([]string{"erasure-report"}, append(args, "--json")...)...)
		var rep knowledge.ErasureReport
		if err := json.Unmarshal([]byte(out), &rep); code != wantCode || err != nil {
			t.Fatalf("erasure-report %v: exit %d (want %d), %v\n%s%s", args, code, wantCode, err, out, errs)
		}
		return rep
	}
	ctx := context.Background()
	c := &cli{t: t, url: d.OperatorURL(), owner: d.URL}
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: r.Options.Addr, DB: r.DB})
	defer client.Close()
	svc := knowledge.New(d.Pool, knowledge.Options{Redis: r.Client, Enqueuer: jobs.NewEnqueuer(client)})
	mk := func(name string) (uuid.UUID, knowledge.Caller) {
		org := uuid.MustParse(c.ok("org", "create", "--name", name)["id"].(string))
		agent := uuid.MustParse(c.ok("agent", "create", "--org", org.String(), "--name", "scout")["id"].(string))
		return org, knowledge.Caller{OrgID: org, AgentID: agent}
	}
	store := func(who knowledge.Caller, title, body string) uuid.UUID {
		tok := uuid.New()
		res, err := svc.Store(ctx, who, knowledge.StoreInput{Title: title, Body: body, ClientToken: &tok})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	acme, alice := mk("acme")
	other, eve := mk("other")
	secret := store(alice, "Vault rotation runbook", "Rotate the quxvault7781 credentials on the harbour cluster before the audit.")
	store(alice, "Harbour ledger", "The harbour ledger lists the crews and the cluster audit dates.")
	theirs := store(eve, "Their note", "They wrote quxvault7781 down too, in their own org.")
	if _, err := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}

	org := acme.String()
	rep := report(exitNotClean, "--org", org, "--entry", secret.String())
	places := map[string]bool{}
	for _, cp := range rep.Copies {
		places[cp.Table+"."+cp.Column] = true
		if strings.HasPrefix(cp.RedisKey, "idem:k.store:"+org) {
			places["redis idem"] = true
		}
	}
	for _, want := range []string{"knowledge.title", "knowledge.body", "knowledge_postings.entry_id", "knowledge_term_stats.term", "redis idem"} {
		if !places[want] {
			t.Errorf("no copy in %s: %+v", want, rep.Copies)
		}
	}
	task := false
	for _, k := range rep.Kept {
		task = task || strings.HasPrefix(k.RedisKey, "asynq:") && k.Kept != ""
	}
	if !rep.EntryStored || !rep.Complete || !task {
		t.Fatalf("stored %v, complete %v, its queued task kept by design %v: %+v", rep.EntryStored, rep.Complete, task, rep.Kept)
	}
	code, out, _ := runCtl("erasure-report", "--org", org, "--text", "QuxVault7781")
	if code != exitNotClean || !strings.Contains(out, "copies (") || !strings.Contains(out, "knowledge.body") ||
		!strings.Contains(out, "scanned ") || strings.Contains(out, theirs.String()) || strings.Contains(out, other.String()) {
		t.Fatalf("text report: exit %d\n%s", code, out)
	}

	if code, out, errs := runCtl("purge", "--org", org, "--entry", secret.String(), "--yes"); code != 0 {
		t.Fatalf("purge: exit %d %s%s", code, out, errs)
	}
	if after := report(exitOK, "--org", org, "--entry", secret.String()); after.EntryStored || len(after.Copies) != 0 || len(after.Kept) != 0 || !after.Complete {
		t.Fatalf("after purge: %+v", after)
	}
	code, out, _ = runCtl("erasure-report", "--org", org, "--text", "quxvault7781")
	if code != exitOK || !strings.Contains(out, "\nnothing found\n") || !strings.Contains(out, "Redis keys in ") {
		t.Fatalf("text report after purge: exit %d\n%s", code, out)
	}

	// Another org's entry is scanned for like a missing id.
	missing := uuid.New()
	_, foreign, _ := runCtl("erasure-report", "--org", org, "--entry", theirs.String())
	_, none, _ := runCtl("erasure-report", "--org", org, "--entry", missing.String())
	strip := func(s, id string) string {
		s = strings.ReplaceAll(s, id, "ID")
		return s[:strings.LastIndex(s, " in ")] // the runtime differs
	}
	if strip(foreign, theirs.String()) != strip(none, missing.String()) || !strings.Contains(none, "scanned for its id alone") {
		t.Fatalf("another org's entry:\n%s\na missing one:\n%s", foreign, none)
	}

	// Cut short: says so, exits 3.
	code, out, _ = runCtl("erasure-report", "--org", org, "--text", "quxvault7781", "--timeout", "1ns")
	if code != exitNotClean || !strings.Contains(out, "NOT complete") || !strings.Contains(out, "not scanned: ") || !strings.Contains(out, "deadline") {
		t.Fatalf("cut short: exit %d\n%s", code, out)
	}

	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--org", org}, 2, "--text and --entry"},
		{[]string{"--org", org, "--text", "vault", "--entry", secret.String()}, 2, "--text and --entry"},
		{[]string{"--org", org, "--text", "ab"}, 2, "--text"},
		{[]string{"--org", org, "--entry", "nope"}, 2, "--entry"},
		{[]string{"--org", org, "--text", "vault", "--timeout", "2h"}, 2, "--timeout"},
		{[]string{"--text", "vault"}, 2, "--org"},
		{[]string{"--org", uuid.NewString(), "--text", "vault"}, 1, "not found"},
	} {
		code, _, errs := runCtl(append([]string{"erasure-report"}, bad.args...)...)
		if code != bad.code || !strings.Contains(errs, bad.want) {
			t.Errorf("%v: exit %d, %q; want exit %d naming %s", bad.args, code, errs, bad.code, bad.want)
		}
	}
}
