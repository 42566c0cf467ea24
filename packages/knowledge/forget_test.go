package knowledge_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Forgetting erases the content at once (the row, its postings, its task
// links, its idempotence key), gives the quota unit back, leaves a
// tombstone that only the author and the forgetter see, and is idempotent.
func TestForgetErasesAndLeavesATombstone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.mkTask(t, b.org)
	token := uuid.New()
	r, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{
		Title: "Deploy key for staging", Body: "the staging deploy key is hunter2zebra, rotate monthly",
		Tags: []string{"secrets"}, ClientToken: &token, TaskRef: &knowledge.TaskRef{TaskID: task, Kind: knowledge.LinkProduced},
	})
	if err != nil {
		t.Fatal(err)
	}
	keep := b.store(t, b.alice, "Staging runbook", "restart the staging deployment with the runbook")
	b.embedPending(t)
	b.indexAll(t)
	before := b.indexState(t, b.org)
	used := b.quotaUsed(t, b.org)
	if n := len(b.redis.Client.Keys(b.ctx, knowledge.IdempotenceKey(b.org, b.alice.AgentID, token)).Val()); n != 1 {
		t.Fatalf("store left %d idempotence keys", n)
	}

	res, err := b.svc.Forget(b.ctx, b.alice, r.ID, "  leaked a secret  ", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.AlreadyForgotten || res.ID != r.ID || res.State != knowledge.StateForgotten || res.Reason != "leaked a secret" ||
		res.ForgottenByAgentID != b.alice.AgentID || *res.CreatedByAgentID != b.alice.AgentID || res.TaskLinks != 1 {
		t.Fatalf("forget: %+v", res)
	}
	// Erased, not hidden: no trace of the content anywhere in the database.
	for _, q := range []string{
		"SELECT count(*) FROM knowledge WHERE id = $1",
		"SELECT count(*) FROM task_knowledge WHERE knowledge_id = $1",
		"SELECT count(*) FROM knowledge_postings WHERE entry_id = $1",
		"SELECT count(*) FROM knowledge_index_queue WHERE entry_id = $1",
	} {
		if n := b.count(t, q, r.ID); n != 0 {
			t.Errorf("%s: %d rows left", q, n)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_postings WHERE org_id = $1 AND term LIKE 'hunter2%'", b.org); n != 0 {
		t.Errorf("the secret's postings survived: %d", n)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_tombstones t WHERE t.reason LIKE '%hunter2%'"); n != 0 {
		t.Error("the tombstone holds content")
	}
	if got := b.quotaUsed(t, b.org); got != used-1 {
		t.Errorf("quota used %d, want %d: a forgotten entry gives its unit back", got, used-1)
	}
	if n := len(b.redis.Client.Keys(b.ctx, knowledge.IdempotenceKey(b.org, b.alice.AgentID, token)).Val()); n != 0 {
		t.Error("the store's idempotence key still answers the forgotten id")
	}
	// The index is what indexing the survivors from scratch gives.
	after := b.indexState(t, b.org)
	if reflect.DeepEqual(before, after) {
		t.Error("the index did not change")
	}
	if _, err := b.ops.Operations().SetTextSearchConfig(b.ctx, b.org, "english"); err != nil {
		t.Fatal(err)
	}
	b.indexAll(t)
	if rebuilt := b.indexState(t, b.org); !reflect.DeepEqual(after, rebuilt) {
		t.Errorf("index after forget:\n%v\nrebuilt:\n%v", after, rebuilt)
	}

	// Never found again: search, list, get (except by its author).
	for _, q := range []string{"staging deploy key", "hunter2zebra"} {
		hits, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: q, MinScore: ptr(0.0)})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits.Hits {
			if h.ID == r.ID {
				t.Errorf("search %q found the forgotten entry", q)
			}
		}
	}
	page, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{IncludeSuperseded: true, IncludeExpired: true})
	if err != nil || len(page.Hits) != 1 || page.Hits[0].ID != keep {
		t.Fatalf("list after forget: %+v %v", page, err)
	}
	e, err := b.svc.Get(b.ctx, b.alice, r.ID)
	if err != nil || e.State != knowledge.StateForgotten || e.Forgotten == nil || e.Forgotten.Reason != "leaked a secret" {
		t.Fatalf("the author's get: %+v %v", e, err)
	}
	j, _ := json.Marshal(e)
	var m map[string]any
	_ = json.Unmarshal(j, &m)
	if m["state"] != "forgotten" || m["reason"] != "leaked a secret" || m["title"] != nil || m["body"] != nil {
		t.Errorf("the author's get reads as %s", j)
	}
	for _, c := range []knowledge.Caller{b.bob, b.eve} {
		_, err := b.svc.Get(b.ctx, c, r.ID)
		wantCode(t, err, errs.CodeNotFound, "id")
	}

	// Forgetting twice is fine and changes nothing.
	again, err := b.svc.Forget(b.ctx, b.alice, r.ID, "again", false)
	if err != nil || !again.AlreadyForgotten || again.Reason != "leaked a secret" || !again.ForgottenAt.Equal(res.ForgottenAt) {
		t.Fatalf("forget again: %+v %v", again, err)
	}
	if got := b.quotaUsed(t, b.org); got != used-1 {
		t.Errorf("a repeated forget changed the quota: %d", got)
	}
	// To anyone else the id does not exist, even with delete_others.
	_, err = b.svc.Forget(b.ctx, b.bob, r.ID, "x", true)
	wantCode(t, err, errs.CodeNotFound, "id")
	_, err = b.svc.Forget(b.ctx, b.eve, keep, "x", true)
	wantCode(t, err, errs.CodeNotFound, "id")
	// An id that is gone cannot be superseded.
	_, err = b.svc.Supersede(b.ctx, b.alice, r.ID, keep)
	wantCode(t, err, errs.CodeNotFound, "oldId")
}

func TestForgetRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mine := b.store(t, b.bob, "bob's note", "written by bob")
	for _, tc := range []struct {
		id     uuid.UUID
		reason string
		field  string
	}{
		{uuid.Nil, "why", "id"},
		{mine, "", "reason"},
		{mine, "   ", "reason"},
		{mine, strings.Repeat("é", knowledge.MaxForgetReason+1), "reason"},
		{mine, "bad \xff utf8", "reason"},
	} {
		_, err := b.svc.Forget(b.ctx, b.bob, tc.id, tc.reason, false)
		wantCode(t, err, errs.CodeInvalidArgument, tc.field)
	}
	// Another agent's entry needs delete_others; refused, nothing changes.
	_, err := b.svc.Forget(b.ctx, b.alice, mine, "not mine", false)
	e := wantCode(t, err, errs.CodeForbidden, "id")
	if !strings.Contains(e.Message, "knowledge:delete_others") {
		t.Errorf("forbidden without naming the scope: %v", e)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE id = $1", mine); n != 1 {
		t.Fatal("a refused forget erased the entry")
	}
	res, err := b.svc.Forget(b.ctx, b.alice, mine, "moderation", true)
	if err != nil || res.ForgottenByAgentID != b.alice.AgentID || *res.CreatedByAgentID != b.bob.AgentID {
		t.Fatalf("forget with delete_others: %+v %v", res, err)
	}
	// Both the author and the forgetter see the tombstone.
	for _, c := range []knowledge.Caller{b.alice, b.bob} {
		e, err := b.svc.Get(b.ctx, c, mine)
		if err != nil || e.Forgotten == nil || e.Forgotten.ForgottenByAgentID != b.alice.AgentID {
			t.Fatalf("get by %v: %+v %v", c.AgentID, e, err)
		}
		if r, err := b.svc.Forget(b.ctx, c, mine, "again", false); err != nil || !r.AlreadyForgotten {
			t.Fatalf("forget again by %v: %+v %v", c.AgentID, r, err)
		}
	}
}

