package knowledge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// exactStats counts the org's rows directly (what Stats did before the
// counters): the reference the counters must equal.
func exactStats(t *testing.T, b *bundle, org uuid.UUID) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	rows, err := b.pool.Query(b.ctx, `
		SELECT 'entries', '', count(*) FROM knowledge WHERE org_id = $1
		UNION ALL SELECT 'heads', '', count(*) FROM knowledge WHERE org_id = $1 AND head_id IS NULL AND (expires_at IS NULL OR expires_at > now())
		UNION ALL SELECT 'superseded', '', count(*) FROM knowledge WHERE org_id = $1 AND head_id IS NOT NULL
		UNION ALL SELECT 'expired', '', count(*) FROM knowledge WHERE org_id = $1 AND head_id IS NULL AND expires_at <= now()
		UNION ALL SELECT 'status', embedding_status, count(*) FROM knowledge WHERE org_id = $1 GROUP BY embedding_status
		UNION ALL SELECT 'model', embedding_model, count(*) FROM knowledge WHERE org_id = $1 AND embedding_status = 'ready' GROUP BY embedding_model
		UNION ALL SELECT 'agent', coalesce(created_by_agent_id::text, ''), count(*) FROM knowledge WHERE org_id = $1 GROUP BY created_by_agent_id
		UNION ALL SELECT 'tag', t, count(*) FROM knowledge, unnest(tags) t WHERE org_id = $1 GROUP BY t
		UNION ALL SELECT 'kind', kind, count(*) FROM knowledge WHERE org_id = $1 AND head_id IS NULL AND (expires_at IS NULL OR expires_at > now()) GROUP BY kind
		UNION ALL SELECT 'documents', '', count(*) FROM knowledge_documents WHERE org_id = $1 AND live
		UNION ALL SELECT 'sections', '', count(*) FROM knowledge_sections WHERE org_id = $1 AND ended_at IS NULL`, org)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, key string
		var n int64
		if err := rows.Scan(&kind, &key, &n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			out[kind+":"+key] = n
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func statsMap(st *knowledge.OrgStats) map[string]int64 {
	out := map[string]int64{"entries:": st.Entries, "heads:": st.Heads, "superseded:": st.Superseded, "expired:": st.Expired,
		"documents:": st.Documents, "sections:": st.Sections}
	for k, n := range st.ByKind {
		out["kind:"+k] = n
	}
	for k, n := range map[string]int64{"pending": st.Embeddings.Pending, "ready": st.Embeddings.Ready, "failed": st.Embeddings.Failed} {
		out["status:"+k] = n
	}
	for m, n := range st.Embeddings.ReadyByModel {
		out["model:"+m] = n
	}
	for _, a := range st.PerAgent {
		k := ""
		if a.AgentID != nil {
			k = a.AgentID.String()
		}
		out["agent:"+k] = a.Entries
	}
	for _, tg := range st.TopTags {
		out["tag:"+tg.Tag] = tg.Entries
	}
	for k, n := range out {
		if n == 0 {
			delete(out, k)
		}
	}
	return out
}

// checkAddsUp: the states, the embedding statuses and the kinds of the
// current entries add up.
func checkAddsUp(t *testing.T, when string, st *knowledge.OrgStats) {
	t.Helper()
	var kinds int64
	for _, n := range st.ByKind {
		kinds += n
	}
	if st.Entries != st.Heads+st.Superseded+st.Expired || st.Entries != st.Embeddings.Pending+st.Embeddings.Ready+st.Embeddings.Failed ||
		kinds != st.Heads || len(st.ByKind) != len(knowledge.Kinds) {
		t.Fatalf("%s: the numbers do not add up: %+v", when, st)
	}
}

func sameCounts(t *testing.T, when string, got, want map[string]int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: stats %v\nexact %v", when, got, want)
	}
}

