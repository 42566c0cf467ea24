package erasure_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// Forget's own rules, on entries written without a store: arguments,
// who may forget, the tombstone it leaves and who sees it.
func TestForgetAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mine := b.entry(t, b.bob, "bob's note")
	for _, tc := range []struct {
		id     uuid.UUID
		reason string
		field  string
	}{
		{uuid.Nil, "why", "id"},
		{mine, "", "reason"},
		{mine, strings.Repeat("é", domain.MaxForgetReason+1), "reason"},
	} {
		_, err := b.forget(b.bob, tc.id, tc.reason, false)
		wantCode(t, err, errs.CodeInvalidArgument, tc.field)
	}
	_, err := b.forget(b.alice, mine, "not mine", false)
	wantCode(t, err, errs.CodeForbidden, "id")
	// Another org's agent does not see the entry at all.
	_, err = b.forget(b.eve, mine, "not even my org", true)
	wantCode(t, err, errs.CodeNotFound, "id")
	res, err := b.forget(b.alice, mine, "  moderation ", true)
	if err != nil || res.AlreadyForgotten || res.Reason != "moderation" || res.ForgottenByAgentID != b.alice.AgentID ||
		res.CreatedByAgentID == nil || *res.CreatedByAgentID != b.bob.AgentID {
		t.Fatalf("forget with delete_others: %+v %v", res, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE id = $1", mine); n != 0 {
		t.Fatal("the forgotten entry's row is still there")
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_tombstones WHERE org_id = $1 AND id = $2", b.org, mine); n != 1 {
		t.Fatalf("%d tombstones", n)
	}
	// The author and the forgetter read the tombstone again; a third
	// agent of the org finds nothing.
	for _, c := range []domain.Caller{b.alice, b.bob} {
		if r, err := b.forget(c, mine, "again", false); err != nil || !r.AlreadyForgotten || r.Reason != "moderation" {
			t.Fatalf("forget again by %v: %+v %v", c.AgentID, r, err)
		}
	}
	carol := domain.Caller{OrgID: b.org, AgentID: b.newAgent(t, "carol")}
	_, err = b.forget(carol, mine, "again", true)
	wantCode(t, err, errs.CodeNotFound, "id")
}

// Chains a -> m -> h and d -> h: forgetting the middle points a past it,
// a dry run of a purge counts what the purge does, and purging the head
// makes the survivors heads again.
func TestEraseKeepsChainsTrue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, m, h := b.entry(t, b.alice, "v1"), b.entry(t, b.alice, "v2"), b.entry(t, b.alice, "v3")
	d := b.entry(t, b.bob, "branch")
	b.supersede(t, b.alice, a, m, h)
	b.supersede(t, b.alice, m, h, h)
	b.supersede(t, b.alice, d, h, h)
	res, err := b.forget(b.alice, m, "wrong", false)
	if err != nil || res.Relinked != 1 || res.HeadsAgain != 0 {
		t.Fatalf("forget the middle: %+v %v", res, err)
	}
	if l := b.link(t, a); l.next == nil || *l.next != h || *l.head != h {
		t.Fatalf("a after forgetting the middle: %+v", l)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_supersessions WHERE org_id = $1 AND old_id = $2 AND new_id = $3", b.org, a, h); n != 1 {
		t.Fatalf("recorded edge a -> h: %d", n)
	}
	dry, err := b.purge(b.org, domain.PurgeScope{Entry: h}, true)
	if err != nil || !dry.DryRun || dry.Entries != 1 || dry.HeadsAgain != 2 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if l := b.link(t, a); l.next == nil || *l.next != h {
		t.Fatal("a dry run changed a chain")
	}
	rep, err := b.purge(b.org, domain.PurgeScope{Entry: h}, false)
	if err != nil || rep.Entries != 1 || rep.HeadsAgain != 2 || rep.SupersessionEdges != 2 {
		t.Fatalf("purge of the head: %+v %v", rep, err)
	}
	for _, id := range []uuid.UUID{a, d} {
		if l := b.link(t, id); l.next != nil || l.head != nil {
			t.Fatalf("%s is not a head again: %+v", id, l)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_supersessions WHERE org_id = $1", b.org); n != 0 {
		t.Fatalf("%d recorded edges left", n)
	}
}

// A purge by agent erases that agent's entries only, and a whole org's
// purge leaves the other org alone; a purge needs a scope.
func TestPurgeScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.entry(t, b.bob, "bob 1")
	b.entry(t, b.bob, "bob 2")
	alices := b.entry(t, b.alice, "alice's")
	eves := b.entry(t, b.eve, "eve's")
	rep, err := b.purge(b.org, domain.PurgeScope{Agent: b.bob.AgentID}, false)
	if err != nil || rep.Entries != 2 || len(rep.IDs) != 2 {
		t.Fatalf("purge of bob: %+v %v", rep, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", b.org); n != 1 {
		t.Fatalf("%d entries left, want alice's", n)
	}
	rep, err = b.purge(b.org, domain.PurgeScope{All: true}, false)
	if err != nil || rep.Entries != 1 || rep.IDs[0] != alices {
		t.Fatalf("purge of the org: %+v %v", rep, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND id = $2", b.other, eves); n != 1 {
		t.Fatal("the other org's entry was erased")
	}
	if _, err := b.purge(b.org, domain.PurgeScope{}, false); err == nil {
		t.Fatal("a purge without a scope was accepted")
	}
}
