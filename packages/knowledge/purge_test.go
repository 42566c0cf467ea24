package knowledge_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// indexState is an org's lexical index as search reads it: postings
// (without impact, which depends on the average length when a posting was
// written), document frequencies and the org's counters.
func (b *bundle) indexState(t *testing.T, org uuid.UUID) []string {
	t.Helper()
	var out []string
	q := func(sql string) {
		rows, err := b.pool.Query(b.ctx, sql, org)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(vals...))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	q(`SELECT 'p', field::text, term, entry_id::text, tf, len FROM knowledge_postings WHERE org_id = $1 ORDER BY 2, 3, 4`)
	q(`SELECT 'df', field::text, term, df FROM knowledge_term_stats WHERE org_id = $1 ORDER BY 2, 3`)
	q(`SELECT 'st', docs, len_b, len_t FROM knowledge_search_stats WHERE org_id = $1`)
	return out
}

// After a purge, the org's index must be exactly what indexing the
// surviving entries from scratch gives: no posting of an erased entry, and
// document frequencies, entry count and lengths that match.
func TestPurgeEntryKeepsTheIndexTrue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gone := b.store(t, b.alice, "Zanzibar ferry schedule", "The zanzibar ferry leaves at noon; shared words: harbour ticket queue.")
	b.store(t, b.bob, "Harbour tickets", "Buy the harbour ticket at the queue by the ferry gate.")
	b.store(t, b.alice, "Queue discipline", "A queue of workers drains the harbour backlog.")
	evesBefore := b.store(t, b.eve, "Zanzibar ferry schedule", "The zanzibar ferry leaves at noon.")
	b.indexAll(t)
	queued := b.store(t, b.alice, "Not indexed yet", "zanzibar harbour words still in the queue")
	otherBefore := b.indexState(t, b.other)

	rep, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: gone}, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Entries != 1 || rep.Postings == 0 {
		t.Fatalf("report %+v: want 1 entry and its postings", rep)
	}
	if rep2, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: queued}, false); err != nil || rep2.Entries != 1 || rep2.Postings != 0 {
		t.Fatalf("purge of a queued entry: %+v %v (it has no postings)", rep2, err)
	}
	after := b.indexState(t, b.org)
	for _, row := range after {
		if row[:2] == "p " && (strings.Contains(row, gone.String()) || strings.Contains(row, queued.String())) {
			t.Fatalf("a posting of an erased entry survived: %s", row)
		}
	}
	// Rebuild from scratch (same configuration) and compare.
	if _, err := b.ops.Operations().SetTextSearchConfig(b.ctx, b.org, "english"); err != nil {
		t.Fatal(err)
	}
	b.indexAll(t)
	if rebuilt := b.indexState(t, b.org); !reflect.DeepEqual(after, rebuilt) {
		t.Fatalf("index after purge differs from a rebuild:\nafter:   %v\nrebuilt: %v", after, rebuilt)
	}
	if got := b.indexState(t, b.other); !reflect.DeepEqual(got, otherBefore) {
		t.Fatal("the other org's index changed")
	}
	res, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "zanzibar ferry"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		if h.ID == gone || h.ID == queued {
			t.Fatalf("search still finds erased entry %s", h.ID)
		}
	}
	if _, err := b.svc.Get(b.ctx, b.eve, evesBefore); err != nil {
		t.Fatalf("the other org's entry: %v", err)
	}
	// Idempotent: purging again finds nothing.
	if rep, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: gone}, false); err != nil || rep.Entries != 0 {
		t.Fatalf("second purge: %+v %v", rep, err)
	}
	// Another org's entry id behaves like an id that does not exist.
	if rep, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: evesBefore}, false); err != nil || rep.Entries != 0 {
		t.Fatalf("purge of another org's id: %+v %v", rep, err)
	}
	if _, err := b.svc.Get(b.ctx, b.eve, evesBefore); err != nil {
		t.Fatalf("the other org's entry after a purge naming it: %v", err)
	}
}

type link struct{ next, head *uuid.UUID }

func (b *bundle) links(t *testing.T, ids ...uuid.UUID) map[uuid.UUID]link {
	t.Helper()
	out := map[uuid.UUID]link{}
	for _, id := range ids {
		var l link
		if err := b.pool.QueryRow(b.ctx, "SELECT superseded_by, head_id FROM knowledge WHERE org_id = $1 AND id = $2", b.org, id).
			Scan(&l.next, &l.head); err != nil {
			t.Fatal(err)
		}
		out[id] = l
	}
	return out
}

