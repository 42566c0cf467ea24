package knowledge_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Issue 24, item 1: a forgotten entry never comes back through a retry. A
// store that listed the soon-forgotten entry in its similar answer, retried
// after the forget (within the idempotence window), replays without it; the
// store that made the entry, retried, is refused (not stored again), with
// or without its Redis record; and a record that escaped forget's clean-up
// (written after its scan: restored here by hand) still never replays the
// erased id or title.
func TestForgottenEntryNeverReplayed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const title = "Vault unseal procedure quarantine"
	const body = "To unseal the quarantine vault run unseal with the three quarantine shares held by the on-call leads."
	madeTok := uuid.New()
	made, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: title, Body: body, ClientToken: &madeTok})
	if err != nil {
		t.Fatal(err)
	}
	keep := b.store(t, b.alice, title+" (copy)", body+" Kept.")
	b.indexAll(t)
	tok := uuid.New()
	in := knowledge.StoreInput{Title: title + " again", Body: body + " Same again.", ClientToken: &tok}
	first, err := b.svc.Store(b.ctx, b.bob, in)
	if err != nil {
		t.Fatal(err)
	}
	if !lists(first.Similar, made.ID) || !lists(first.Similar, keep) {
		t.Fatalf("the store's similar list %+v should name the entry to forget %s and the kept one %s", first.Similar, made.ID, keep)
	}
	bobKey := knowledge.IdempotenceKey(b.org, b.bob.AgentID, tok)
	madeKey := knowledge.IdempotenceKey(b.org, b.alice.AgentID, madeTok)
	bobRecord := b.redis.Client.Get(b.ctx, bobKey).Val()
	madeRecord := b.redis.Client.Get(b.ctx, madeKey).Val()
	if !strings.Contains(bobRecord, made.ID.String()) || madeRecord == "" {
		t.Fatalf("records not set up: %q / %q", bobRecord, madeRecord)
	}

	if _, err := b.svc.Forget(b.ctx, b.alice, made.ID, "wrong procedure", false); err != nil {
		t.Fatal(err)
	}
	// Forget deleted every record naming the entry (no title left in Redis).
	for _, k := range []string{bobKey, madeKey} {
		if b.redis.Client.Exists(b.ctx, k).Val() != 0 {
			t.Errorf("record %s still names the forgotten entry", k)
		}
	}
	check := func(step string) {
		t.Helper()
		r, err := b.svc.Store(b.ctx, b.bob, in)
		if err != nil {
			t.Fatalf("%s: retry: %v", step, err)
		}
		if !r.Replayed || r.ID != first.ID || lists(r.Similar, made.ID) {
			t.Fatalf("%s: retry answered %+v", step, r)
		}
		_, err = b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: title, Body: body, ClientToken: &madeTok})
		e := wantCode(t, err, errs.CodeInvalidArgument, "clientToken")
		if strings.Contains(e.Message, made.ID.String()) || strings.Contains(e.Message, "unseal") {
			t.Fatalf("%s: the refusal names the forgotten entry: %s", step, e.Message)
		}
		if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND title = $2", b.org, title); n != 0 {
			t.Fatalf("%s: the forgotten entry came back through a retry (%d rows)", step, n)
		}
	}
	check("records deleted by forget")

	// Records that escaped the clean-up (a store recording its answer
	// after forget's scan): the replay checks what it answers.
	b.redis.Client.Set(b.ctx, bobKey, bobRecord, 0)
	b.redis.Client.Set(b.ctx, madeKey, madeRecord, 0)
	check("records written after the forget")
	r, _ := b.svc.Store(b.ctx, b.bob, in)
	if !lists(r.Similar, keep) {
		t.Fatalf("the replay dropped a surviving similar entry: %+v", r.Similar)
	}
}

func lists(s []knowledge.Similar, id uuid.UUID) bool {
	for _, x := range s {
		if x.ID == id {
			return true
		}
	}
	return false
}
