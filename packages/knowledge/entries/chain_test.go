package entries_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// Get (get_knowledge, knowledge://{id}) gives the supersession history
// around an entry: every replacement that led to it, transitively, and
// every one from it to the head, each with who made it and when; another
// org's chain is never part of it.
func TestGetGivesTheSupersessionChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.store(t, b.alice, "a", "first version")
	a2 := b.store(t, b.alice, "a2", "a parallel first version")
	mid := b.store(t, b.alice, "mid", "second version")
	head := b.store(t, b.bob, "head", "third version")
	for _, e := range [][2]uuid.UUID{{a, mid}, {a2, mid}} {
		if _, err := b.svc.Supersede(b.ctx, b.alice, e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.svc.Supersede(b.ctx, b.bob, mid, head); err != nil {
		t.Fatal(err)
	}
	other := b.store(t, b.eve, "other org", "its own chain")
	otherHead := b.store(t, b.eve, "other org head", "replaces it")
	if _, err := b.svc.Supersede(b.ctx, b.eve, other, otherHead); err != nil {
		t.Fatal(err)
	}

	type link struct {
		dir      string
		old, new uuid.UUID
		by       uuid.UUID
	}
	got := func(id uuid.UUID) map[link]bool {
		t.Helper()
		e, err := b.svc.Get(b.ctx, b.bob, id)
		if err != nil {
			t.Fatal(err)
		}
		m := map[link]bool{}
		for _, l := range e.Chain {
			if l.At.IsZero() {
				t.Fatalf("a link without its time: %+v", l)
			}
			m[link{l.Direction, l.OldID, l.NewID, l.ByAgentID}] = true
		}
		return m
	}
	want := func(id uuid.UUID, links ...link) {
		t.Helper()
		g := got(id)
		if len(g) != len(links) {
			t.Fatalf("%v: chain %v, want %v", id, g, links)
		}
		for _, l := range links {
			if !g[l] {
				t.Fatalf("%v: missing %+v in %v", id, l, g)
			}
		}
	}
	al, bo := b.alice.AgentID, b.bob.AgentID
	want(mid,
		link{"predecessor", a, mid, al}, link{"predecessor", a2, mid, al},
		link{"successor", mid, head, bo})
	want(head,
		link{"predecessor", mid, head, bo}, link{"predecessor", a, mid, al}, link{"predecessor", a2, mid, al})
	want(a, link{"successor", a, mid, al}, link{"successor", mid, head, bo})
	lone := b.store(t, b.alice, "lone", "never replaced")
	want(lone)
	if e, err := b.svc.Get(b.ctx, b.bob, lone); err != nil || e.Chain == nil {
		t.Fatalf("an entry without history has an empty chain, not none: %+v %v", e, err)
	}
	if _, err := b.svc.Get(b.ctx, b.bob, other); err == nil {
		t.Fatal("another org's entry must not be found")
	} else {
		wantCode(t, err, errs.CodeNotFound, "id")
	}
}
