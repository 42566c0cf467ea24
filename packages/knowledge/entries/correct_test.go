package entries_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// Correct stores the replacement and supersedes the old entry in one
// transaction: one quota unit; nothing stored when the supersession cannot
// be made; a retry with the same client token answers the first result.
func TestCorrectStoresAndSupersedesInOneTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.store(t, b.alice, "Redis maxmemory is 1GB", "Set in redis.conf.")
	entries, quota := b.entries(t), b.quotaUsed(t, b.org)

	tok := uuid.New()
	in := domain.StoreInput{Title: "Redis maxmemory is 4GB", Body: "Raised in June.", Tags: []string{"redis"}, ClientToken: &tok}
	r, err := b.svc.Correct(b.ctx, b.bob, old, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stored == nil || r.Stored.Replayed || r.OldID != old || r.NewID != r.Stored.ID || r.HeadID != r.Stored.ID || r.AlreadySuperseded {
		t.Fatalf("correct: %+v", r)
	}
	e, err := b.svc.Get(b.ctx, b.alice, old)
	if err != nil || e.HeadID == nil || *e.HeadID != r.Stored.ID {
		t.Fatalf("old entry after the correction: %+v %v", e, err)
	}
	if b.entries(t) != entries+1 || b.quotaUsed(t, b.org) != quota+1 {
		t.Fatalf("entries %d -> %d, quota %d -> %d: want one each", entries, b.entries(t), quota, b.quotaUsed(t, b.org))
	}
	again, err := b.svc.Correct(b.ctx, b.bob, old, in)
	if err != nil || !again.Stored.Replayed || again.Stored.ID != r.Stored.ID || !again.AlreadySuperseded {
		t.Fatalf("retry with the same token: %+v %v", again, err)
	}
	if b.entries(t) != entries+1 || b.quotaUsed(t, b.org) != quota+1 {
		t.Fatal("the retry stored or charged again")
	}

	// Nothing half-done: an old id that is not the org's, or one already
	// superseded by another entry, stores nothing and charges nothing.
	foreign := b.store(t, b.eve, "other org", "not yours")
	entries, quota = b.entries(t), b.quotaUsed(t, b.org)
	_, err = b.svc.Correct(b.ctx, b.bob, foreign, domain.StoreInput{Title: "t", Body: "b"})
	wantCode(t, err, errs.CodeNotFound, "oldId")
	_, err = b.svc.Correct(b.ctx, b.bob, old, domain.StoreInput{Title: "t", Body: "b"})
	wantCode(t, err, errs.CodeConflict, "oldId")
	_, err = b.svc.Correct(b.ctx, b.bob, old, domain.StoreInput{Title: "", Body: "b"})
	wantCode(t, err, errs.CodeInvalidArgument, "replacement.title")
	if b.entries(t) != entries || b.quotaUsed(t, b.org) != quota {
		t.Fatal("a failed correction stored or charged")
	}
	// The quota: the last unit refused, nothing stored.
	b.setQuota(t, b.org, int64(quota))
	head := r.Stored.ID
	_, err = b.svc.Correct(b.ctx, b.bob, head, domain.StoreInput{Title: "t", Body: "b"})
	wantCode(t, err, errs.CodeQuotaExceeded, "")
	if e, _ := b.svc.Get(b.ctx, b.bob, head); e.HeadID != nil {
		t.Fatal("the supersession was made though the store was refused")
	}
}
