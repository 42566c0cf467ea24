package main

import (
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// Every command but migrate refuses an unmigrated database naming the
// command that migrates it (migrate itself: TestMigrateUpOnEmptyDatabase).
func TestCommandsRefuseUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, url: testenv.EmptyPostgres(t).URL}
	for _, args := range [][]string{{"org", "create", "--name", "acme"}, {"dev", "bootstrap"}} {
		code, out, errs := c.run(args...)
		if code != exitError || !strings.Contains(errs, "not migrated") || !strings.Contains(errs, "go tool task migrate") {
			t.Errorf("ctl %v: exit %d, stdout %q, stderr %q; want exit 1 naming the migrate command", args, code, out, errs)
		}
	}
}