// Chains: a -> m -> h. Forgetting the middle points a past it; forgetting
// the head makes a the head again, searchable and supersedable.
func TestForgetKeepsChainsTrue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.store(t, b.alice, "v1", "first version")
	m := b.store(t, b.alice, "v2", "second version")
	h := b.store(t, b.alice, "v3", "third version")
	for _, e := range [][2]uuid.UUID{{a, m}, {m, h}} {
		if _, err := b.svc.Supersede(b.ctx, b.alice, e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.svc.Forget(b.ctx, b.alice, m, "wrong", false)
	if err != nil || res.Relinked != 1 {
		t.Fatalf("forget the middle: %+v %v", res, err)
	}
	if got := b.links(t, a)[a]; *got.next != h || *got.head != h {
		t.Fatalf("a after forgetting the middle: %+v", got)
	}
	checkChains(t, b)
	e, err := b.svc.Get(b.ctx, b.alice, a)
	if err != nil || e.State != knowledge.StateSuperseded || len(e.Chain) != 1 || e.Chain[0].NewID != h {
		t.Fatalf("a's chain: %+v %v", e, err)
	}
	if res, err = b.svc.Forget(b.ctx, b.alice, h, "wrong too", false); err != nil || res.HeadsAgain != 1 {
		t.Fatalf("forget the head: %+v %v", res, err)
	}
	checkChains(t, b)
	if e, err = b.svc.Get(b.ctx, b.alice, a); err != nil || e.State != knowledge.StateHead || len(e.Chain) != 0 {
		t.Fatalf("a is not a head again: %+v %v", e, err)
	}
}

// Random supersedes and forgets at once, by two agents: every surviving
// entry's head pointer stays true and the history matches.
func TestForgetConcurrentWithSupersede(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const entries, workers, attempts = 40, 12, 15
	ids := make([]uuid.UUID, entries)
	for i := range ids {
		c := b.alice
		if i%2 == 1 {
			c = b.bob
		}
		ids[i] = b.store(t, c, "e", "e")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	start := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			c := b.alice
			if w%2 == 1 {
				c = b.bob
			}
			for range attempts {
				o, n := ids[rng.IntN(entries)], ids[rng.IntN(entries)]
				var err error
				kind := "supersede"
				if rng.IntN(4) == 0 {
					kind = "forget"
					_, err = b.svc.Forget(b.ctx, c, o, "cleanup", rng.IntN(2) == 0)
				} else if o != n {
					_, err = b.svc.Supersede(b.ctx, c, o, n)
				}
				code := errs.CodeOf(err)
				mu.Lock()
				counts[kind+":"+string(code)]++
				mu.Unlock()
				switch code {
				case "", errs.CodeConflict, errs.CodeCycle, errs.CodeForbidden, errs.CodeNotFound:
				default:
					t.Errorf("%s: %v", kind, err)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Logf("outcomes: %v", counts)
	if counts["forget:"] == 0 {
		t.Fatal("no forget succeeded: the test tested nothing")
	}
	checkChains(t, b)
	if got, want := b.quotaUsed(t, b.org), b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", b.org); got != want {
		t.Errorf("quota used %d for %d entries", got, want)
	}
}

// checkChains walks every chain of b's org: no cycle, heads have no cached
// head, every superseded entry caches its walked head, and each has its
// one history edge.
func checkChains(t *testing.T, b *bundle) {
	t.Helper()
	type row struct{ by, head *uuid.UUID }
	state := map[uuid.UUID]row{}
	rows, err := b.pool.Query(b.ctx, "SELECT id, superseded_by, head_id FROM knowledge WHERE org_id = $1", b.org)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var r row
		if err := rows.Scan(&id, &r.by, &r.head); err != nil {
			t.Fatal(err)
		}
		state[id] = r
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	superseded := 0
	for id, r := range state {
		cur := id
		for steps := 0; state[cur].by != nil; steps++ {
			if steps > len(state) {
				t.Fatalf("cycle through %s", id)
			}
			cur = *state[cur].by
			if _, ok := state[cur]; !ok {
				t.Fatalf("%s points at %s, which is gone", id, cur)
			}
		}
		if cur == id {
			if r.head != nil {
				t.Fatalf("head %s has a cached head %s", id, *r.head)
			}
			continue
		}
		superseded++
		if r.head == nil || *r.head != cur {
			t.Fatalf("entry %s: cached head %v, walked head %s", id, r.head, cur)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge k JOIN knowledge_supersessions s
		ON s.org_id = k.org_id AND s.old_id = k.id AND s.new_id = k.superseded_by WHERE k.org_id = $1`, b.org); n != superseded {
		t.Fatalf("%d history edges for %d superseded entries", n, superseded)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_supersessions WHERE org_id = $1", b.org); n != superseded {
		t.Fatalf("%d history edges in all for %d superseded entries", n, superseded)
	}
}
