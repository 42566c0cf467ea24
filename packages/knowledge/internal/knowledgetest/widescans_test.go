package knowledgetest

import (
	"strings"
	"testing"
)

// ReadScans counts a pass's rows as those it returned and those its filter
// removed: an index scan that keeps one entry of the org's 3,000 pending
// ones read them all (WideScans, which counts the rows returned, passes
// it), and one that reads its entry by key did not.
func TestReadScansCountTheRowsAFilterRemoved(t *testing.T) {
	plan := strings.Join([]string{
		"Query Text: -- name: MarkEmbeddingReady :one",
		"\tCTE Scan on ready  (actual rows=1 loops=1)",
		"\t  CTE ready",
		"\t    ->  Update on knowledge k  (actual rows=1 loops=1)",
		"\t          ->  Index Scan using knowledge_org_pending_idx on knowledge k  (actual rows=1 loops=1)",
		"\t                Index Cond: (org_id = $3)",
		"\t                Filter: ((id = $4) AND (embedding_generation = $5))",
		"\t                Rows Removed by Filter: 2999",
		"\t  CTE cleared",
		"\t    ->  Delete on knowledge_chunks c  (actual rows=0 loops=1)",
		"\t          ->  Index Scan using knowledge_chunks_pkey on knowledge_chunks c  (actual rows=0 loops=1)",
		"\t                Index Cond: ((org_id = $3) AND (entry_id = $4))",
	}, "\n")
	wide := ReadScans([]string{plan}, 50)
	if len(wide) != 1 || !strings.Contains(wide[0], "MarkEmbeddingReady: 3000 rows of knowledge") {
		t.Fatalf("wide scans %q; want the pending index's 3000 rows, and nothing of the chunks' key probe", wide)
	}
	if wide := WideScans([]string{plan}, 50); len(wide) != 0 {
		t.Fatalf("WideScans %q; it counts the rows a scan returned, one", wide)
	}
	byKey := strings.Replace(plan, "Rows Removed by Filter: 2999", "Rows Removed by Filter: 0", 1)
	if wide := ReadScans([]string{byKey}, 50); len(wide) != 0 {
		t.Fatalf("wide scans %q of a plan reading one row a pass", wide)
	}
	// Named as known, it is held to the rows it returns; any other name
	// leaves it counted by the rows it read.
	if wide := ReadScansBut([]string{plan}, 50, "-- name: MarkEmbeddingReady "); len(wide) != 0 {
		t.Fatalf("ReadScansBut %q of a statement named as known", wide)
	}
	if wide := ReadScansBut([]string{plan}, 50, "-- name: ListJobEntries "); len(wide) != 1 {
		t.Fatalf("ReadScansBut %q of a statement not named; want its 3000 rows", wide)
	}
}
