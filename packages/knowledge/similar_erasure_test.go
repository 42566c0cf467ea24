package knowledge_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// remoteLocal is the local embedder as a provider would be (not
// embed.InProcess): stores do not wait for it, and owe the worker their
// check by meaning.
type remoteLocal struct{ embed.Embedder }

// The checks the worker finishes go with the entries they name: forget
// erases the checks listing the forgotten entry's id and the entry's own;
// a purge of an agent the same for every entry it erases. Nothing of
// another org is touched.
func TestSimilarChecksFollowErasure(t *testing.T) {
	t.Parallel()
	emb := remoteLocal{embed.NewLocal()}
	b := setup(t, func(o *knowledge.Options) { o.Embedder = emb })
	const body = "rotate the staging deploy key monthly with the vault runbook and tell the on-call"
	store := func(c knowledge.Caller, title string) uuid.UUID {
		t.Helper()
		r, err := b.svc.Store(b.ctx, c, knowledge.StoreInput{Title: title, Body: body})
		if err != nil || !r.SimilarPending {
			t.Fatalf("store %q: %+v, %v", title, r, err)
		}
		return r.ID
	}
	a := store(b.alice, "Deploy key rotation")
	bb := store(b.bob, "Deploy key rotation (bob)")
	c := store(b.alice, "Deploy key rotation (again)")
	e := store(b.eve, "Deploy key rotation")
	h := jobs.NewEmbedHandler(b.pool, emb, jobs.HandlerOptions{})
	if err := h.Process(b.ctx, b.enq.All()); err != nil {
		t.Fatal(err)
	}
	listed := func(caller knowledge.Caller, id uuid.UUID) []uuid.UUID {
		t.Helper()
		g, err := b.svc.Get(b.ctx, caller, id)
		if err != nil || g.Similar == nil || g.Similar.Check != knowledge.SimilarDone {
			t.Fatalf("get %s: %+v, %v", id, g, err)
		}
		var ids []uuid.UUID
		for _, x := range g.Similar.Entries {
			ids = append(ids, x.ID)
		}
		return ids
	}
	// One batch: each entry's check saw the others of its org, and only them.
	if got := listed(b.alice, c); !slices.Contains(got, a) || !slices.Contains(got, bb) || slices.Contains(got, e) {
		t.Fatalf("c lists %v", got)
	}
	if got := listed(b.eve, e); len(got) != 0 {
		t.Fatalf("the other org's entry lists %v", got)
	}
	rows := func(id uuid.UUID) int {
		return b.count(t, `SELECT (SELECT count(*) FROM knowledge_similar_checks WHERE entry_id = $1)
			+ (SELECT count(*) FROM knowledge_similar WHERE entry_id = $1 OR similar_id = $1)`, id)
	}

	if _, err := b.svc.Forget(b.ctx, b.alice, a, "erasure request", false); err != nil {
		t.Fatal(err)
	}
	if n := rows(a); n != 0 {
		t.Fatalf("%d rows name the forgotten entry", n)
	}
	if got := listed(b.alice, c); slices.Contains(got, a) || !slices.Contains(got, bb) {
		t.Fatalf("after forget, c lists %v", got)
	}

	if _, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.bob.AgentID}, false); err != nil {
		t.Fatal(err)
	}
	if n := rows(bb); n != 0 {
		t.Fatalf("%d rows name the purged entry", n)
	}
	if got := listed(b.alice, c); len(got) != 0 {
		t.Fatalf("after the purge, c lists %v", got)
	}
	if n := rows(e); n != 1 {
		t.Fatalf("the other org's check: %d rows, want its own", n)
	}
}