// Chains: a -> m -> h and d -> h. Erasing the middle relinks past it;
// erasing the head makes the survivors just before it heads again.
func TestPurgeKeepsChainsTrue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.store(t, b.alice, "v1", "first version")
	m := b.store(t, b.bob, "v2", "second version")
	h := b.store(t, b.alice, "v3", "third version")
	d := b.store(t, b.alice, "branch", "another line replaced by v3")
	for _, e := range [][2]uuid.UUID{{a, m}, {m, h}, {d, h}} {
		if _, err := b.svc.Supersede(b.ctx, b.alice, e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	dry, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.bob.AgentID}, true)
	if err != nil || dry.Entries != 1 || dry.Relinked != 1 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if l := b.links(t, a)[a]; *l.next != m {
		t.Fatal("a dry run changed a chain")
	}
	rep, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.bob.AgentID}, false)
	if err != nil || rep.Entries != 1 || rep.Relinked != 1 || rep.SupersessionEdges != 1 {
		t.Fatalf("purge of bob: %+v %v", rep, err)
	}
	got := b.links(t, a, h, d)
	want := map[uuid.UUID]link{a: {ptr(h), ptr(h)}, h: {}, d: {ptr(h), ptr(h)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after erasing the middle: %v, want %v", got, want)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_supersessions WHERE org_id = $1 AND old_id = $2 AND new_id = $3", b.org, a, h); n != 1 {
		t.Fatalf("recorded edge a -> h: %d", n)
	}
	rep, err = b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: h}, false)
	if err != nil || rep.HeadsAgain != 2 {
		t.Fatalf("purge of the head: %+v %v", rep, err)
	}
	got = b.links(t, a, d)
	if want := (map[uuid.UUID]link{a: {}, d: {}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after erasing the head: %v", got)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_supersessions WHERE org_id = $1", b.org); n != 0 {
		t.Fatalf("%d recorded edges left", n)
	}
	// The survivors are heads: they can be superseded again.
	if _, err := b.svc.Supersede(b.ctx, b.alice, a, d); err != nil {
		t.Fatal(err)
	}
}

func TestPurgeAgentAndOrg(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQuota(t, b.org, 100)
	task := b.mkTask(t, b.org)
	tok := uuid.New()
	r, err := b.svc.Store(b.ctx, b.bob, knowledge.StoreInput{Title: "bob's", Body: "bob knows this",
		ClientToken: &tok, TaskRef: &knowledge.TaskRef{TaskID: task, Kind: knowledge.LinkProduced}})
	if err != nil {
		t.Fatal(err)
	}
	bobs := []uuid.UUID{r.ID, b.store(t, b.bob, "bob 2", "more of bob")}
	alices := b.store(t, b.alice, "alice's", "alice knows that")
	evesTok := uuid.New()
	if _, err := b.svc.Store(b.ctx, b.eve, knowledge.StoreInput{Title: "eve's", Body: "other org", ClientToken: &evesTok}); err != nil {
		t.Fatal(err)
	}
	b.indexAll(t)
	bobKey := knowledge.IdempotenceKey(b.org, b.bob.AgentID, tok)
	eveKey := knowledge.IdempotenceKey(b.other, b.eve.AgentID, evesTok)
	if b.redis.Client.Exists(b.ctx, bobKey, eveKey).Val() != 2 {
		t.Fatal("idempotence keys not set up")
	}
	usedBefore := b.quotaUsed(t, b.org)

	dry, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.bob.AgentID}, true)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.bob.AgentID}, false)
	if err != nil {
		t.Fatal(err)
	}
	dry.DryRun, dry.IDs, rep.IDs = false, nil, nil
	if !reflect.DeepEqual(dry, rep) {
		t.Fatalf("dry run said %+v, purge did %+v", dry, rep)
	}
	if rep.Entries != 2 || rep.TaskLinks != 1 || rep.IdempotenceKeys != 1 || rep.Postings == 0 {
		t.Fatalf("purge of bob: %+v", rep)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND id = ANY($2)", b.org, bobs); n != 0 {
		t.Fatalf("%d of bob's entries left", n)
	}
	if n := b.count(t, "SELECT count(*) FROM task_knowledge WHERE org_id = $1", b.org); n != 0 {
		t.Fatalf("%d task links left", n)
	}
	if b.redis.Client.Exists(b.ctx, bobKey).Val() != 0 || b.redis.Client.Exists(b.ctx, eveKey).Val() != 1 {
		t.Fatal("wrong idempotence keys removed")
	}
	if got := b.quotaUsed(t, b.org); got != usedBefore-2 {
		t.Fatalf("quota used %d, want %d", got, usedBefore-2)
	}
	if _, err := b.svc.Get(b.ctx, b.alice, alices); err != nil {
		t.Fatalf("alice's entry: %v", err)
	}
	// The replay of bob's client token now makes a new entry instead of
	// answering with the erased one.
	r2, err := b.svc.Store(b.ctx, b.bob, knowledge.StoreInput{Title: "bob's", Body: "bob knows this", ClientToken: &tok})
	if err != nil || r2.Replayed || r2.ID == r.ID {
		t.Fatalf("store after purge: %+v %v", r2, err)
	}

	otherBefore := b.indexState(t, b.other)
	rep, err = b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{All: true}, false)
	if err != nil || rep.Entries != 2 {
		t.Fatalf("purge of the org: %+v %v", rep, err)
	}
	for _, tbl := range []string{"knowledge", "knowledge_postings", "knowledge_term_stats", "knowledge_search_stats",
		"knowledge_index_queue", "knowledge_supersessions", "task_knowledge", "knowledge_metadata_pairs", "knowledge_similar_keys"} {
		if n := b.count(t, "SELECT count(*) FROM "+tbl+" WHERE org_id = $1", b.org); n != 0 {
			t.Errorf("%s: %d rows of the purged org left", tbl, n)
		}
	}
	if n := len(b.redis.Client.Keys(b.ctx, "idem:k.store:"+b.org.String()+":*").Val()); n != 0 {
		t.Errorf("%d idempotence keys of the purged org left", n)
	}
	if !reflect.DeepEqual(b.indexState(t, b.other), otherBefore) || b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", b.other) != 1 {
		t.Fatal("the other org changed")
	}
	if _, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{}, false); err == nil {
		t.Fatal("a purge without a scope was accepted")
	}
}
