package knowledge

import (
	"context"
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestPipelineAppliesSearchConfig checks the mechanism Search relies on:
// SearchConfig's set_config(..., true) and the next query run in the same
// batch, hence one implicit transaction, and the settings end with it.
func TestPipelineAppliesSearchConfig(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	for range 8 { // past the generic-plan threshold of cached statements
		p := &pipeline{pool: db.Pool}
		if err := sqlc.New(p).SearchConfig(ctx, "7"); err != nil {
			t.Fatal(err)
		}
		var ef, scan, plan string
		if err := p.QueryRow(ctx, "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan'), current_setting('plan_cache_mode')").Scan(&ef, &scan, &plan); err != nil {
			t.Fatal(err)
		}
		if ef != "7" || scan != "relaxed_order" || plan != "force_generic_plan" {
			t.Fatalf("settings not applied in the batch: %s %s %s", ef, scan, plan)
		}
	}
	var ef string
	if err := db.Pool.QueryRow(ctx, "SELECT current_setting('hnsw.ef_search')").Scan(&ef); err != nil {
		t.Fatal(err)
	}
	if ef == "7" {
		t.Fatal("the setting leaked out of its transaction")
	}
	if n := candidateCount(1); n != 40 {
		t.Fatalf("candidateCount(1) = %d", n)
	}
	if n := candidateCount(50); n != 200 {
		t.Fatalf("candidateCount(50) = %d", n)
	}
}
