package knowledge_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// Every tool of the agents reads what it is about, whatever the size of
// the org: in an org of 3,000 other entries and 300 the indexer has not reached,
// on tables never analyzed, in the plans made for each call's arguments
// and in the generic ones a connection keeps, no statement
// of a store, supersession, correction, get, task link, relation, search
// with hops, listing, document store and replacement, or forget reads
// more than 50 rows of a knowledge table in one pass. On tables never
// analyzed the planner believes an org's rows few, and a statement that
// joins the org's entries to a few ids may read them all.
func TestAgentToolsReadOnlyWhatTheyAreAbout(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, knowledgetest.PlansOnCoordinator)
	b := setup(t)
	const others = 3000
	knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, others, "note")
	b.indexAll(t)
	// And some the indexer has not reached yet.
	knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, 300, "queued note")
	task := b.mkTask(t, b.org)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// First in the plans made for each call's arguments, then in the plans
	// the connections keep.
	plans := knowledgetest.GatherPlans(t, b.db, db.DefaultAppRole, func(round int, _ string, pool *pgxpool.Pool) {
		svc := knowledge.New(pool, b.opts)
		store := func(title, body string) uuid.UUID {
			t.Helper()
			r, err := svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: title, Body: body, Tags: []string{"pumps"}})
			must("store "+title, err)
			return r.ID
		}
		a := store("Pump seal replacement", "replace the mechanical seal when it weeps")
		c := store("Valve torque table", "torque the flange bolts in a star pattern")
		d := store("Pump seal replacement, revised", "replace the mechanical seal and the sleeve when it weeps")
		_, err := svc.Supersede(b.ctx, b.alice, a, d)
		must("supersede", err)
		_, err = svc.Correct(b.ctx, b.alice, c, knowledge.StoreInput{Title: "Valve torque table, corrected", Body: "torque the flange bolts in a cross pattern"})
		must("correct", err)
		_, err = svc.Get(b.ctx, b.bob, d)
		must("get", err)
		_, err = svc.LinkTask(b.ctx, b.alice, d, knowledge.TaskRef{TaskID: task, Kind: knowledge.LinkProduced})
		must("link task", err)
		_, err = svc.TaskKnowledge(b.ctx, b.bob, task, "")
		must("task knowledge", err)
		_, err = svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: d, ToID: c, Type: "RELATES_TO"})
		must("link", err)
		_, err = svc.Relations(b.ctx, b.bob, knowledge.RelationsInput{ID: d, Direction: "both"})
		must("relations", err)
		_, err = svc.Search(b.ctx, b.bob, knowledge.SearchInput{Query: "mechanical seal", Hops: 1})
		must("search", err)
		_, err = svc.List(b.ctx, b.bob, knowledge.ListInput{Tags: []string{"pumps"}})
		must("list", err)
		_, err = svc.Unlink(b.ctx, b.alice, d, c, "RELATES_TO")
		must("unlink", err)
		for v := range 2 {
			_, err = svc.StoreDocument(b.ctx, b.alice, knowledge.DocumentInput{Title: "Pump manual", Source: "docs/pumps.md",
				Content: "# Seals\n\nVersion " + string(rune('a'+round*2+v)) + " of the seals chapter.\n\n# Bearings\n\nGrease them yearly.\n"})
			must("store document", err)
		}
		_, err = svc.Forget(b.ctx, b.alice, c, "test", false)
		must("forget", err)
	})
	if len(plans) < 50 {
		t.Fatalf("%d plans gathered; want every statement of the tools", len(plans))
	}
	// Counting the rows a scan's filter removed (ReadScans), but for what
	// still reads the org's rows through another index and keeps the few
	// asked for, held to the rows it returns (docs/architecture.md): a
	// replacement's supersession of its sections (an UPDATE, whose target
	// the planner scans itself) and the reads of the index queue by its
	// key (the erasure's unindexing, PostgreSQL's foreign-key check).
	wide := knowledgetest.ReadScansBut(plans, 50, "-- name: SupersedeSections ", "-- name: PurgeUnindex ",
		`FROM ONLY "public"."knowledge_index_queue" x WHERE`)
	if len(wide) > 0 {
		t.Fatalf("in an org of %d other entries:\n%s", others, strings.Join(wide, "\n"))
	}
}

