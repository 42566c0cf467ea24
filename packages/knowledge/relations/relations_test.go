package relations_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
	"github.com/google/uuid"
)

func TestRelationsReadFromBothEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runbook := b.entry(t, b.alice, "Runbook: restart the queue", "steps")
	incident := b.entry(t, b.bob, "Incident 42", "the queue stalled")
	bench := b.entry(t, b.bob, "Benchmark", "figures")

	// Linking needs no authorship: alice links bob's entries.
	r := b.link(t, b.alice, runbook, "FIXES", incident)
	if r.Type != "FIXES" || r.Inverse != "FIXED_BY" || r.Existed || r.ValidTo != nil || *r.CreatedByAgentID != b.alice.AgentID {
		t.Fatalf("link answer: %+v", r)
	}
	// The same relation named from the other end is the same relation.
	again, err := b.Link(b.bob, domain.LinkInput{FromID: incident, ToID: runbook, Type: "FIXED_BY"})
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

	got := relSet(b.relations(t, b.bob, domain.RelationsInput{ID: incident}))
	want := map[string]bool{
		"FIXED_BY in " + runbook.String():    true,
		"CONTRADICTS both " + bench.String(): true,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("incident's relations: %v, want %v", got, want)
	}
	got = relSet(b.relations(t, b.bob, domain.RelationsInput{ID: runbook}))
	if !got["FIXES out "+incident.String()] || len(got) != 1 {
		t.Fatalf("runbook's relations: %v", got)
	}
	got = relSet(b.relations(t, b.bob, domain.RelationsInput{ID: bench}))
	if !got["CONTRADICTS both "+incident.String()] || len(got) != 1 {
		t.Fatalf("bench's relations: %v", got)
	}

	// Filters: direction and types name what is read from the entry.
	if got := b.relations(t, b.bob, domain.RelationsInput{ID: incident, Direction: "out"}); len(got) != 1 || got[0].Type != "CONTRADICTS" {
		t.Fatalf("direction out: %+v", got)
	}
	if got := b.relations(t, b.bob, domain.RelationsInput{ID: incident, Types: []string{"FIXED_BY"}}); len(got) != 1 || got[0].OtherID != runbook {
		t.Fatalf("types FIXED_BY: %+v", got)
	}
	if got := b.relations(t, b.bob, domain.RelationsInput{ID: incident, Types: []string{"FIXES"}}); len(got) != 0 {
		t.Fatalf("types FIXES from the fixed end: %+v", got)
	}
	if got := b.relations(t, b.bob, domain.RelationsInput{ID: runbook}); got[0].OtherTitle != "Incident 42" || got[0].OtherState != "head" {
		t.Fatalf("other entry: %+v", got[0])
	}

	// The entry's summary (get_knowledge's relations).
	sum, err := b.Summary(b.bob, incident)
	if err != nil {
		t.Fatal(err)
	}
	if sum == nil || sum.Open != 2 || len(sum.ByType) != 2 || len(sum.First) != 2 {
		t.Fatalf("summary: %+v", sum)
	}
}

func TestLinkRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.entry(t, b.alice, "A", "a")
	c := b.entry(t, b.alice, "C", "c")
	x := b.entry(t, b.eve, "X", "x") // another org

	_, err := b.Link(b.alice, domain.LinkInput{FromID: a, ToID: c, Type: "BLOCKS"})
	e := wantCode(t, err, errs.CodeInvalidArgument, "type")
	if !strings.Contains(e.Message, "RELATES_TO") || !strings.Contains(e.Message, "DEPENDS_ON") {
		t.Fatalf("unknown type message names no known types: %s", e.Message)
	}
	_, err = b.Link(b.alice, domain.LinkInput{FromID: a, ToID: c, Type: "relates to!"})
	if e := wantCode(t, err, errs.CodeInvalidArgument, "type"); !strings.Contains(e.Message, "even after normalisation") {
		t.Fatalf("a type no normalisation makes a name: %s", e.Message)
	}
	_, err = b.Link(b.alice, domain.LinkInput{FromID: a, ToID: a, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeInvalidArgument, "toId")
	for _, ro := range []string{"SUPERSEDES", "SUPERSEDED_BY"} {
		_, err = b.Link(b.alice, domain.LinkInput{FromID: a, ToID: c, Type: ro})
		if e := wantCode(t, err, errs.CodeInvalidArgument, "type"); !strings.Contains(e.Message, "supersede_knowledge") {
			t.Fatalf("read-only type: %s", e.Message)
		}
	}
	_, err = b.Link(b.alice, domain.LinkInput{FromID: a, ToID: c, Type: "RELATES_TO", Note: strings.Repeat("n", 501)})
	wantCode(t, err, errs.CodeInvalidArgument, "note")

	// Tenancy: another org's id is not_found, for every call and both ends.
	_, err = b.Link(b.alice, domain.LinkInput{FromID: a, ToID: x, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "toId")
	_, err = b.Link(b.alice, domain.LinkInput{FromID: x, ToID: a, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "fromId")
	_, err = b.Link(b.alice, domain.LinkInput{FromID: a, ToID: uuid.New(), Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "toId")
	_, err = b.Unlink(b.alice, a, x, "RELATES_TO")
	wantCode(t, err, errs.CodeNotFound, "toId")
	_, err = b.Relations(b.alice, domain.RelationsInput{ID: x})
	wantCode(t, err, errs.CodeNotFound, "id")
	b.link(t, b.alice, a, "RELATES_TO", c)
	_, err = b.Relations(b.eve, domain.RelationsInput{ID: a})
	wantCode(t, err, errs.CodeNotFound, "id")
	_, err = b.Link(b.eve, domain.LinkInput{FromID: x, ToID: a, Type: "RELATES_TO"})
	wantCode(t, err, errs.CodeNotFound, "toId")

	// Unlinking what was never linked.
	_, err = b.Unlink(b.alice, a, c, "DEPENDS_ON")
	wantCode(t, err, errs.CodeNotFound, "type")
	// Bad list arguments.
	_, err = b.Relations(b.alice, domain.RelationsInput{ID: a, Direction: "up"})
	wantCode(t, err, errs.CodeInvalidArgument, "direction")
	_, err = b.Relations(b.alice, domain.RelationsInput{ID: a, Types: []string{"RELATES_TO", "NOPE"}})
	wantCode(t, err, errs.CodeInvalidArgument, "types[1]")
	_, err = b.Relations(b.alice, domain.RelationsInput{ID: a, Limit: new(101)})
	wantCode(t, err, errs.CodeInvalidArgument, "limit")
	_, err = b.Relations(b.alice, domain.RelationsInput{ID: a, Limit: new(0)})
	wantCode(t, err, errs.CodeInvalidArgument, "limit")
	_, err = b.Relations(b.alice, domain.RelationsInput{ID: a, AsOf: ptr(time.Now().Add(time.Hour))})
	wantCode(t, err, errs.CodeInvalidArgument, "asOf")
	if n := b.count(t, "SELECT count(*) FROM knowledge_relations"); n != 1 {
		t.Fatalf("refusals wrote relations: %d rows", n)
	}
}

func TestUnlinkKeepsHistoryAndAsOfSeesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.entry(t, b.alice, "Decision", "we chose X")
	d := b.entry(t, b.alice, "Benchmark", "X is fast")
	before := time.Now()
	time.Sleep(20 * time.Millisecond)
	l := b.link(t, b.alice, a, "DEPENDS_ON", d)
	time.Sleep(20 * time.Millisecond)
	whileOpen := time.Now()
	time.Sleep(20 * time.Millisecond)

	u, err := b.Unlink(b.bob, d, a, "REQUIRED_BY") // from the other end, by another agent
	if err != nil || u.ID != l.ID || u.ValidTo == nil || u.AlreadyClosed {
		t.Fatalf("unlink: %+v %v", u, err)
	}
	u2, err := b.Unlink(b.bob, a, d, "DEPENDS_ON")
	if err != nil || !u2.AlreadyClosed || u2.ID != l.ID {
		t.Fatalf("unlink again: %+v %v", u2, err)
	}
	if got := b.relations(t, b.alice, domain.RelationsInput{ID: a}); len(got) != 0 {
		t.Fatalf("closed relation still listed: %+v", got)
	}
	if got := b.relations(t, b.alice, domain.RelationsInput{ID: a, IncludeClosed: true}); len(got) != 1 || got[0].ValidTo == nil {
		t.Fatalf("includeClosed: %+v", got)
	}
	if got := b.relations(t, b.alice, domain.RelationsInput{ID: a, AsOf: &whileOpen}); len(got) != 1 || got[0].Type != "DEPENDS_ON" {
		t.Fatalf("asOf while open: %+v", got)
	}
	if got := b.relations(t, b.alice, domain.RelationsInput{ID: d, AsOf: &whileOpen}); len(got) != 1 || got[0].Type != "REQUIRED_BY" {
		t.Fatalf("asOf while open, other end: %+v", got)
	}
	if got := b.relations(t, b.alice, domain.RelationsInput{ID: a, AsOf: &before}); len(got) != 0 {
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

func TestRelationsPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hub := b.entry(t, b.alice, "Hub", "hub")
	want := map[uuid.UUID]bool{}
	for i := range 7 {
		o := b.entry(t, b.alice, fmt.Sprintf("Part %d", i), "part")
		b.link(t, b.alice, o, "PART_OF", hub)
		want[o] = true
	}
	seen := map[uuid.UUID]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		r, err := b.Relations(b.alice, domain.RelationsInput{ID: hub, Limit: new(3), Cursor: cursor, Types: []string{"HAS_PART"}})
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
		_, err = b.Relations(b.alice, domain.RelationsInput{ID: hub, Limit: new(3), Cursor: cursor})
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
		r, err := b.Relations(b.alice, domain.RelationsInput{ID: hub, Limit: new(3), Cursor: cursor})
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
	hub := b.entry(t, b.alice, "Hub", "hub")
	spoke := b.entry(t, b.alice, "Spoke", "spoke")
	last := b.entry(t, b.alice, "Last", "last")
	// Fill the hub up to the cap directly (fast), with other entries as ends.
	if _, err := b.pool.Exec(b.ctx, `
		WITH e AS (INSERT INTO knowledge (org_id, title, body) SELECT $1, 'filler ' || i, 'x' FROM generate_series(1, $3) i RETURNING id)
		INSERT INTO knowledge_relations (org_id, from_id, to_id, type) SELECT $1, e.id, $2, 'RELATES_TO' FROM e`,
		b.org, hub, domain.MaxRelationsPerEntry-1); err != nil {
		t.Fatal(err)
	}
	b.link(t, b.alice, spoke, "DEPENDS_ON", hub) // the 1,000th
	_, err := b.Link(b.alice, domain.LinkInput{FromID: last, ToID: hub, Type: "DEPENDS_ON"})
	wantCode(t, err, errs.CodeConflict, "toId")
	// An existing relation is still answered, and a closed one frees a place.
	if r := b.link(t, b.alice, spoke, "DEPENDS_ON", hub); !r.Existed {
		t.Fatalf("existing relation at the cap: %+v", r)
	}
	if _, err := b.Unlink(b.alice, spoke, hub, "DEPENDS_ON"); err != nil {
		t.Fatal(err)
	}
	b.link(t, b.alice, last, "DEPENDS_ON", hub)
}

func TestOrgRelationTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.AddRelationType(b.org, "BLOCKS", "BLOCKED_BY", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddRelationType(b.org, "PAIRS_WITH", "", true); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ name, inv, field string }{
		{"BLOCKED_BY", "UNBLOCKS", "name"},
		{"GATES", "REQUIRED_BY", "inverse"},
		{"RELATES_TO", "X_Y", "name"},
	} {
		_, err := b.AddRelationType(b.org, bad.name, bad.inv, false)
		wantCode(t, err, errs.CodeConflict, bad.field)
	}
	_, err := b.AddRelationType(b.org, "blocks!", "X_Y", false)
	wantCode(t, err, errs.CodeInvalidArgument, "name")
	// A name is normalised before the catalogue's rules: "blocks" is BLOCKS.
	_, err = b.AddRelationType(b.org, "blocks", "X_Y", false)
	wantCode(t, err, errs.CodeConflict, "name")
	_, err = b.AddRelationType(b.org, "GATES", "", false)
	wantCode(t, err, errs.CodeInvalidArgument, "inverse")

	a := b.entry(t, b.alice, "A", "a")
	c := b.entry(t, b.alice, "C", "c")
	if r := b.link(t, b.alice, c, "BLOCKED_BY", a); r.Inverse != "BLOCKS" {
		t.Fatalf("org type: %+v", r)
	}
	if got := b.relations(t, b.alice, domain.RelationsInput{ID: a}); len(got) != 1 || got[0].Type != "BLOCKS" || got[0].Direction != "out" {
		t.Fatalf("org type read from a: %+v", got)
	}
	b.link(t, b.alice, a, "PAIRS_WITH", c)
	if got := b.relations(t, b.alice, domain.RelationsInput{ID: c, Types: []string{"PAIRS_WITH"}}); len(got) != 1 || got[0].Direction != "both" {
		t.Fatalf("org symmetric type: %+v", got)
	}
	// Another org does not have them.
	x := b.entry(t, b.eve, "X", "x")
	y := b.entry(t, b.eve, "Y", "y")
	_, err = b.Link(b.eve, domain.LinkInput{FromID: x, ToID: y, Type: "BLOCKS"})
	wantCode(t, err, errs.CodeInvalidArgument, "type")
	types, err := b.RelationTypes(b.alice)
	if err != nil || len(types) != len(relations.BuiltinRelationTypes)+2 {
		t.Fatalf("catalogue: %d types, %v", len(types), err)
	}
}

// TestTaskRunnerLinks: orchestration code links with the org alone (no
// agent), under the same rules.
func TestTaskRunnerLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runner := domain.Caller{OrgID: b.org}
	step1 := b.entry(t, b.alice, "Step 1 finding", "the cache is cold")
	step2 := b.entry(t, b.bob, "Step 2 finding", "warming takes 3 minutes")
	r, err := b.Link(runner, domain.LinkInput{FromID: step2, ToID: step1, Type: "DERIVED_FROM", Note: "task 7"})
	if err != nil || r.CreatedByAgentID != nil || r.Inverse != "SOURCE_OF" {
		t.Fatalf("runner link: %+v %v", r, err)
	}
	got, err := b.Relations(runner, domain.RelationsInput{ID: step1})
	if err != nil || len(got.Relations) != 1 || got.Relations[0].Type != "SOURCE_OF" || got.Relations[0].Note != "task 7" {
		t.Fatalf("runner relations: %+v %v", got, err)
	}
	if _, err := b.Unlink(runner, step1, step2, "SOURCE_OF"); err != nil {
		t.Fatal(err)
	}
	_, err = b.Link(domain.Caller{OrgID: b.other}, domain.LinkInput{FromID: step2, ToID: step1, Type: "DERIVED_FROM"})
	wantCode(t, err, errs.CodeNotFound, "fromId")
}
