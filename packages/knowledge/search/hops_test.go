package search_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

func hitByID(res *knowledge.SearchResult) map[uuid.UUID]knowledge.Hit {
	m := map[uuid.UUID]knowledge.Hit{}
	for _, h := range res.Hits {
		if _, dup := m[h.ID]; dup {
			panic("duplicate hit " + h.ID.String())
		}
		m[h.ID] = h
	}
	return m
}

func (b *bundle) hopSearch(t *testing.T, c knowledge.Caller, in knowledge.SearchInput) *knowledge.SearchResult {
	t.Helper()
	r, err := b.svc.Search(b.ctx, c, in)
	if err != nil {
		t.Fatalf("search %+v: %v", in, err)
	}
	return r
}

func TestSearchHopsFollowRelations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hit := b.store(t, b.alice, "Autovacuum tuning for hot tables", "autovacuum_vacuum_scale_factor 0.05 keeps bloat down", "postgres")
	// Shares no word with the query: reachable only over the relation.
	runbook := b.store(t, b.alice, "Runbook: when the queue stalls", "drain workers, restart the broker, check lag", "postgres")
	second := b.store(t, b.bob, "Broker sizing decision", "three nodes, quorum queues", "postgres")
	untagged := b.store(t, b.bob, "Lag dashboard", "grafana panel for consumer lag")
	far := b.store(t, b.bob, "Far away", "three relations from the hit")
	b.link(t, b.alice, runbook, "DEPENDS_ON", hit)      // hit REQUIRED_BY runbook
	b.link(t, b.alice, runbook, "DERIVED_FROM", second) // two hops from hit
	b.link(t, b.alice, runbook, "RELATES_TO", untagged) // two hops from hit, without the tag
	b.link(t, b.alice, second, "RELATES_TO", far)       // three hops: never
	b.link(t, b.alice, runbook, "RELATES_TO", hit)      // a second way to the same entry: deduplicated
	b.indexAll(t)
	b.embedPending(t)

	q := knowledge.SearchInput{Query: "autovacuum scale factor"}
	res := b.hopSearch(t, b.bob, q)
	if len(res.Hits) != 1 || res.Hits[0].ID != hit {
		t.Fatalf("hops 0: %+v", res.Hits)
	}
	base := res.Hits[0].Score

	q.Hops = 1
	got := hitByID(b.hopSearch(t, b.bob, q))
	rb, ok := got[runbook]
	if len(got) != 2 || !ok || rb.Via == nil || rb.Via.FromID != hit || rb.Via.Hops != 1 ||
		(rb.Via.Type != "REQUIRED_BY" && rb.Via.Type != "RELATES_TO") {
		t.Fatalf("hops 1: %+v", got)
	}
	if rb.Score != base*knowledge.HopDecay || rb.VectorRank != 0 || rb.Signals.BM25 != nil || rb.Snippet == "" {
		t.Fatalf("hop hit scored %v (hit %v), %+v", rb.Score, base, rb)
	}
	if got[hit].Via != nil {
		t.Fatalf("direct hit has via: %+v", got[hit])
	}

	q.Hops = 2
	res = b.hopSearch(t, b.bob, q)
	got = hitByID(res)
	sd, ok := got[second]
	if _, reached := got[far]; len(got) != 4 || !ok || reached || sd.Via.FromID != runbook || sd.Via.Type != "DERIVED_FROM" || sd.Via.Hops != 2 ||
		sd.Score != base*knowledge.HopDecay*knowledge.HopDecay {
		t.Fatalf("hops 2: %+v", got)
	}
	for i := 1; i < len(res.Hits); i++ {
		if res.Hits[i].Score > res.Hits[i-1].Score {
			t.Fatalf("hits not best first: %+v", res.Hits)
		}
	}

	// Only the named types (as read from the hit), and the search's filters.
	q.RelationTypes = []string{"RELATES_TO"}
	if got := hitByID(b.hopSearch(t, b.bob, q)); len(got) != 3 || got[runbook].Via.Type != "RELATES_TO" || got[untagged].Via == nil {
		t.Fatalf("relationTypes RELATES_TO: %+v", got)
	}
	q.RelationTypes = []string{"DEPENDS_ON"} // the hit is REQUIRED_BY the runbook, it depends on nothing
	if got := hitByID(b.hopSearch(t, b.bob, q)); len(got) != 1 {
		t.Fatalf("relationTypes DEPENDS_ON: %+v", got)
	}
	q.RelationTypes = nil
	q.Tags = []string{"postgres"}
	q.Hops = 2
	if got := hitByID(b.hopSearch(t, b.bob, q)); len(got) != 3 || got[untagged].ID != uuid.Nil {
		t.Fatalf("tags filter: %+v", got)
	}

	// Bounds: at most limit entries added.
	q.Tags = nil
	q.Limit = new(1)
	if res := b.hopSearch(t, b.bob, q); len(res.Hits) != 2 {
		t.Fatalf("limit 1 with hops: %d hits, want the hit and one added", len(res.Hits))
	}

	// Another org reaches nothing of this one.
	x := b.store(t, b.eve, "Autovacuum tuning elsewhere", "autovacuum_vacuum_scale_factor 0.2")
	b.indexAll(t)
	for _, h := range b.hopSearch(t, b.eve, knowledge.SearchInput{Query: "autovacuum scale factor", Hops: 2}).Hits {
		if h.ID != x {
			t.Fatalf("another org reached %v", h)
		}
	}
}

func TestSearchHopsFiltersAndHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hit := b.store(t, b.alice, "Kafka consumer lag alert", "consumer lag above threshold pages on-call")
	old := b.store(t, b.alice, "Old runbook", "restart everything")
	head := b.store(t, b.alice, "New runbook", "restart one broker at a time")
	expired, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "Temporary workaround", Body: "pin the version", ExpiresAt: ptr(time.Now().Add(1500 * time.Millisecond))})
	if err != nil {
		t.Fatal(err)
	}
	gone := b.store(t, b.alice, "Closed relation", "was related once")
	b.link(t, b.alice, old, "FIXES", hit)
	b.link(t, b.alice, expired.ID, "FIXES", hit)
	b.link(t, b.alice, gone, "FIXES", hit)
	if _, err := b.svc.Supersede(b.ctx, b.alice, old, head); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	whileOpen := time.Now()
	time.Sleep(20 * time.Millisecond)
	if _, err := b.svc.Unlink(b.ctx, b.alice, gone, hit, "FIXES"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the workaround expires
	b.indexAll(t)
	b.embedPending(t)

	q := knowledge.SearchInput{Query: "consumer lag alert", Hops: 1}
	got := hitByID(b.hopSearch(t, b.bob, q))
	// The superseded runbook stands for its head; the expired and the
	// unlinked entries are not reached.
	if len(got) != 2 || got[head].Via == nil || got[head].Via.Type != "FIXED_BY" || got[head].Via.FromID != hit {
		t.Fatalf("hops today: %+v", got)
	}
	q.IncludeSuperseded, q.IncludeExpired = true, true
	got = hitByID(b.hopSearch(t, b.bob, q))
	if len(got) != 3 || got[old].Via == nil || got[expired.ID].Via == nil {
		t.Fatalf("hops with superseded and expired: %+v", got)
	}
	// As of a time the closed relation was open, it is followed.
	q = knowledge.SearchInput{Query: "consumer lag alert", Hops: 1, AsOf: &whileOpen, IncludeExpired: true}
	got = hitByID(b.hopSearch(t, b.bob, q))
	if _, ok := got[gone]; !ok {
		t.Fatalf("asOf while the relation was open: %+v", got)
	}
	// Forgotten entries are never reached.
	if _, err := b.svc.Forget(b.ctx, b.alice, head, "wrong", false); err != nil {
		t.Fatal(err)
	}
	got = hitByID(b.hopSearch(t, b.bob, knowledge.SearchInput{Query: "consumer lag alert", Hops: 2, IncludeSuperseded: true, IncludeExpired: true}))
	if _, ok := got[head]; ok {
		t.Fatalf("forgotten entry reached: %+v", got)
	}
}

func TestSearchHopsRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		in    knowledge.SearchInput
		field string
	}{
		{knowledge.SearchInput{Query: "q", Hops: 3}, "hops"},
		{knowledge.SearchInput{Query: "q", Hops: -1}, "hops"},
		{knowledge.SearchInput{Query: "q", RelationTypes: []string{"RELATES_TO"}}, "relationTypes"},
		{knowledge.SearchInput{Query: "q", Hops: 1, RelationTypes: []string{"relates"}}, "relationTypes[0]"},
		{knowledge.SearchInput{Query: "q", Hops: 1, RelationTypes: []string{"RELATES_TO", "NOPE"}}, "relationTypes[1]"},
		{knowledge.SearchInput{Query: "q", Hops: 1, RelationTypes: []string{"SUPERSEDES"}}, "relationTypes[0]"},
	} {
		b.store(t, b.alice, "q", "q") // a hit, so the types are resolved
		_, err := b.svc.Search(b.ctx, b.alice, c.in)
		wantCode(t, err, errs.CodeInvalidArgument, c.field)
	}
}

// TestSearchHopsBoundEdges: a hit related to more entries than the bound
// reads at most HopEdgesPerEntry of them per direction.
func TestSearchHopsBoundEdges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hit := b.store(t, b.alice, "Hub entry about zanzibar", "zanzibar")
	for i := range knowledge.HopEdgesPerEntry + 5 {
		o := b.store(t, b.alice, fmt.Sprintf("Spoke %d", i), "spoke")
		b.link(t, b.alice, o, "PART_OF", hit)
	}
	b.indexAll(t)
	res := b.hopSearch(t, b.bob, knowledge.SearchInput{Query: "zanzibar", Hops: 1, Limit: new(50)})
	if n := len(res.Hits) - 1; n != knowledge.HopEdgesPerEntry {
		t.Fatalf("%d entries added, want the bound %d", n, knowledge.HopEdgesPerEntry)
	}
}

// A search's hops read the entries the relations reach by their ids,
// whatever the size of the org: in an org of 3,000 other entries, on
// tables never analyzed, in the plans a connection keeps for its
// statements (generic), no statement of a two-hop search reads more than
// 50 rows of a knowledge table, counting those a scan's filter removed.
// The hop statement joined the entries it reached to the org's entries
// twice, and the planner, believing an org's rows few, read the org once
// for each of them; then, as arrays, it read the org through another index
// and kept them, as the hits' bodies did.
func TestSearchHopsReadOnlyTheEntriesReached(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, knowledgetest.PlansOnCoordinator)
	b := setup(t)
	hit := b.store(t, b.alice, "Autovacuum tuning for hot tables", "autovacuum_vacuum_scale_factor 0.05 keeps bloat down", "postgres")
	runbook := b.store(t, b.alice, "Runbook: when the queue stalls", "drain workers, restart the broker, check lag", "postgres")
	second := b.store(t, b.bob, "Broker sizing decision", "three nodes, quorum queues", "postgres")
	b.link(t, b.alice, runbook, "DEPENDS_ON", hit)
	b.link(t, b.alice, runbook, "DERIVED_FROM", second)
	b.indexAll(t)
	b.embedPending(t)
	const others = 3000
	knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, others, "note")
	pool, plans := knowledgetest.PlanPool(t, b.db, db.DefaultAppRole, "force_generic_plan")
	svc := knowledge.New(pool, b.opts)
	for range 2 {
		res, err := svc.Search(b.ctx, b.bob, knowledge.SearchInput{Query: "autovacuum scale factor", Hops: 2})
		if err != nil {
			t.Fatal(err)
		}
		got := hitByID(res)
		if _, ok := got[second]; !ok || len(got) != 3 {
			t.Fatalf("hits %v; want the hit, the runbook one hop away and the decision two", got)
		}
	}
	// The rows each scan read, those its filter removed included.
	if read := knowledgetest.ReadScans(plans.All(), 50); len(read) > 0 {
		t.Fatalf("in an org of %d other entries:\n%s", others, strings.Join(read, "\n"))
	}
}
