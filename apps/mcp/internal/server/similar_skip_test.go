package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	knowledge "github.com/agentfleet/orchestrator/packages/knowledge"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
)

// store_knowledge takes ifSimilar: skip answers the existing entry with
// skipped: true and stores nothing, the audit trail records the call as
// skipped with that entry; a bad value is refused naming the argument.
func TestStoreIfSimilarSkipThroughMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{audit: true})
	org := b.org("acme")
	a := b.agent(org, "a", allScopes, time.Hour)
	cs := b.session(a)
	args := map[string]any{"title": "Deploys are frozen on Fridays", "body": "No production deploys after 14:00 on Friday; changes wait until Monday."}
	first := b.store(cs, args)
	if first.Skipped || first.SimilarCheck == "" {
		t.Fatalf("first: %+v", first)
	}
	args["ifSimilar"] = "skip"
	res := call(t, cs, kt.ToolStore, args)
	skip := ok[knowledge.StoreResult](t, res)
	if !skip.Skipped || skip.ID != first.ID || len(skip.Similar) == 0 || skip.Similar[0].ID != first.ID ||
		!strings.Contains(text(res), `"skipped":true`) || !strings.Contains(text(res), `"similarCheck":"`) {
		t.Fatalf("skip: %s", text(res))
	}
	args["ifSimilar"] = "merge"
	e := toolErr(t, call(t, cs, kt.ToolStore, args))
	if e.Code != "invalid_argument" || e.Field != "ifSimilar" || !strings.Contains(e.Message, "skip") {
		t.Fatalf("bad value: %+v", e)
	}
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM knowledge WHERE org_id = $1", org).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d entries, %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range auditRows(t, b, org) {
		outcomes = append(outcomes, r.name+":"+r.outcome)
		if r.outcome == kt.OutcomeSkipped && (len(r.ids) == 0 || r.ids[0] != first.ID) {
			t.Errorf("the skip's record names %v, want %s", r.ids, first.ID)
		}
	}
	if got := strings.Join(outcomes, " "); got != "store_knowledge:ok store_knowledge:skipped store_knowledge:invalid_argument" {
		t.Fatalf("audit: %s", got)
	}
}
