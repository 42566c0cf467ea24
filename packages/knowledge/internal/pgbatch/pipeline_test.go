package pgbatch

import (
	"context"
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestPipelineAppliesSearchConfig checks the mechanism knowledge's search
// relies on: SearchConfig's set_config(..., true) and the next query run in
// the same batch, hence one implicit transaction, and the settings end with
// it.
func TestPipelineAppliesSearchConfig(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	for i := range 8 { // past the generic-plan threshold of cached statements
		pin := i%2 == 1 // the vector list's statement pins its scans
		p := New(db.Pool)
		if err := sqlc.New(p).SearchConfig(ctx, sqlc.SearchConfigParams{EfSearch: "7", PinVectorPlan: pin}); err != nil {
			t.Fatal(err)
		}
		var ef, scan, plan, seq, sort, bitmap string
		if err := p.QueryRow(ctx, `SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan'), current_setting('plan_cache_mode'),
			current_setting('enable_seqscan'), current_setting('enable_sort'), current_setting('enable_bitmapscan')`).Scan(&ef, &scan, &plan, &seq, &sort, &bitmap); err != nil {
			t.Fatal(err)
		}
		// On a Citus coordinator SearchConfig keeps plans custom (a generic
		// plan cannot be routed to the org's worker: queries/search.sql).
		wantPlan := "force_generic_plan"
		if testenv.IsCluster() {
			wantPlan = "auto"
		}
		if ef != "7" || scan != "relaxed_order" || plan != wantPlan {
			t.Fatalf("settings not applied in the batch: %s %s %s (plan_cache_mode want %s)", ef, scan, plan, wantPlan)
		}
		want := map[bool]string{true: "off", false: "on"}[pin]
		if seq != want || sort != want || bitmap != want {
			t.Fatalf("pin %v: enable_seqscan, enable_sort, enable_bitmapscan = %s %s %s, want %s", pin, seq, sort, bitmap, want)
		}
	}
	var ef, seq string
	if err := db.Pool.QueryRow(ctx, "SELECT current_setting('hnsw.ef_search'), current_setting('enable_seqscan')").Scan(&ef, &seq); err != nil {
		t.Fatal(err)
	}
	if ef == "7" || seq != "on" {
		t.Fatal("the settings leaked out of their transaction")
	}
}
