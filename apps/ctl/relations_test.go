package main

import (
	"strings"
	"testing"
)

func TestRelationTypeAdd(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	if r := c.ok("relation-type", "add", "--org", org, "--name", "BLOCKS", "--inverse", "BLOCKED_BY"); r["name"] != "BLOCKS" || r["inverse"] != "BLOCKED_BY" || r["symmetric"] != false {
		t.Fatalf("add: %v", r)
	}
	if r := c.ok("relation-type", "add", "--org", org, "--name", "PAIRS_WITH", "--symmetric"); r["inverse"] != "PAIRS_WITH" || r["symmetric"] != true {
		t.Fatalf("add symmetric: %v", r)
	}
	// Names are normalised as tags are, before the catalogue's rules.
	if r := c.ok("relation-type", "add", "--org", org, "--name", "waits on", "--inverse", "waited-on-by"); r["name"] != "WAITS_ON" || r["inverse"] != "WAITED_ON_BY" {
		t.Fatalf("add normalised: %v", r)
	}
	if code, _, errs := c.run("relation-type", "add", "--org", org, "--name", "blocked by", "--inverse", "UNBLOCKS"); code != 1 || !strings.Contains(errs, "--name") || !strings.Contains(errs, "BLOCKED_BY") {
		t.Errorf("a name that normalises to a known one: exit %d, %q", code, errs)
	}
	code, out, _ := c.run("relation-type", "list", "--org", org)
	if code != 0 || !strings.Contains(out, "BLOCKS") || !strings.Contains(out, "RELATES_TO") || !strings.Contains(out, "org's own") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--name", "BLOCKED_BY", "--inverse", "UNBLOCKS"}, 1, "--name"},
		{[]string{"--name", "GATES", "--inverse", "REQUIRED_BY"}, 1, "--inverse"},
		{[]string{"--name", "gates!", "--inverse", "GATED_BY"}, 1, "UPPER_SNAKE_CASE"},
		{[]string{"--name", "GATES", "--inverse", "gated by!"}, 1, "--inverse"},
		{[]string{"--name", "GATES"}, 2, "--symmetric"},
		{[]string{"--name", "GATES", "--inverse", "GATED_BY", "--symmetric"}, 2, "not both"},
	} {
		code, _, errs := c.run(append([]string{"relation-type", "add", "--org", org}, bad.args...)...)
		if code != bad.code || !strings.Contains(errs, bad.want) {
			t.Errorf("%v: exit %d, %q; want exit %d naming %s", bad.args, code, errs, bad.code, bad.want)
		}
	}
	if code, _, errs := c.run("relation-type", "add", "--org", "00000000-0000-4000-8000-000000000000", "--name", "GATES", "--inverse", "GATED_BY"); code != 1 || !strings.Contains(errs, "--org") {
		t.Errorf("unknown org: exit %d, %q", code, errs)
	}
}
