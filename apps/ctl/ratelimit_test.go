package main

import (
	"strings"
	"testing"
)

// Issue 10, point 9: operators set, show and clear rate limits; bad input
// names the flag and changes nothing.
func TestRateLimitCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	agent := c.ok("agent", "create", "--org", org, "--name", "batch")["id"].(string)
	other := c.ok("org", "create", "--name", "other")["id"].(string)
	stranger := c.ok("agent", "create", "--org", other, "--name", "x")["id"].(string)

	if l := c.ok("ratelimit", "set", "--org", org, "--agent", agent, "--kind", "write", "--per-minute", "60"); l["perMinute"] != float64(60) || l["scope"] != "agent" {
		t.Fatalf("set agent: %v", l)
	}
	if l := c.ok("ratelimit", "set", "--org", org, "--each-agent", "--kind", "read", "--per-minute", "unlimited"); l["perMinute"] != nil {
		t.Fatalf("set each agent unlimited: %v", l)
	}
	c.ok("ratelimit", "set", "--org", org, "--kind", "write", "--per-minute", "600")
	c.ok("ratelimit", "set", "--org", org, "--kind", "write", "--per-minute", "300") // replaces
	ls := c.ok("ratelimit", "show", "--org", org)["rateLimits"].([]any)
	if len(ls) != 3 {
		t.Fatalf("show: %v", ls)
	}
	if code, out, _ := c.run("ratelimit", "show", "--org", org); code != 0 || !strings.Contains(out, "the org (all agents together): writes 300 a minute") ||
		!strings.Contains(out, "agent "+agent+": writes 60 a minute") || !strings.Contains(out, "each agent: reads unlimited") {
		t.Fatalf("human show: %d %q", code, out)
	}

	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--org", org, "--kind", "delete", "--per-minute", "5"}, 1, "--kind: must be read or write"},
		{[]string{"--org", org, "--kind", "write", "--per-minute", "0"}, 1, "--per-minute: must be from 1 to 1000000"},
		{[]string{"--org", org, "--kind", "write", "--per-minute", "lots"}, 2, "--per-minute must be a whole number"},
		{[]string{"--org", org, "--kind", "write"}, 2, "--per-minute is required"},
		{[]string{"--org", org, "--per-minute", "5"}, 2, "--kind is required"},
		{[]string{"--org", org, "--agent", agent, "--each-agent", "--kind", "write", "--per-minute", "5"}, 2, "exclude each other"},
		{[]string{"--org", org, "--agent", stranger, "--kind", "write", "--per-minute", "5"}, 1, "not found"},
		{[]string{"--org", "6f1c0a39-3f7e-4a43-9d0b-8b6f0c1f2a11", "--kind", "write", "--per-minute", "5"}, 1, "not found"},
	} {
		code, out, errs := c.run(append([]string{"ratelimit", "set"}, bad.args...)...)
		if code != bad.code || !strings.Contains(errs, bad.want) {
			t.Errorf("%v: exit %d, %q%q; want exit %d with %q", bad.args, code, errs, out, bad.code, bad.want)
		}
	}
	if ls := c.ok("ratelimit", "show", "--org", org)["rateLimits"].([]any); len(ls) != 3 {
		t.Fatalf("a refused set changed the settings: %v", ls)
	}
	if r := c.ok("ratelimit", "clear", "--org", org, "--agent", agent, "--kind", "write"); r["removed"] != true {
		t.Fatalf("clear: %v", r)
	}
	if r := c.ok("ratelimit", "clear", "--org", org, "--agent", agent, "--kind", "write"); r["removed"] != false {
		t.Fatalf("clear again: %v", r)
	}
	if ls := c.ok("ratelimit", "show", "--org", org)["rateLimits"].([]any); len(ls) != 2 {
		t.Fatalf("after clear: %v", ls)
	}
}

// Every limit an operator sets reads one way (tenancy.ParseLimit): -1 is
// unlimited for a rate limit as for a quota, and the same word is refused
// by both with the flag named.
func TestLimitFlagsReadAlike(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	if l := c.ok("ratelimit", "set", "--org", org, "--kind", "read", "--per-minute", "-1"); l["perMinute"] != nil {
		t.Fatalf("ratelimit -1: %v", l)
	}
	if q := c.ok("quota", "set", "--org", org, "--knowledge-stored", "-1"); q["limit"] != nil {
		t.Fatalf("quota -1: %v", q)
	}
	for _, bad := range []struct{ args []string }{
		{[]string{"ratelimit", "set", "--org", org, "--kind", "read", "--per-minute", "Unlimited"}},
		{[]string{"quota", "set", "--org", org, "--knowledge-stored", "Unlimited"}},
		{[]string{"ratelimit", "set", "--org", org, "--kind", "read", "--per-minute", "1.5"}},
		{[]string{"quota", "set", "--org", org, "--knowledge-stored", "1.5"}},
	} {
		flag := bad.args[len(bad.args)-2]
		if code, _, errs := c.run(bad.args...); code != 2 || !strings.Contains(errs, flag+" must be a whole number") {
			t.Errorf("%v: exit %d, %q; want exit 2 naming %s", bad.args, code, errs, flag)
		}
	}
}