// TestStatsCountersExact: the counters kept by the writes (migration
// 00007) equal a direct count of the rows after every kind of write:
// stores, supersessions, embeddings written and failed, re-embedding,
// expiry passing, a purge; before and after the upkeep folds the deltas,
// and never including another org's rows.
func TestStatsCountersExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	check := func(when string) {
		t.Helper()
		checkStatsExact(t, b, when)
	}
	check("empty org")
	var ids []uuid.UUID
	for i := range 12 {
		c := b.alice
		if i%3 == 0 {
			c = b.bob
		}
		in := knowledge.StoreInput{Title: fmt.Sprintf("entry %d", i), Body: "body", Tags: []string{"db", fmt.Sprintf("t%d", i%4)},
			Kind: knowledge.Kinds[i%len(knowledge.Kinds)]}
		if i%5 == 0 {
			exp := time.Now().Add(time.Hour)
			in.ExpiresAt = &exp
		}
		r, err := b.svc.Store(b.ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if _, err := b.svc.Store(b.ctx, b.eve, knowledge.StoreInput{Title: "other org", Body: "x", Tags: []string{"db", "secret"}}); err != nil {
		t.Fatal(err)
	}
	check("after stores")
	if _, err := b.svc.Supersede(b.ctx, b.alice, ids[1], ids[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Supersede(b.ctx, b.alice, ids[2], ids[4]); err != nil {
		t.Fatal(err)
	}
	check("after supersessions")
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET embedding_status = 'ready', embedding_model = CASE WHEN id = $2 THEN 'm2' ELSE 'm1' END,
		embedded_at = now(), embedding = array_fill(0.1::real, ARRAY[768])::vector WHERE org_id = $1 AND id = ANY($3)`,
		b.org, ids[7], ids[4:9]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET embedding_status = 'failed', embedding_error = 'x' WHERE org_id = $1 AND id = $2`, b.org, ids[9]); err != nil {
		t.Fatal(err)
	}
	check("after embeddings")
	// Time passes for the expiring entries (one of them superseded: it
	// stays superseded).
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET expires_at = now() - interval '1 second' WHERE org_id = $1 AND expires_at IS NOT NULL`, b.org); err != nil {
		t.Fatal(err)
	}
	check("after expiry")
	// Past hours come from the counters, the current hour from the index;
	// an expiry later this hour is not past yet.
	for i, when := range []string{"-2 days", "-61 minutes", "+1 minute"} {
		if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET expires_at = now() + $3::interval WHERE org_id = $1 AND id = $2`, b.org, ids[6+i], when); err != nil {
			t.Fatal(err)
		}
	}
	check("expiries in other hours")
	if _, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.bob.AgentID}, false); err != nil {
		t.Fatal(err)
	}
	check("after a purge of an agent")
	if _, err := maint(b.ops).CompactCounts(b.ctx, 3); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM knowledge_count_deltas`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("deltas left after compaction: %d, %v", left, err)
	}
	check("after compaction")
	if _, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "late", Body: "b", Tags: []string{"late"}}); err != nil {
		t.Fatal(err)
	}
	check("counts and new deltas together")
	st, err := b.ops.Operations().Stats(b.ctx, b.org, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.TopTags) != 2 || st.TopTags[0].Tag != "db" {
		t.Fatalf("top 2 tags: %+v", st.TopTags)
	}
	for _, tg := range st.TopTags {
		if tg.Tag == "secret" {
			t.Fatal("another org's tag counted")
		}
	}
	if st.AgentNames[b.alice.AgentID.String()] != "alice" || len(st.Quotas) != 1 || st.RateLimits == nil {
		t.Fatalf("names, quotas, rate limits: %+v %+v %+v", st.AgentNames, st.Quotas, st.RateLimits)
	}
	// forget_knowledge's tombstones (table of migration 00006): counted
	// apart, per org.
	for _, org := range []knowledge.Caller{b.alice, b.eve} {
		if _, err := b.pool.Exec(b.ctx, `INSERT INTO knowledge_tombstones (org_id, id, created_by_agent_id, created_at, forgotten_by_agent_id, reason)
			VALUES ($1, gen_random_uuid(), $2, now(), $2, 'wrong')`, org.OrgID, org.AgentID); err != nil {
			t.Fatal(err)
		}
	}
	if st, err = b.ops.Operations().Stats(b.ctx, b.org, 2); err != nil || st.Forgotten != 1 {
		t.Fatalf("forgotten: %v %v", st.Forgotten, err)
	}
}

// TestPurgeLeavesNoTagInTheCounters: a tag is content; once the last entry
// carrying it is purged, no counter or delta names it.
func TestPurgeLeavesNoTagInTheCounters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []knowledge.Caller{b.alice, b.bob} {
		tags := []string{"shared"}
		if c == b.bob {
			tags = append(tags, "patient-jane-doe")
		}
		if _, err := b.svc.Store(b.ctx, c, knowledge.StoreInput{Title: "t", Body: "b", Tags: tags}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := maint(b.ops).CompactCounts(b.ctx, 0); err != nil { // the tag is a folded counter too
		t.Fatal(err)
	}
	if _, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.bob.AgentID}, false); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM knowledge_counts WHERE key = 'patient-jane-doe')
		+ (SELECT count(*) FROM knowledge_count_deltas WHERE key = 'patient-jane-doe')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d counter rows still name the purged tag (%v)", n, err)
	}
	st, err := b.ops.Operations().Stats(b.ctx, b.org, 10)
	if err != nil || st.Entries != 1 || len(st.TopTags) != 1 || st.TopTags[0].Tag != "shared" {
		t.Fatalf("stats after the purge: %+v %v", st, err)
	}
}

// TestStatsCountersUnderConcurrency: stores from several agents at once
// while two folds run in a loop: the counters never count a change twice
// or miss one.
func TestStatsCountersUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stop := make(chan struct{})
	folds := make(chan error, 2)
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					folds <- nil
					return
				default:
				}
				if _, err := maint(b.ops).CompactCounts(b.ctx, 7); err != nil {
					folds <- err
					return
				}
			}
		}()
	}
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			c := b.alice
			if w%2 == 1 {
				c = b.bob
			}
			for i := range 15 {
				_, err := b.svc.Store(b.ctx, c, knowledge.StoreInput{Title: fmt.Sprintf("w%d-%d", w, i), Body: "b",
					Tags: []string{fmt.Sprintf("t%d", i%5), fmt.Sprintf("w%d", w)}})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	for range 2 {
		if err := <-folds; err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.ops.Operations().Stats(b.ctx, b.org, 100)
	if err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "after concurrent stores and folds", statsMap(st), exactStats(t, b, b.org))
	if st.Entries != 120 {
		t.Fatalf("%d entries, want 120", st.Entries)
	}
}

// TestStatsCountsDocumentsAndKinds: live documents, current sections and
// the current entries by kind equal a direct count of the rows through a
// document's life (stored, a section changed and one removed, a new title
// superseding the document entry, a section forgotten, the document
// forgotten, a purge), before and after the fold, and another org's
// documents and entries are never counted.
func TestStatsCountsDocumentsAndKinds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	check := func(when string) *knowledge.OrgStats {
		t.Helper()
		return checkStatsExact(t, b, when)
	}
	doc := func(c knowledge.Caller, n int, text func(int) string, title string) *knowledge.DocumentResult {
		t.Helper()
		return b.storeDoc(t, c, knowledge.DocumentInput{Title: title, Content: manual(n, text), Source: "docs/pumps.md", Kind: knowledge.KindProcedural})
	}
	// Another org's document and entries first: never counted here.
	doc(b.eve, 5, same, "Pump manual")
	if _, err := b.svc.Store(b.ctx, b.eve, knowledge.StoreInput{Title: "theirs", Body: "b", Kind: knowledge.KindEpisodic}); err != nil {
		t.Fatal(err)
	}
	if st := check("other org only"); st.Documents != 0 || st.Sections != 0 || st.ByKind[knowledge.KindEpisodic] != 0 {
		t.Fatalf("another org's rows counted: %+v", st)
	}
	doc(b.alice, 3, same, "Pump manual")
	var notes []uuid.UUID
	for i, k := range []string{knowledge.KindSemantic, knowledge.KindEpisodic, knowledge.KindProcedural, knowledge.KindReference, knowledge.KindEpisodic} {
		r, err := b.svc.Store(b.ctx, b.bob, knowledge.StoreInput{Title: fmt.Sprintf("note %d", i), Body: "b", Kind: k})
		if err != nil {
			t.Fatal(err)
		}
		notes = append(notes, r.ID)
	}
	// The episodic notes expire: one in an hour before this one (counted
	// by its hour), one a second ago (read through the expiry index).
	for i, ago := range map[int]string{1: "3 hours", 4: "1 second"} {
		if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET expires_at = now() - $2::interval WHERE id = $1`, notes[i], ago); err != nil {
			t.Fatal(err)
		}
	}
	if st := check("a document and entries of every kind"); st.Documents != 1 || st.Sections != 4 || st.ByKind[knowledge.KindProcedural] != 6 ||
		st.ByKind[knowledge.KindEpisodic] != 0 {
		t.Fatalf("documents %d, sections %d, by kind %v; want 1, 4, procedural 6 (the document, its 4 sections, a note), episodic 0 (expired)",
			st.Documents, st.Sections, st.ByKind)
	}
	changed := func(i int) string {
		if i == 1 {
			return "Chapter 1 rewritten: the valves close at 40 bar."
		}
		return same(i)
	}
	doc(b.alice, 2, changed, "Pump manual") // chapter 1 changed, chapter 2 removed
	check("a section changed and one retired")
	if _, err := maint(b.ops).CompactCounts(b.ctx, 0); err != nil {
		t.Fatal(err)
	}
	check("after the fold")
	second := doc(b.alice, 2, changed, "Pump handbook") // a new document entry: the old one is no longer live
	if st := check("the document entry superseded"); st.Documents != 1 || st.Sections != 3 {
		t.Fatalf("documents %d, sections %d; want 1, 3", st.Documents, st.Sections)
	}
	if _, err := b.svc.Forget(b.ctx, b.alice, second.Sections[0].ID, "wrong", false); err != nil {
		t.Fatal(err)
	}
	check("a section forgotten")
	if _, err := b.svc.Forget(b.ctx, b.alice, second.ID, "obsolete", false); err != nil {
		t.Fatal(err)
	}
	if st := check("the document forgotten"); st.Documents != 0 || st.Sections != 0 {
		t.Fatalf("documents %d, sections %d after the forget; want 0, 0", st.Documents, st.Sections)
	}
	doc(b.bob, 2, same, "Pump manual")
	if _, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.alice.AgentID}, false); err != nil {
		t.Fatal(err)
	}
	if st := check("after a purge of an agent"); st.Documents != 1 {
		t.Fatalf("documents %d after purging the other agent; want bob's 1", st.Documents)
	}
}

// checkStatsExact reads b's org's statistics and fails unless they equal a
// direct count of its rows (exactStats) and add up (checkAddsUp).
func checkStatsExact(t *testing.T, b *bundle, when string) *knowledge.OrgStats {
	t.Helper()
	st, err := b.ops.Operations().Stats(b.ctx, b.org, 100)
	if err != nil {
		t.Fatal(err)
	}
	sameCounts(t, when, statsMap(st), exactStats(t, b, b.org))
	checkAddsUp(t, when, st)
	return st
}
