package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

func TestSearchLanguageAndStatus(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.ok("org", "create", "--name", "acme")["id"].(string)
	pool, err := pgxpool.New(context.Background(), c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := 1; i <= 3; i++ {
		testfactory.Entry(context.Background(), t, pool, &testfactory.EntryOpts{OrgID: uuid.MustParse(org),
			Title: fmt.Sprint("note ", i), Body: fmt.Sprint("body ", i)})
	}
	if st := c.ok("search", "status", "--org", org); st["queued"].(float64) != 3 || st["textSearchConfig"] != "" {
		t.Fatalf("status before indexing: %v", st)
	} else if ixs, ok := st["vectorIndexes"].([]any); !ok || len(ixs) != 0 {
		t.Fatalf("status of a small org: vectorIndexes %v, want []", st["vectorIndexes"])
	}
	if r := c.ok("search", "language", "--org", org, "--config", "german"); r["queued"].(float64) != 3 {
		t.Fatalf("language: %v", r)
	}
	if st := c.ok("search", "status", "--org", org); st["textSearchConfig"] != "german" || st["queued"].(float64) != 3 {
		t.Fatalf("status after the change: %v", st)
	}
	code, _, errs := c.run("search", "language", "--org", org, "--config", "klingon")
	if code != 1 || !strings.Contains(errs, "--config") || !strings.Contains(errs, "klingon") {
		t.Fatalf("unknown configuration: exit %d, %q", code, errs)
	}
	if code, _, errs := c.run("search", "language", "--org", org); code != 2 || !strings.Contains(errs, "--config") {
		t.Fatalf("missing --config: exit %d, %q", code, errs)
	}
}
