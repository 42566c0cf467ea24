package knowledge_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

func (b *bundle) link(t *testing.T, c knowledge.Caller, from uuid.UUID, typ string, to uuid.UUID) *knowledge.RelationChange {
	t.Helper()
	r, err := b.svc.Link(b.ctx, c, knowledge.LinkInput{FromID: from, ToID: to, Type: typ})
	if err != nil {
		t.Fatalf("link %s: %v", typ, err)
	}
	return r
}

func (b *bundle) relations(t *testing.T, c knowledge.Caller, in knowledge.RelationsInput) []knowledge.Relation {
	t.Helper()
	r, err := b.svc.Relations(b.ctx, c, in)
	if err != nil {
		t.Fatalf("relations: %v", err)
	}
	return r.Relations
}

func TestSupersessionReadsAsRelations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.store(t, b.alice, "Old", "v1")
	nw := b.store(t, b.alice, "New", "v2")
	if _, err := b.svc.Supersede(b.ctx, b.alice, old, nw); err != nil {
		t.Fatal(err)
	}
	got := b.relations(t, b.alice, knowledge.RelationsInput{ID: nw})
	if len(got) != 1 || got[0].Type != "SUPERSEDES" || got[0].OtherID != old || !got[0].Derived || got[0].OtherState != "superseded" {
		t.Fatalf("new's relations: %+v", got)
	}
	got = b.relations(t, b.alice, knowledge.RelationsInput{ID: old, Types: []string{"SUPERSEDED_BY"}})
	if len(got) != 1 || got[0].Type != "SUPERSEDED_BY" || got[0].OtherID != nw {
		t.Fatalf("old's relations: %+v", got)
	}
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: old, Types: []string{"RELATES_TO"}}); len(got) != 0 {
		t.Fatalf("type filter let a derived relation through: %+v", got)
	}
}

func TestForgetAndPurgeEraseRelations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.store(t, b.alice, "A", "a")
	c := b.store(t, b.bob, "C", "c")
	d := b.store(t, b.bob, "D", "d")
	b.link(t, b.bob, a, "RELATES_TO", c)
	b.link(t, b.bob, c, "DEPENDS_ON", a)
	b.link(t, b.bob, a, "DERIVED_FROM", d)
	if _, err := b.svc.Unlink(b.ctx, b.bob, a, d, "DERIVED_FROM"); err != nil {
		t.Fatal(err)
	}
	b.link(t, b.bob, c, "FIXES", d)
	b.link(t, b.bob, d, "CAUSED_BY", c)
	if _, err := b.svc.Unlink(b.ctx, b.bob, c, d, "CAUSES"); err != nil {
		t.Fatal(err)
	}
	// ctl stats and knowledge://stats count the open relations by type.
	wantStats := func(open int64, byType string) {
		t.Helper()
		st, err := b.svc.Operations().Stats(b.ctx, b.org, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(st.RelationsByType); st.OpenRelations != open || got != byType {
			t.Fatalf("stats: %d open, %s; want %d, %s", st.OpenRelations, got, open, byType)
		}
	}
	wantStats(3, "[{DEPENDS_ON 1} {FIXES 1} {RELATES_TO 1}]")

	f, err := b.svc.Forget(b.ctx, b.alice, a, "wrong", false)
	if err != nil {
		t.Fatal(err)
	}
	if f.Relations != 2 {
		t.Fatalf("tombstone keeps %d open relations, want 2", f.Relations)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_relations WHERE from_id = $1 OR to_id = $1", a); n != 0 {
		t.Fatalf("%d relations of the forgotten entry left", n)
	}
	wantStats(1, "[{FIXES 1}]")
	got := b.relations(t, b.bob, knowledge.RelationsInput{ID: c, IncludeClosed: true})
	if len(got) != 2 || got[0].OtherID != d || got[1].OtherID != d {
		t.Fatalf("c's relations after forget: %+v", got)
	}
	if e, err := b.svc.Get(b.ctx, b.alice, a); err != nil || e.Forgotten == nil || e.Forgotten.Relations != 2 {
		t.Fatalf("tombstone read: %+v %v", e, err)
	}
	_, err = b.svc.Link(b.ctx, b.bob, knowledge.LinkInput{FromID: c, ToID: a, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "toId")
	_, err = b.svc.Relations(b.ctx, b.bob, knowledge.RelationsInput{ID: a})
	wantCode(t, err, errs.CodeNotFound, "id")

	rep, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: d}, true)
	if err != nil || rep.Relations != 2 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	rep, err = b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{All: true}, false)
	if err != nil || rep.Relations != 2 {
		t.Fatalf("purge: %+v %v", rep, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_relations"); n != 0 {
		t.Fatalf("%d relations left after purge", n)
	}
	if _, err := maint(b.ops).CompactCounts(b.ctx, 0); err != nil {
		t.Fatal(err)
	}
	wantStats(0, "[]")
	if n := b.count(t, "SELECT count(*) FROM knowledge_counts WHERE kind = 'relation'"); n != 0 {
		t.Fatalf("%d relation counters left after purge and fold", n)
	}
}

