package main

import (
	"context"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// An unmigrated database stops the server at start with the command that
// migrates it (not a raw SQL error on the first call).
func TestRunRefusesUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	d := testenv.EmptyPostgres(t)
	env := map[string]string{"DATABASE_URL": d.URL, "REDIS_URL": testenv.LeaseRedis(t).URL, "MCP_ADDR": "127.0.0.1:0"}
	var out, errb testenv.Buffer
	err := run(context.Background(), nil, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "not migrated") || !strings.Contains(err.Error(), "go tool task migrate") {
		t.Fatalf("got %v, want an error naming the migrate command", err)
	}
}
