package search_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// A small org where the query is near almost everything: 21 entries, 20
// sharing two of the query's four words. The 20th-nearest entry's cosine
// (the query's crowd, rank.vectorRefRank) is then about the others', and
// measured against it nothing stood out: semantic mode answered no hit.
// Semantic mode measures against the model's floor alone, so the entries
// that share meaning come back, nearest first; the unrelated one does not.
func TestSemanticSmallOrgAnswersTheNearest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	related := map[uuid.UUID]bool{}
	for i := range 20 {
		id := b.store(t, b.alice, "Billing ledger check", fmt.Sprintf("The billing ledger was checked, run %d.", 100+i))
		related[id] = true
	}
	unrelated := b.store(t, b.alice, "Garden", "Tomatoes want sun, water and patience.")
	b.embedPending(t)
	b.indexAll(t)

	const q = "billing ledger harbour lantern"
	r := b.search(t, b.alice, knowledge.SearchInput{Query: q, Mode: knowledge.ModeSemantic, Limit: ptr(10)})
	if len(r.Hits) != 10 {
		t.Fatalf("semantic mode answered %d hits, want 10 of the 20 entries sharing words with %q", len(r.Hits), q)
	}
	for i, h := range r.Hits {
		if h.ID == unrelated || !related[h.ID] {
			t.Fatalf("hit %d is %q, not one of the related entries", i, h.Title)
		}
		if h.VectorRank != i+1 || h.FullTextRank != 0 || h.TitleRank != 0 {
			t.Fatalf("hit %d: ranks (%d,%d,%d), want the vector list's rank %d alone", i, h.VectorRank, h.FullTextRank, h.TitleRank, i+1)
		}
	}
	// Ranked by meaning: by cosine, nearest first.
	if !slices.IsSortedFunc(r.Hits, func(a, b knowledge.Hit) int {
		switch {
		case *a.Signals.Cosine > *b.Signals.Cosine:
			return -1
		case *a.Signals.Cosine < *b.Signals.Cosine:
			return 1
		}
		return 0
	}) {
		t.Fatalf("hits not nearest first: %+v", r.Hits)
	}

	// The model's floor still holds: a query sharing nothing with the
	// org is answered nothing by meaning.
	none := b.search(t, b.alice, knowledge.SearchInput{Query: "zebra quokka narwhal", Mode: knowledge.ModeSemantic})
	if len(none.Hits) != 0 {
		t.Fatalf("a query sharing nothing answered %d hits in semantic mode", len(none.Hits))
	}
}