// TestRelationsRace links, unlinks and forgets the same few entries from 64
// goroutines: no relation may be left with a missing end, and no two open
// relations may share a key.
func TestRelationsRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 24
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = b.store(t, b.alice, fmt.Sprintf("E%d", i), "e")
	}
	types := []string{"RELATES_TO", "DEPENDS_ON", "REQUIRED_BY", "CONTRADICTS"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var unexpected []error
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 25 {
				x, y := ids[rng.IntN(n)], ids[rng.IntN(n)]
				if x == y {
					continue
				}
				typ := types[rng.IntN(len(types))]
				var err error
				switch k := rng.IntN(60); {
				case k == 0:
					_, err = b.svc.Forget(b.ctx, b.alice, x, "race", false)
				case k < 24:
					_, err = b.svc.Unlink(b.ctx, b.bob, x, y, typ)
				default:
					_, err = b.svc.Link(b.ctx, b.bob, knowledge.LinkInput{FromID: x, ToID: y, Type: typ})
				}
				if err != nil && errs.CodeOf(err) != errs.CodeNotFound {
					mu.Lock()
					unexpected = append(unexpected, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("%d unexpected errors, first: %v", len(unexpected), unexpected[0])
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_relations r
		WHERE NOT EXISTS (SELECT 1 FROM knowledge k WHERE k.org_id = r.org_id AND k.id = r.from_id)
		   OR NOT EXISTS (SELECT 1 FROM knowledge k WHERE k.org_id = r.org_id AND k.id = r.to_id)`); n != 0 {
		t.Fatalf("%d dangling relations", n)
	}
	if n := b.count(t, `SELECT count(*) FROM (SELECT 1 FROM knowledge_relations WHERE valid_to IS NULL
		GROUP BY org_id, from_id, type, to_id HAVING count(*) > 1) d`); n != 0 {
		t.Fatalf("%d duplicate open relations", n)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_relations WHERE type IN ('RELATES_TO', 'CONTRADICTS') AND from_id > to_id`); n != 0 {
		t.Fatalf("%d symmetric relations stored out of order", n)
	}
}

// TestGetSummarisesRelations: get_knowledge answers an entry's relations
// (package relations' Summary), named from its end.
func TestGetSummarisesRelations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runbook := b.store(t, b.alice, "Runbook: restart the queue", "steps")
	incident := b.store(t, b.bob, "Incident 42", "the queue stalled")
	bench := b.store(t, b.bob, "Benchmark", "figures")
	b.link(t, b.alice, runbook, "FIXES", incident)
	b.link(t, b.alice, bench, "CONTRADICTS", incident)
	e, err := b.svc.Get(b.ctx, b.bob, incident)
	if err != nil {
		t.Fatal(err)
	}
	if e.Relations == nil || e.Relations.Open != 2 || len(e.Relations.ByType) != 2 || len(e.Relations.First) != 2 {
		t.Fatalf("summary: %+v", e.Relations)
	}
}
