package knowledge_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

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

func relSet(rs []knowledge.Relation) map[string]bool {
	m := map[string]bool{}
	for _, r := range rs {
		m[fmt.Sprintf("%s %s %s", r.Type, r.Direction, r.OtherID)] = true
	}
	return m
}

func TestRelationsReadFromBothEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runbook := b.store(t, b.alice, "Runbook: restart the queue", "steps")
	incident := b.store(t, b.bob, "Incident 42", "the queue stalled")
	bench := b.store(t, b.bob, "Benchmark", "figures")

	// Linking needs no authorship: alice links bob's entries.
	r := b.link(t, b.alice, runbook, "FIXES", incident)
	if r.Type != "FIXES" || r.Inverse != "FIXED_BY" || r.Existed || r.ValidTo != nil || *r.CreatedByAgentID != b.alice.AgentID {
		t.Fatalf("link answer: %+v", r)
	}
	// The same relation named from the other end is the same relation.
	again, err := b.svc.Link(b.ctx, b.bob, knowledge.LinkInput{FromID: incident, ToID: runbook, Type: "FIXED_BY"})
	if err != nil || !again.Existed || again.ID != r.ID || again.Inverse != "FIXES" {
		t.Fatalf("inverse link: %+v %v", again, err)
	}
	// Symmetric: one relation whichever end made it.
	s1 := b.link(t, b.alice, bench, "CONTRADICTS", incident)
	s2 := b.link(t, b.alice, incident, "CONTRADICTS", bench)
	if !s2.Existed || s2.ID != s1.ID {
		t.Fatalf("symmetric twice: %+v %+v", s1, s2)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_relations"); n != 2 {
		t.Fatalf("%d relation rows, want 2", n)
	}

	got := relSet(b.relations(t, b.bob, knowledge.RelationsInput{ID: incident}))
	want := map[string]bool{
		"FIXED_BY in " + runbook.String():    true,
		"CONTRADICTS both " + bench.String(): true,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("incident's relations: %v, want %v", got, want)
	}
	got = relSet(b.relations(t, b.bob, knowledge.RelationsInput{ID: runbook}))
	if !got["FIXES out "+incident.String()] || len(got) != 1 {
		t.Fatalf("runbook's relations: %v", got)
	}
	got = relSet(b.relations(t, b.bob, knowledge.RelationsInput{ID: bench}))
	if !got["CONTRADICTS both "+incident.String()] || len(got) != 1 {
		t.Fatalf("bench's relations: %v", got)
	}

	// Filters: direction and types name what is read from the entry.
	if got := b.relations(t, b.bob, knowledge.RelationsInput{ID: incident, Direction: "out"}); len(got) != 1 || got[0].Type != "CONTRADICTS" {
		t.Fatalf("direction out: %+v", got)
	}
	if got := b.relations(t, b.bob, knowledge.RelationsInput{ID: incident, Types: []string{"FIXED_BY"}}); len(got) != 1 || got[0].OtherID != runbook {
		t.Fatalf("types FIXED_BY: %+v", got)
	}
	if got := b.relations(t, b.bob, knowledge.RelationsInput{ID: incident, Types: []string{"FIXES"}}); len(got) != 0 {
		t.Fatalf("types FIXES from the fixed end: %+v", got)
	}
	if got := b.relations(t, b.bob, knowledge.RelationsInput{ID: runbook}); got[0].OtherTitle != "Incident 42" || got[0].OtherState != "head" {
		t.Fatalf("other entry: %+v", got[0])
	}

	// The entry's summary.
	e, err := b.svc.Get(b.ctx, b.bob, incident)
	if err != nil {
		t.Fatal(err)
	}
	if e.Relations == nil || e.Relations.Open != 2 || len(e.Relations.ByType) != 2 || len(e.Relations.First) != 2 {
		t.Fatalf("summary: %+v", e.Relations)
	}
}

func TestLinkRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.store(t, b.alice, "A", "a")
	c := b.store(t, b.alice, "C", "c")
	x := b.store(t, b.eve, "X", "x") // another org

	_, err := b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: a, ToID: c, Type: "BLOCKS"})
	e := wantCode(t, err, errs.CodeInvalidArgument, "type")
	if !strings.Contains(e.Message, "RELATES_TO") || !strings.Contains(e.Message, "DEPENDS_ON") {
		t.Fatalf("unknown type message names no known types: %s", e.Message)
	}
	_, err = b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: a, ToID: c, Type: "relates_to"})
	wantCode(t, err, errs.CodeInvalidArgument, "type")
	_, err = b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: a, ToID: a, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeInvalidArgument, "toId")
	for _, ro := range []string{"SUPERSEDES", "SUPERSEDED_BY"} {
		_, err = b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: a, ToID: c, Type: ro})
		if e := wantCode(t, err, errs.CodeInvalidArgument, "type"); !strings.Contains(e.Message, "supersede_knowledge") {
			t.Fatalf("read-only type: %s", e.Message)
		}
	}
	_, err = b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: a, ToID: c, Type: "RELATES_TO", Note: strings.Repeat("n", 501)})
	wantCode(t, err, errs.CodeInvalidArgument, "note")

	// Tenancy: another org's id is not_found, for every call and both ends.
	_, err = b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: a, ToID: x, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "toId")
	_, err = b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: x, ToID: a, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "fromId")
	_, err = b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: a, ToID: uuid.New(), Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "toId")
	_, err = b.svc.Unlink(b.ctx, b.alice, a, x, "RELATES_TO")
	wantCode(t, err, errs.CodeNotFound, "toId")
	_, err = b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: x})
	wantCode(t, err, errs.CodeNotFound, "id")
	b.link(t, b.alice, a, "RELATES_TO", c)
	_, err = b.svc.Relations(b.ctx, b.eve, knowledge.RelationsInput{ID: a})
	wantCode(t, err, errs.CodeNotFound, "id")
	_, err = b.svc.Link(b.ctx, b.eve, knowledge.LinkInput{FromID: x, ToID: a, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "toId")

	// Unlinking what was never linked.
	_, err = b.svc.Unlink(b.ctx, b.alice, a, c, "DEPENDS_ON")
	wantCode(t, err, errs.CodeNotFound, "type")
	// Bad list arguments.
	_, err = b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: a, Direction: "up"})
	wantCode(t, err, errs.CodeInvalidArgument, "direction")
	_, err = b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: a, Types: []string{"RELATES_TO", "NOPE"}})
	wantCode(t, err, errs.CodeInvalidArgument, "types[1]")
	_, err = b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: a, Limit: new(101)})
	wantCode(t, err, errs.CodeInvalidArgument, "limit")
	_, err = b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: a, Limit: new(0)})
	wantCode(t, err, errs.CodeInvalidArgument, "limit")
	_, err = b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: a, AsOf: ptr(time.Now().Add(time.Hour))})
	wantCode(t, err, errs.CodeInvalidArgument, "asOf")
	if n := b.count(t, "SELECT count(*) FROM knowledge_relations"); n != 1 {
		t.Fatalf("refusals wrote relations: %d rows", n)
	}
}

func TestUnlinkKeepsHistoryAndAsOfSeesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.store(t, b.alice, "Decision", "we chose X")
	d := b.store(t, b.alice, "Benchmark", "X is fast")
	before := time.Now()
	time.Sleep(20 * time.Millisecond)
	l := b.link(t, b.alice, a, "DEPENDS_ON", d)
	time.Sleep(20 * time.Millisecond)
	whileOpen := time.Now()
	time.Sleep(20 * time.Millisecond)

	u, err := b.svc.Unlink(b.ctx, b.bob, d, a, "REQUIRED_BY") // from the other end, by another agent
	if err != nil || u.ID != l.ID || u.ValidTo == nil || u.AlreadyClosed {
		t.Fatalf("unlink: %+v %v", u, err)
	}
	u2, err := b.svc.Unlink(b.ctx, b.bob, a, d, "DEPENDS_ON")
	if err != nil || !u2.AlreadyClosed || u2.ID != l.ID {
		t.Fatalf("unlink again: %+v %v", u2, err)
	}
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: a}); len(got) != 0 {
		t.Fatalf("closed relation still listed: %+v", got)
	}
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: a, IncludeClosed: true}); len(got) != 1 || got[0].ValidTo == nil {
		t.Fatalf("includeClosed: %+v", got)
	}
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: a, AsOf: &whileOpen}); len(got) != 1 || got[0].Type != "DEPENDS_ON" {
		t.Fatalf("asOf while open: %+v", got)
	}
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: d, AsOf: &whileOpen}); len(got) != 1 || got[0].Type != "REQUIRED_BY" {
		t.Fatalf("asOf while open, other end: %+v", got)
	}
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: a, AsOf: &before}); len(got) != 0 {
		t.Fatalf("asOf before the link: %+v", got)
	}
	// Linking again opens a new relation; the closed one stays.
	l2 := b.link(t, b.alice, a, "DEPENDS_ON", d)
	if l2.Existed || l2.ID == l.ID {
		t.Fatalf("relink: %+v", l2)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_relations"); n != 2 {
		t.Fatalf("%d rows, want the closed and the open one", n)
	}
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

func TestRelationsPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hub := b.store(t, b.alice, "Hub", "hub")
	want := map[uuid.UUID]bool{}
	for i := range 7 {
		o := b.store(t, b.alice, fmt.Sprintf("Part %d", i), "part")
		b.link(t, b.alice, o, "PART_OF", hub)
		want[o] = true
	}
	seen := map[uuid.UUID]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		r, err := b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: hub, Limit: new(3), Cursor: cursor, Types: []string{"HAS_PART"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range r.Relations {
			if seen[rel.OtherID] || rel.Type != "HAS_PART" {
				t.Fatalf("page %d: %+v", pages, rel)
			}
			seen[rel.OtherID] = true
		}
		if r.NextCursor == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = r.NextCursor
		// A cursor is refused with other filters.
		_, err = b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: hub, Limit: new(3), Cursor: cursor})
		wantCode(t, err, errs.CodeInvalidArgument, "cursor")
	}
	if len(seen) != len(want) {
		t.Fatalf("paged %d of %d", len(seen), len(want))
	}

	// Relations made in one transaction share their validFrom: pages cut
	// through the tie neither repeat nor skip (the key breaks it).
	if _, err := b.pool.Exec(b.ctx, `
		WITH e AS (INSERT INTO knowledge (org_id, title, body) SELECT $1, 'tied ' || i, 'x' FROM generate_series(1, 8) i RETURNING id)
		INSERT INTO knowledge_relations (org_id, from_id, to_id, type) SELECT $1, $2, e.id, 'RELATES_TO' FROM e`, b.org, hub); err != nil {
		t.Fatal(err)
	}
	seen = map[uuid.UUID]bool{}
	cursor = ""
	for pages := 0; ; pages++ {
		r, err := b.svc.Relations(b.ctx, b.alice, knowledge.RelationsInput{ID: hub, Limit: new(3), Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range r.Relations {
			if seen[rel.OtherID] {
				t.Fatalf("page %d repeats %v", pages, rel.OtherID)
			}
			seen[rel.OtherID] = true
		}
		if r.NextCursor == "" || pages > 10 {
			break
		}
		cursor = r.NextCursor
	}
	if len(seen) != len(want)+8 {
		t.Fatalf("paged %d of %d with ties", len(seen), len(want)+8)
	}
}

func TestRelationCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hub := b.store(t, b.alice, "Hub", "hub")
	spoke := b.store(t, b.alice, "Spoke", "spoke")
	last := b.store(t, b.alice, "Last", "last")
	// Fill the hub up to the cap directly (fast), with other entries as ends.
	if _, err := b.pool.Exec(b.ctx, `
		WITH e AS (INSERT INTO knowledge (org_id, title, body) SELECT $1, 'filler ' || i, 'x' FROM generate_series(1, $3) i RETURNING id)
		INSERT INTO knowledge_relations (org_id, from_id, to_id, type) SELECT $1, e.id, $2, 'RELATES_TO' FROM e`,
		b.org, hub, knowledge.MaxRelationsPerEntry-1); err != nil {
		t.Fatal(err)
	}
	b.link(t, b.alice, spoke, "DEPENDS_ON", hub) // the 1,000th
	_, err := b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: last, ToID: hub, Type: "DEPENDS_ON"})
	wantCode(t, err, errs.CodeConflict, "toId")
	// An existing relation is still answered, and a closed one frees a place.
	if r := b.link(t, b.alice, spoke, "DEPENDS_ON", hub); !r.Existed {
		t.Fatalf("existing relation at the cap: %+v", r)
	}
	if _, err := b.svc.Unlink(b.ctx, b.alice, spoke, hub, "DEPENDS_ON"); err != nil {
		t.Fatal(err)
	}
	b.link(t, b.alice, last, "DEPENDS_ON", hub)
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
		st, err := b.svc.Stats(b.ctx, b.org, 0)
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

	rep, err := b.ops.Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: d}, true)
	if err != nil || rep.Relations != 2 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	rep, err = b.ops.Purge(b.ctx, b.org, knowledge.PurgeScope{All: true}, false)
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

func TestOrgRelationTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.ops.AddRelationType(b.ctx, b.org, "BLOCKS", "BLOCKED_BY", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ops.AddRelationType(b.ctx, b.org, "PAIRS_WITH", "", true); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ name, inv, field string }{
		{"BLOCKED_BY", "UNBLOCKS", "name"},
		{"GATES", "REQUIRED_BY", "inverse"},
		{"RELATES_TO", "X_Y", "name"},
	} {
		_, err := b.ops.AddRelationType(b.ctx, b.org, bad.name, bad.inv, false)
		wantCode(t, err, errs.CodeConflict, bad.field)
	}
	_, err := b.ops.AddRelationType(b.ctx, b.org, "blocks", "X_Y", false)
	wantCode(t, err, errs.CodeInvalidArgument, "name")
	_, err = b.ops.AddRelationType(b.ctx, b.org, "GATES", "", false)
	wantCode(t, err, errs.CodeInvalidArgument, "inverse")

	a := b.store(t, b.alice, "A", "a")
	c := b.store(t, b.alice, "C", "c")
	if r := b.link(t, b.alice, c, "BLOCKED_BY", a); r.Inverse != "BLOCKS" {
		t.Fatalf("org type: %+v", r)
	}
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: a}); len(got) != 1 || got[0].Type != "BLOCKS" || got[0].Direction != "out" {
		t.Fatalf("org type read from a: %+v", got)
	}
	b.link(t, b.alice, a, "PAIRS_WITH", c)
	if got := b.relations(t, b.alice, knowledge.RelationsInput{ID: c, Types: []string{"PAIRS_WITH"}}); len(got) != 1 || got[0].Direction != "both" {
		t.Fatalf("org symmetric type: %+v", got)
	}
	// Another org does not have them.
	x := b.store(t, b.eve, "X", "x")
	y := b.store(t, b.eve, "Y", "y")
	_, err = b.svc.Link(b.ctx, b.eve, knowledge.LinkInput{FromID: x, ToID: y, Type: "BLOCKS"})
	wantCode(t, err, errs.CodeInvalidArgument, "type")
	types, err := b.svc.RelationTypes(b.ctx, b.alice)
	if err != nil || len(types) != len(knowledge.BuiltinRelationTypes)+2 {
		t.Fatalf("catalogue: %d types, %v", len(types), err)
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

// TestTaskRunnerLinks: orchestration code links with the org alone (no
// agent), under the same rules.
func TestTaskRunnerLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := knowledge.Caller{OrgID: b.org}
	step1 := b.store(t, b.alice, "Step 1 finding", "the cache is cold")
	step2 := b.store(t, b.bob, "Step 2 finding", "warming takes 3 minutes")
	r, err := b.svc.Link(b.ctx, runner, knowledge.LinkInput{FromID: step2, ToID: step1, Type: "DERIVED_FROM", Note: "task 7"})
	if err != nil || r.CreatedByAgentID != nil || r.Inverse != "SOURCE_OF" {
		t.Fatalf("runner link: %+v %v", r, err)
	}
	got, err := b.svc.Relations(b.ctx, runner, knowledge.RelationsInput{ID: step1})
	if err != nil || len(got.Relations) != 1 || got.Relations[0].Type != "SOURCE_OF" || got.Relations[0].Note != "task 7" {
		t.Fatalf("runner relations: %+v %v", got, err)
	}
	if _, err := b.svc.Unlink(b.ctx, runner, step1, step2, "SOURCE_OF"); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Link(b.ctx, knowledge.Caller{OrgID: b.other}, knowledge.LinkInput{FromID: step2, ToID: step1, Type: "DERIVED_FROM"})
	wantCode(t, err, errs.CodeNotFound, "fromId")
}
