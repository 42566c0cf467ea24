package knowledge_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// A large org that is a minority of the table gets an HNSW index of its
// own from Upkeep; the vector search plan uses it for that org (and only
// for it), and finds the same entries.
func TestUpkeepBuildsAnOrgVectorIndex(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	b := setup(t, func(o *knowledge.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	fill := func(c knowledge.Caller, n int, word string) {
		if _, err := b.pool.Exec(b.ctx, `
			INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
			SELECT $1, $3 || ' note ' || i, 'observation ' || i || ' about ' || $3 || ' and more', $2
			FROM generate_series(1, $4::int) i`, c.OrgID, c.AgentID, word, n); err != nil {
			t.Fatal(err)
		}
	}
	fill(b.alice, 200, "alpha")
	fill(b.eve, 300, "beta") // org A is 40% of the table: a minority
	b.embedPending(t)
	b.indexAll(t)
	want := b.search(t, b.bob, knowledge.SearchInput{Query: "alpha note 17"})

	space := knowledge.SpaceOf(embed.NewLocal())
	ups := knowledge.NewMaintenance(b.ops, knowledge.MaintenanceConfig{OrgVectorIndexMinDocs: 150})
	// The first pass builds the model's index over every org.
	rep, err := ups.Upkeep(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Built, []string{space.IndexName(), space.ChunkIndexName()}) {
		t.Fatalf("want the model's index %s built first, got %+v", space.IndexName(), rep)
	}
	name := space.OrgIndexName(b.org)
	vectorIndexes := func(org uuid.UUID) []knowledge.VectorIndexState {
		t.Helper()
		st, err := b.ops.Operations().SearchIndexStatus(b.ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		return st.VectorIndexes
	}
	if got := vectorIndexes(b.org); len(got) != 0 {
		t.Fatalf("the org's own vector indexes before Upkeep built one: %v", got)
	}
	rep, err = ups.Upkeep(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Built, []string{name}) {
		t.Fatalf("want %s built (org B is the majority: none for it), got %+v", name, rep)
	}
	// Each build was sized from its elements (vecspace.BuildMemory):
	// every entry for the model's index, no chunk, the org's 200.
	builds := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Msg      string `json:"msg"`
			Index    string `json:"index"`
			Elements int64  `json:"elements"`
			MemoryMB int64  `json:"maintenance_work_mem_mb"`
		}
		if err := json.Unmarshal([]byte(line), &l); err == nil && l.Msg == "vector index build" {
			if l.MemoryMB < 64 {
				t.Errorf("%s built with %d MB, under the 64 MB floor", l.Index, l.MemoryMB)
			}
			builds[l.Index] = l.Elements
		}
	}
	if wantBuilds := map[string]int64{space.IndexName(): 500, space.ChunkIndexName(): 0, name: 200}; !maps.Equal(builds, wantBuilds) {
		t.Errorf("builds logged with elements %v, want %v", builds, wantBuilds)
	}
	if n := b.count(t, `SELECT count(*) FROM pg_indexes WHERE indexname = $1 AND indexdef LIKE '%hnsw%' AND indexdef LIKE '%' || $2 || '%'`, name, b.org.String()); n != 1 {
		t.Fatal("the index is not a partial HNSW index of the org")
	}
	if got := vectorIndexes(b.org); !slices.Equal(got, []knowledge.VectorIndexState{{Name: name, Valid: true}}) {
		t.Fatalf("the org's own vector indexes: %v, want %s valid", got, name)
	}
	if got := vectorIndexes(b.other); len(got) != 0 {
		t.Fatalf("org B's status shows org A's index: %v", got)
	}
	// The function's plan for this org uses it. (On a Citus cluster the
	// function runs on the org's worker, whose plan this session's
	// auto_explain does not see.)
	if !testenv.IsCluster() {
		plan := explainVector(t, b, b.org)
		if !strings.Contains(plan, name) {
			t.Fatalf("the org's vector plan does not use its index:\n%s", plan)
		}
		if plan := explainVector(t, b, b.other); strings.Contains(plan, name) {
			t.Fatalf("another org's plan uses org A's index:\n%s", plan)
		}
	}
	got := b.search(t, b.bob, knowledge.SearchInput{Query: "alpha note 17"})
	if fmt.Sprint(ids(got.Hits)) != fmt.Sprint(ids(want.Hits)) {
		t.Fatalf("answers differ with the org's index: %v vs %v", ids(got.Hits), ids(want.Hits))
	}
	// Nothing more to build.
	if rep, err := ups.Upkeep(b.ctx); err != nil || len(rep.Built) != 0 {
		t.Fatalf("second pass: %+v %v", rep, err)
	}
	// An invalid index (a failed concurrent build) is dropped, then rebuilt.
	if _, err := b.pool.Exec(b.ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1::regclass`, name); err != nil {
		t.Fatal(err)
	}
	if got := vectorIndexes(b.org); !slices.Equal(got, []knowledge.VectorIndexState{{Name: name, Valid: false}}) {
		t.Fatalf("the org's own vector indexes: %v, want %s not valid", got, name)
	}
	if rep, err := ups.Upkeep(b.ctx); err != nil || !slices.Equal(rep.Dropped, []string{name}) || !slices.Equal(rep.Built, []string{name}) {
		t.Fatalf("invalid index: %+v %v", rep, err)
	}
}

// explainVector is the plan of the vector function's query for an org.
func explainVector(t *testing.T, b *bundle, org uuid.UUID) string {
	t.Helper()
	var vec pgvector.Vector
	if err := b.pool.QueryRow(b.ctx, "SELECT embedding FROM knowledge WHERE embedding IS NOT NULL LIMIT 1").Scan(&vec); err != nil {
		t.Fatal(err)
	}
	return vectorPlan(t, b.pool, "knowledge_vector_hnsw", org, embed.NewLocal().Model(), vec.Slice())
}

// IndexAll vacuums the postings, the queue and the metadata pairs after
// indexing a bulk load (at least UpkeepBaseRows entries), so search reads
// them without a heap visit a posting or a pair or a walk over dead queue
// rows before Upkeep runs, and leaves them alone after a small pass
// (Upkeep's thresholds cover those).
//
// Checked by what the vacuum records (vacuum_count; reltuples, which a
// vacuum sets from -1 to the rows it counted; relallvisible, which nothing
// but a vacuum sets in this test), not by every page being all-visible:
// which pages one vacuum can mark also depends on what else in the cluster
// holds a snapshot or pins a page at that moment.
func TestIndexAllVacuumsWhatABulkLoadChurned(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads the tables' own pg_class and vacuum counters, a shell's on a coordinator (TestClusterUpkeepPerShard checks the shards')")
	b := setup(t)
	fill := func(n int) {
		if _, err := b.pool.Exec(b.ctx, `
			INSERT INTO knowledge (org_id, title, body, created_by_agent_id, metadata)
			SELECT $1, 'note ' || i, 'observation ' || i || ' about the queue and the worker', $2, jsonb_build_object('shard', i % 7)
			FROM generate_series(1, $3::int) i`, b.alice.OrgID, b.alice.AgentID, n); err != nil {
			t.Fatal(err)
		}
	}
	type state struct {
		postingsVacuums, queueVacuums, pairsVacuums int
		visible, pages                              int
		queueCounted                                float64 // -1 until a vacuum or analyze counts it
	}
	read := func() (s state) {
		if err := b.pool.QueryRow(b.ctx, `
			SELECT pg_stat_get_vacuum_count('knowledge_postings'::regclass),
			       pg_stat_get_vacuum_count('knowledge_index_queue'::regclass),
			       pg_stat_get_vacuum_count('knowledge_metadata_pairs'::regclass),
			       p.relallvisible, pg_relation_size(p.oid) / current_setting('block_size')::int,
			       q.reltuples
			FROM pg_class p, pg_class q
			WHERE p.oid = 'knowledge_postings'::regclass AND q.oid = 'knowledge_index_queue'::regclass`).
			Scan(&s.postingsVacuums, &s.queueVacuums, &s.pairsVacuums, &s.visible, &s.pages, &s.queueCounted); err != nil {
			t.Fatal(err)
		}
		return s
	}
	fill(knowledge.UpkeepBaseRows / 5)
	b.indexAll(t)
	if s := read(); s.postingsVacuums != 0 || s.queueVacuums != 0 || s.pairsVacuums != 0 || s.visible != 0 || s.pages == 0 || s.queueCounted != -1 {
		t.Fatalf("a small pass: want the postings, the queue and the pairs left to Upkeep, got %+v", s)
	}
	fill(knowledge.UpkeepBaseRows)
	b.indexAll(t)
	// The indexer deletes what it indexes: the vacuum counts 0 queued rows.
	if s := read(); s.postingsVacuums != 1 || s.queueVacuums != 1 || s.pairsVacuums != 1 || s.visible == 0 || s.queueCounted != 0 {
		t.Fatalf("after a bulk load: want the postings, the queue and the pairs vacuumed once, got %+v", s)
	} else if s.visible != s.pages {
		t.Logf("after a bulk load: %d of %d postings pages all-visible", s.visible, s.pages)
	}
}

// A large org's metadata pair that its searches filter by gets an HNSW
// index of its own from Upkeep, on a single node and on a cluster (where
// the org's worker answers whether it is there and walks it); the
// filtered search answers the same hits with it as without it, and another
// org's search by the same pair never sees the index's entries.
func TestUpkeepBuildsAPairVectorIndexOfASearchedPair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fill := func(c knowledge.Caller, n int, word string) {
		if _, err := b.pool.Exec(b.ctx, `
			INSERT INTO knowledge (org_id, title, body, created_by_agent_id, metadata)
			SELECT $1, $3 || ' note ' || i, 'observation ' || i || ' about ' || $3 || ' and more', $2,
			       jsonb_build_object('team', 't' || (i % 5))
			FROM generate_series(1, $4::int) i`, c.OrgID, c.AgentID, word, n); err != nil {
			t.Fatal(err)
		}
	}
	fill(b.alice, 300, "alpha")
	fill(b.eve, 300, "alpha")
	b.embedPending(t)
	b.indexAll(t)
	in := knowledge.SearchInput{Query: "alpha observation 17", Mode: knowledge.ModeSemantic,
		Filters: knowledge.Filters{Metadata: map[string]any{"team": "t1"}}}
	want := b.search(t, b.bob, in)
	theirs := b.search(t, b.eve, in)
	if len(want.Hits) == 0 || len(theirs.Hits) == 0 {
		t.Fatal("the filtered searches found nothing")
	}
	var name string
	if err := b.pool.QueryRow(b.ctx, `SELECT knowledge_pair_index_name($1, $2, k) FROM unnest(knowledge_metadata_pair_keys('{"team": "t1"}')) k`,
		knowledge.SpaceOf(embed.NewLocal()).PairIndexPrefix(), b.org).Scan(&name); err != nil {
		t.Fatal(err)
	}
	ups := knowledge.NewMaintenance(b.ops, knowledge.MaintenanceConfig{OrgVectorIndexMinDocs: 150, PairVectorIndexMinDocs: 30})
	var built []string
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(built, name); {
		rep, err := ups.UpkeepVectorIndexes(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		built = append(built, rep.Built...)
		if len(rep.Built) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("built %v, not the searched pair's %s", built, name)
			}
			time.Sleep(20 * time.Millisecond) // the search's record is written after its answer
		}
	}
	// The org's status shows it, with its pair; another org's does not.
	st, err := b.ops.Operations().SearchIndexStatus(b.ctx, b.org)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.VectorIndexes, knowledge.VectorIndexState{Name: name, Valid: true, Pair: `{"team": "t1"}`}) {
		t.Fatalf("the org's status does not show its pair's index %s: %+v", name, st.VectorIndexes)
	}
	if st, err := b.ops.Operations().SearchIndexStatus(b.ctx, b.other); err != nil || slices.ContainsFunc(st.VectorIndexes, func(ix knowledge.VectorIndexState) bool { return ix.Name == name }) {
		t.Fatalf("another org's status: %+v %v", st, err)
	}
	walks := func() int {
		t.Helper()
		return b.count(t, `SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname LIKE $1 || '%'`, name)
	}
	if testenv.IsCluster() {
		// The statement runs on the org's worker, which walks its shard's
		// copy of the index (Citus names it with the shard's id).
		walks = func() int {
			t.Helper()
			return b.count(t, `SELECT coalesce(sum(result::bigint), 0) FROM run_command_on_workers(format(
				'SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname LIKE %L', $1 || '%'))`, name)
		}
	}
	before := walks()
	if got := b.search(t, b.bob, in); fmt.Sprint(ids(got.Hits)) != fmt.Sprint(ids(want.Hits)) {
		t.Fatalf("answers differ with the pair's index: %v vs %v", ids(got.Hits), ids(want.Hits))
	}
	// The search walked it (an idle backend's statistics reach the views
	// within 10 s: PostgreSQL's PGSTAT_IDLE_INTERVAL).
	for deadline := time.Now().Add(30 * time.Second); walks() == before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the filtered search did not walk the pair's index %s", name)
		}
	}
	if got := b.search(t, b.eve, in); fmt.Sprint(ids(got.Hits)) != fmt.Sprint(ids(theirs.Hits)) {
		t.Fatalf("another org's answers differ with org A's pair index: %v vs %v", ids(got.Hits), ids(theirs.Hits))
	}
	// The org's index rebuilt in another language (its size counted again
	// from 0 while its entries wait for the indexer): the pair's index
	// stays, during the rebuild and after it.
	if _, err := b.ops.Operations().SetTextSearchConfig(b.ctx, b.org, "simple"); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"during the rebuild", "after it"} {
		if when == "after it" {
			b.indexAll(t)
		}
		rep, err := ups.UpkeepVectorIndexes(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(rep.Dropped, name) || b.count(t, "SELECT count(*) FROM pg_indexes WHERE indexname = $1", name) != 1 {
			t.Fatalf("%s: the pair's index %s was dropped (%+v)", when, name, rep)
		}
	}
}
