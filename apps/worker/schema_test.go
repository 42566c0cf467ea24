package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// An unmigrated database stops the worker at start with the command that
// migrates it.
func TestRunRefusesUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	d := testenv.EmptyPostgres(t)
	err := run(context.Background(), nil, envOf(map[string]string{
		"DATABASE_URL":        d.URL,
		"REDIS_URL":           testenv.LeaseRedis(t).URL,
		"WORKER_METRICS_ADDR": "127.0.0.1:0",
	}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not migrated") || !strings.Contains(err.Error(), "ctl migrate up") {
		t.Fatalf("got %v, want an error naming the migrate command", err)
	}
}