// The worker's embedding batch reads its own entries, whatever the
// backlog: with 3,000 other entries of the org waiting for their vectors,
// no statement of a batch reads more than 50 rows of a knowledge
// table in one pass, counting those a scan's filter removed (it read the
// org's pending entries and kept the batch's: a backlog's catching up grew
// with the square of the backlog).
func TestEmbeddingBatchReadsOnlyItsEntries(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, knowledgetest.PlansOnCoordinator)
	b := setup(t)
	const others = 3000
	knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, others, "note")
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND embedding_status = 'pending'", b.org); n != others {
		t.Fatalf("%d entries pending; want the %d others", n, others)
	}
	// A batch of three and one of the worker's 32 (the planner weighs a
	// look-up per id against the org's pending entries it believes few),
	// first in the plans made for their arguments, then in the plans the
	// connections keep.
	const batches = 2 * (3 + 32)
	plans := knowledgetest.GatherPlans(t, b.db, "postgres", func(_ int, mode string, pool *pgxpool.Pool) {
		h := jobs.NewEmbedHandler(pool, embed.NewLocal(), jobs.HandlerOptions{})
		for _, n := range []int{3, 32} {
			for i := range n {
				b.store(t, b.alice, fmt.Sprintf("Pump seal %s %d.%d", mode, n, i), "replace the mechanical seal when it weeps")
			}
			all := b.enq.All()
			if err := h.Process(b.ctx, all[len(all)-n:]); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND embedding_status = 'ready'", b.org); n != batches {
		t.Fatalf("%d entries ready; want the %d of the batches", n, batches)
	}
	// The rows each scan read, those its filter removed included
	// (ReadScans): a statement that found the batch's entries among the
	// org's pending ones returned a few rows and read them all.
	var writes int
	for _, p := range plans {
		if strings.Contains(p, "-- name: MarkEmbeddingReady ") {
			writes++
		}
	}
	if writes < batches {
		t.Fatalf("%d plans of the vector write; want one for each of the %d entries", writes, batches)
	}
	if read := knowledgetest.ReadScans(plans, 150); len(read) > 0 {
		t.Fatalf("with %d other entries pending:\n%s", others, strings.Join(read, "\n"))
	}
}

// The worker's embedding batches keep the plans their connection made once
// for the batch's reads and its lock (ListJobEntries,
// LockPendingForEmbedding: each job a probe of the primary key), instead of
// a plan made for every batch (plan_cache_mode auto kept custom plans: 0.24
// to 0.28 ms of planning a batch for 0.04 of running it). The handler's
// one connection is asked what it planned for each.
func TestEmbeddingBatchKeepsItsPlans(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "on a cluster the batch runs on the org's worker, not on the coordinator's connection")
	b := setup(t)
	pool, err := db.Connect(b.db.URL + "&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	h := jobs.NewEmbedHandler(pool, embed.NewLocal(), jobs.HandlerOptions{})
	const batches = 8
	for i := range batches {
		for j := range 2 {
			b.store(t, b.alice, fmt.Sprintf("Pump seal %d.%d", i, j), "replace the mechanical seal when it weeps")
		}
		all := b.enq.All()
		if err := h.Process(b.ctx, all[len(all)-2:]); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND embedding_status = 'ready'", b.org); n != 2*batches {
		t.Fatalf("%d entries ready; want the %d of the batches", n, 2*batches)
	}
	for _, name := range []string{"ListJobEntries", "LockPendingForEmbedding"} {
		var generic, custom int64
		if err := pool.QueryRow(b.ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements
			WHERE statement LIKE '%name: `+name+` %'`).Scan(&generic, &custom); err != nil {
			t.Fatal(err)
		}
		if generic+custom < batches {
			t.Fatalf("%s ran %d times for %d batches (the check proves nothing)", name, generic+custom, batches)
		}
		if custom != 0 {
			t.Fatalf("%s was planned for %d of its %d runs (custom plans); want the connection's generic plan", name, custom, generic+custom)
		}
	}
}

// The indexer reads the entries it indexes, whatever the org has indexed
// already: with 3,000 entries indexed and 100 queued, on tables never
// analyzed, in the plans made for each call's arguments and in the ones a
// connection keeps, no statement of IndexAll reads more than 150 rows of a
// knowledge table in one pass, counting those a scan's filter removed (the
// 100 queued are one pass's).
func TestIndexerReadsOnlyWhatItIndexes(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, knowledgetest.PlansOnCoordinator)
	b := setup(t)
	const indexed, queued = 3000, 100
	knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, indexed, "note")
	b.indexAll(t)
	plans := knowledgetest.GatherPlans(t, b.db, "postgres", func(_ int, mode string, pool *pgxpool.Pool) {
		knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, queued, "queued note "+mode)
		n, err := maint(knowledge.New(pool, b.opts)).IndexAll(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != queued {
			t.Fatalf("%s: indexed %d; want the %d queued", mode, n, queued)
		}
	})
	if len(plans) < 4 {
		t.Fatalf("%d plans gathered; want every statement of two passes", len(plans))
	}
	if read := knowledgetest.ReadScans(plans, 150); len(read) > 0 {
		t.Fatalf("with %d entries indexed:\n%s", indexed, strings.Join(read, "\n"))
	}
}

// The duplicate check reads the entries' table for its candidates only,
// however many entries share the new text's keys: in an org of 3,000
// entries that all share every key of a note (an org of short notes of
// one vocabulary shares keys by the hundred), a copy of the note, stored
// in the plans made for its arguments and in the generic ones, reads no
// more than 50 rows of knowledge in one pass (the key look-up read up to
// its 500 hits' rows there, each a wide row: 20-30 ms a store at 100,000
// notes), and still finds the note.
func TestDuplicateCheckReadsEntriesOnlyForItsCandidates(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, knowledgetest.PlansOnCoordinator)
	b := setup(t)
	const others = 3000
	knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, others, "note")
	const title, body = "Pump seal replacement", "replace the mechanical seal when it weeps, then run the pump dry for a minute"
	orig := b.store(t, b.alice, title, body)
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET similar_keys = (SELECT similar_keys FROM knowledge WHERE id = $2)
		WHERE org_id = $1 AND id <> $2`, b.org, orig); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_similar_keys WHERE org_id = $1", b.org); n != others+1 {
		t.Fatalf("%d entries' keys in the look-up's table; want %d", n, others+1)
	}
	b.indexAll(t)
	plans := knowledgetest.GatherPlans(t, b.db, db.DefaultAppRole, func(_ int, mode string, pool *pgxpool.Pool) {
		svc := knowledge.New(pool, b.opts)
		for range 6 { // past the five runs after which a connection may keep a generic plan
			r, err := svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: title, Body: body})
			if err != nil {
				t.Fatalf("store: %v", err)
			}
			if !slices.ContainsFunc(r.Similar, func(s knowledge.Similar) bool { return s.ID == orig }) {
				t.Fatalf("%s: the copy's similar list %v misses the note", mode, r.Similar)
			}
		}
	})
	if wide := knowledgetest.WideScansOf(plans, 50, "knowledge"); len(wide) > 0 {
		t.Fatalf("with %d entries sharing the note's keys:\n%s", others, strings.Join(wide, "\n"))
	}
}
