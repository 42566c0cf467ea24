package search_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// The full-text list: BM25 over title and body with the org's statistics,
// any query word matching. These tests read the list directly
// (SearchLists), before fusion, against the real index.

func TestFullTextAnyWordMatchesAndAllWordsRankFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.filler(t, b.alice, 10)
	onlyA := b.store(t, b.alice, "Kafka consumer lag", "The consumer group fell behind.")
	onlyB := b.store(t, b.alice, "Partition rebalancing", "Rebalancing stalls every deploy.")
	both := b.store(t, b.alice, "Lag during rebalancing", "Consumer lag grows while partitions rebalance.")
	for _, indexed := range []bool{false, true} {
		if indexed {
			b.indexAll(t)
		}
		got, _ := b.fullText(t, b.bob, "why does consumer lag grow when rebalancing")
		if len(got) < 3 || got[0] != both {
			t.Fatalf("indexed=%v: want the entry with every word first, got %v (both %v)", indexed, got, both)
		}
		if !slices.Contains(got, onlyA) || !slices.Contains(got, onlyB) {
			t.Fatalf("indexed=%v: an entry sharing one word must match (OR): %v", indexed, got)
		}
	}
}

func TestFullTextStopWordsAndStemming(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.filler(t, b.alice, 5)
	pooling := b.store(t, b.alice, "Connections pooling", "We pooled the database connections.")
	b.store(t, b.alice, "The it of and", "Is was the a an of to in.") // only stop words
	b.indexAll(t)

	// Stemming: other forms of the same words match.
	if got, _ := b.fullText(t, b.bob, "connection pool"); len(got) != 1 || got[0] != pooling {
		t.Fatalf("stemmed query: got %v, want only %v", got, pooling)
	}
	// Stop words match nothing, and do not change a query's answer.
	if got, _ := b.fullText(t, b.bob, "the of and is it"); len(got) != 0 {
		t.Fatalf("a query of stop words matched %v", got)
	}
	_, with := b.fullText(t, b.bob, "what is the pooling of the connections")
	_, without := b.fullText(t, b.bob, "pooling connections")
	if len(with) != 1 || math.Abs(with[pooling]-without[pooling]) > 1e-9 {
		t.Fatalf("stop words changed the scores: %v vs %v", with, without)
	}
}

func TestFullTextIDFRareWordOutranksCommonWord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// "timeout" is in many entries, "deadlock" in one; each of the two
	// entries below holds exactly one of them, with equal lengths.
	for i := range 12 {
		b.store(t, b.alice, fmt.Sprintf("Note %d", i), fmt.Sprintf("A timeout happened in job %d.", i))
	}
	common := b.store(t, b.alice, "Worker report", "The worker hit a timeout today.")
	rare := b.store(t, b.alice, "Worker report", "The worker hit a deadlock today.")
	b.indexAll(t)
	got, s := b.fullText(t, b.bob, "timeout deadlock")
	if len(got) == 0 || got[0] != rare || !(s[rare] > s[common]) {
		t.Fatalf("want the rare word's entry first: got %v (rare %v: %v, common %v: %v)", got, rare, s[rare], common, s[common])
	}
}

func TestFullTextLengthNormalisation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.filler(t, b.alice, 5)
	short := b.store(t, b.alice, "Note", "The replica lagged.")
	long := b.store(t, b.alice, "Note", "The replica lagged. "+strings.Repeat("Unrelated words about other matters fill this entry. ", 20))
	b.indexAll(t)
	got, s := b.fullText(t, b.bob, "replica")
	if len(got) != 2 || got[0] != short || !(s[short] > s[long]) {
		t.Fatalf("the shorter entry with the same match must rank first: %v %v", got, s)
	}
}

func TestFullTextIdentifiersFoundExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.filler(t, b.alice, 5)
	cases := []struct{ query, holder, distractor string }{
		{"pg_stat_activity", "Check pg_stat_activity for idle sessions.", "The activity of pg stat collectors; stat pg activity."},
		{"ERR_CONN_RESET", "Clients saw ERR_CONN_RESET after the deploy.", "The conn was reset; err: reset conn err."},
		{"v1.2.3", "The bug is fixed in v1.2.3 of the client.", "The bug is fixed in v1.2.4 of the client."},
		{"user-id", "Every request carries a user-id header.", "The user sent an id and another user id."},
		{"CamelCaseName", "The struct CamelCaseName holds the config.", "Camel case names are common in Go."},
		{"/var/lib/postgresql", "Data lives in /var/lib/postgresql on the host.", "The lib var of postgresql is set."},
	}
	holders := map[string]uuid.UUID{}
	for _, c := range cases {
		holders[c.query] = b.store(t, b.alice, "Note on "+strings.Trim(c.query, "/"), c.holder)
		b.store(t, b.alice, "Note on something", c.distractor)
	}
	for _, indexed := range []bool{false, true} {
		if indexed {
			b.indexAll(t)
		}
		for _, c := range cases {
			got, s := b.fullText(t, b.bob, c.query)
			if len(got) == 0 || got[0] != holders[c.query] {
				t.Fatalf("indexed=%v: %q: want its holder first, got %v", indexed, c.query, got)
			}
			if len(got) > 1 && !(s[got[0]] > s[got[1]]) {
				t.Fatalf("indexed=%v: %q: the exact holder must score above the rest: %v", indexed, c.query, s)
			}
		}
	}
}

// One org's vocabulary never shifts another's ranking: statistics are per
// org, so org A's scores stay exactly the same while org B fills up with
// one of the query's words.
func TestFullTextStatisticsArePerOrg(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.filler(t, b.alice, 5)
	x := b.store(t, b.alice, "Cache stampede", "Many clients refill the cache at once.")
	y := b.store(t, b.alice, "Thundering herd", "Clients wake together and refill.")
	b.indexAll(t)
	q := "cache refill clients"
	before, sb := b.fullText(t, b.bob, q)
	for i := range 30 {
		b.store(t, b.eve, fmt.Sprintf("B note %d", i), "cache cache cache everywhere in org B")
	}
	b.indexAll(t)
	after, sa := b.fullText(t, b.bob, q)
	if fmt.Sprint(before) != fmt.Sprint(after) || sb[x] != sa[x] || sb[y] != sa[y] {
		t.Fatalf("org B changed org A's ranking: %v %v -> %v %v", before, sb, after, sa)
	}
	// And org B's statistics count only org B's entries.
	if n := b.count(t, "SELECT df FROM knowledge_term_stats WHERE org_id = $1 AND field = 'b' AND term = 'cach'", b.other); n != 30 {
		t.Fatalf("org B's document frequency of 'cach' is %d, want 30", n)
	}
	if n := b.count(t, "SELECT df FROM knowledge_term_stats WHERE org_id = $1 AND field = 'b' AND term = 'cach'", b.org); n != 1 {
		t.Fatalf("org A's document frequency of 'cach' is %d, want 1", n)
	}
	// Org B's entries are never in org A's lists, nor the reverse.
	for _, id := range after {
		if id != x && id != y {
			t.Fatalf("org A's list holds %v", id)
		}
	}
	if got, _ := b.fullText(t, b.eve, q); len(got) != 30 || slices.Contains(got, x) || slices.Contains(got, y) {
		t.Fatalf("org B's list: %d hits, org A's entries in it: %v", len(got), slices.Contains(got, x) || slices.Contains(got, y))
	}
}

func TestSearchNonsenseQueryReturnsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seed(t, b)
	b.filler(t, b.alice, 30)
	b.embedPending(t)
	b.indexAll(t)
	for _, q := range []string{"qzxv frobnicate", "kqnk vnpbtk", "zzkq wvvx plom", "xylophone quasar"} {
		r := b.search(t, b.bob, knowledge.SearchInput{Query: q})
		if len(r.Hits) != 0 {
			t.Fatalf("%q: want no hits, got %+v", q, r.Hits)
		}
	}
	// The example: the relevant entry comes back, the unrelated one does not.
	vac := b.store(t, b.alice, "Postgres VACUUM stalls on long transactions",
		"Autovacuum cannot remove dead rows while a session sits idle in transaction; find it in pg_stat_activity.")
	redis := b.store(t, b.alice, "Redis eviction policy for the job queue", "Use noeviction so queued jobs are never dropped.")
	b.embedPending(t)
	b.indexAll(t)
	r := b.search(t, b.bob, knowledge.SearchInput{Query: "why does vacuum not clean up dead rows"})
	if len(r.Hits) == 0 || r.Hits[0].ID != vac || has(r.Hits, redis) != nil {
		t.Fatalf("want the VACUUM entry first and no Redis entry: %+v", r.Hits)
	}
}

// The same minScore means the same thing whatever the org's size: an entry
// answering the whole query scores about the same, at or above ScoreStrong,
// in a small org and in one thirty times larger; an entry sharing only the
// org's commonest word scores under ScoreWeak and a small fraction of that
// in both (what is left of it is the local embedder's cosine: it hashes
// words, so one shared word is similarity to it).
func TestSearchScoreIsCalibratedAcrossOrgSizes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var full, weak []float64
	for i, c := range []knowledge.Caller{b.alice, b.eve} {
		n := []int{5, 150}[i]
		for j := range n {
			b.store(t, c, fmt.Sprintf("Service note %d", j), fmt.Sprintf("The service restarted, run %d.", j))
		}
		f := b.store(t, c, "Disk full on the build runner", "The build runner's disk filled with docker layers; prune them nightly.")
		w := b.store(t, c, "Service note", "The service restarted once more.")
		b.embedPending(t)
		b.indexAll(t)
		zero := 0.0
		r := b.search(t, c, knowledge.SearchInput{Query: "build runner disk full service", MinScore: &zero})
		fh, wh := has(r.Hits, f), has(r.Hits, w)
		if fh == nil || wh == nil {
			t.Fatalf("org of %d: want both entries with minScore 0: %+v", n, r.Hits)
		}
		full, weak = append(full, fh.Score), append(weak, wh.Score)
		if fh.Score < knowledge.ScoreStrong || wh.Score >= knowledge.ScoreWeak || wh.Score > fh.Score/3 {
			t.Fatalf("org of %d: full match %v, common-word match %v", n, fh.Score, wh.Score)
		}
	}
	// The bands hold in both (above); the full match's score itself does
	// not move. The weak one's may, within its band: in the small org the
	// vector list has no crowd to measure the query's floor against
	// (rrf.go, vectorRefRank), and the local embedder sees one shared word.
	if math.Abs(full[0]-full[1]) > 0.1 {
		t.Fatalf("scores moved with the org's size: full %v, weak %v", full, weak)
	}
}

// bodyOf is entry i of writer w in the concurrency test: every fifth a
// body of several passages, so the passages' counts are checked too.
func bodyOf(i, w int) string {
	b := fmt.Sprintf("shared words and word%d and writer%d, repeated words words", i%7, w)
	if i%5 == 0 {
		b = strings.Repeat(b+" ", 3000/len(b)+i)
	}
	return b
}

// Concurrent stores and indexers of several orgs: every entry is indexed
// exactly once (each of its passages), and every statistic equals a
// recount of the index.
func TestIndexerConcurrentStatisticsEqualTheIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	for w, c := range []knowledge.Caller{b.alice, b.bob, b.eve} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if _, err := b.svc.Store(b.ctx, c, knowledge.StoreInput{
					Title: fmt.Sprintf("Entry %d of writer %d", i, w),
					Body:  bodyOf(i, w),
				}); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := maint(b.ops).IndexAll(b.ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	b.indexAll(t)
	if n := b.count(t, "SELECT count(*) FROM knowledge_index_queue"); n != 0 {
		t.Fatalf("%d entries left in the queue", n)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge k WHERE NOT EXISTS (
		SELECT 1 FROM knowledge_postings p WHERE p.org_id = k.org_id AND p.entry_id = k.id AND p.field = 'b')`); n != 0 {
		t.Fatalf("%d entries without postings", n)
	}
	if n := b.count(t, `SELECT count(*) FROM (
		SELECT org_id, field, term, entry_id, passage FROM knowledge_postings GROUP BY 1, 2, 3, 4, 5 HAVING count(*) > 1) d`); n != 0 {
		t.Fatalf("%d postings written twice", n)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_term_stats s FULL JOIN (
		SELECT org_id, field, term, count(DISTINCT entry_id) AS df FROM knowledge_postings GROUP BY 1, 2, 3) p
		USING (org_id, field, term) WHERE s.df IS DISTINCT FROM p.df`); n != 0 {
		t.Fatalf("%d document frequencies differ from a recount of the postings", n)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_search_stats s FULL JOIN (
		SELECT org_id, count(*) AS docs, sum(len) AS len_b
		FROM (SELECT org_id, entry_id, round(avg(len)) AS len
		      FROM (SELECT DISTINCT org_id, entry_id, passage, len FROM knowledge_postings WHERE field = 'b') x
		      GROUP BY org_id, entry_id) e GROUP BY org_id) p USING (org_id)
		WHERE s.docs IS DISTINCT FROM p.docs OR s.len_b IS DISTINCT FROM p.len_b::bigint`); n != 0 {
		t.Fatalf("%d orgs' counters differ from a recount of the postings", n)
	}
	// Postings never name an entry of another org.
	if n := b.count(t, `SELECT count(*) FROM knowledge_postings p
		WHERE NOT EXISTS (SELECT 1 FROM knowledge k WHERE k.org_id = p.org_id AND k.id = p.entry_id)`); n != 0 {
		t.Fatalf("%d postings name no entry of their org", n)
	}
}

func TestUpkeepVacuumsWhatIsDueOnce(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads the tables' own counters in pg_stat and expects Upkeep to name tables; on a cluster both are the shards' (TestClusterUpkeepPerShard)")
	b := setup(t)
	// With duplicate-check keys, as Store writes them: Upkeep's backfill
	// of missing keys rewrites rows after its vacuums, which a second pass
	// would rightly vacuum.
	if _, err := b.pool.Exec(b.ctx, `
		INSERT INTO knowledge (org_id, title, body, created_by_agent_id, similar_keys)
		SELECT $1, 'note ' || i, 'words of entry ' || i || ' and some more words', $2, ARRAY[i]::bigint[]
		FROM generate_series(1, 3000) i`, b.org, b.alice.AgentID); err != nil {
		t.Fatal(err)
	}
	b.indexAll(t)
	// Table counters reach pg_stat up to 10 s after the writing backends
	// go idle. Upkeep vacuums never-analyzed tables at once (from the
	// catalog), so counts arriving after its pass would make a second pass
	// vacuum again: every count first. Closing the pool's connections
	// flushes what each backend holds (the indexer's connections among
	// them); the counters are then read until they stop moving.
	b.pool.Reset()
	activity := func() string {
		var s string
		if err := b.pool.QueryRow(b.ctx, `SELECT string_agg(concat_ws(' ', relname, n_tup_ins, n_tup_upd, n_tup_del), ', ' ORDER BY relname)
			FROM pg_stat_user_tables`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	deadline := time.Now().Add(30 * time.Second)
	for last := ""; ; {
		time.Sleep(300 * time.Millisecond)
		now := activity()
		if now == last && b.count(t, `SELECT count(*) FROM pg_stat_user_tables s WHERE
			(s.relname = 'knowledge' AND s.n_tup_ins >= 3000)
			OR (s.relname = 'knowledge_postings' AND s.n_tup_ins = (SELECT count(*) FROM knowledge_postings))
			OR (s.relname = 'knowledge_index_queue' AND s.n_tup_del >= 3000)`) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("table counters never reached pg_stat")
		}
		last = now
	}
	var rep knowledge.UpkeepReport
	for range 50 {
		var err error
		if rep, err = maint(b.ops).Upkeep(b.ctx); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(rep.Vacuumed, "knowledge_postings") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Contains(rep.Vacuumed, "knowledge_postings") || !slices.Contains(rep.Vacuumed, "knowledge") {
		t.Fatalf("want knowledge and knowledge_postings vacuumed: %+v", rep)
	}
	if n := b.count(t, "SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'knowledge_postings' AND last_vacuum IS NOT NULL AND last_analyze IS NOT NULL"); n != 1 {
		t.Fatal("knowledge_postings was not vacuumed and analyzed")
	}
	rep, err := maint(b.ops).Upkeep(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rep.Vacuumed, "knowledge_postings") {
		t.Fatalf("nothing changed, yet postings vacuumed again: %+v", rep)
	}
}

// The change counters start at zero after a crash, a restore or a
// statistics reset; a bulk load nobody vacuumed is still vacuumed, judged
// from the catalog: first never analyzed, then grown since the last pass.
func TestUpkeepVacuumsWhatTheCountersForgot(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads the tables' own counters in pg_stat and expects Upkeep to name tables; on a cluster both are the shards' (TestClusterUpkeepPerShard)")
	b := setup(t)
	load := func(n int) {
		t.Helper()
		// One connection, its statistics flushed before the reset: counts
		// arriving after it (a backend flushes up to 10 s after going
		// idle) would make the test depend on timing.
		conn, err := b.pool.Acquire(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		// With duplicate-check keys, as Store writes them: Upkeep's
		// backfill of missing keys rewrites rows, which is not what this
		// test is about.
		if _, err := conn.Exec(b.ctx, `
			INSERT INTO knowledge (org_id, title, body, created_by_agent_id, similar_keys)
			SELECT $1, 'note ' || i, 'words of entry ' || i || ' and some more words ' || repeat('x', 400), $2, ARRAY[i]::bigint[]
			FROM generate_series(1, $3::int) i`, b.org, b.alice.AgentID, n); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(b.ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		b.indexAll(t)
		if _, err := b.pool.Exec(b.ctx, "SELECT pg_stat_reset()"); err != nil {
			t.Fatal(err)
		}
	}
	vacuumed := func(want bool) {
		t.Helper()
		rep, err := maint(b.ops).Upkeep(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(rep.Vacuumed, "knowledge"); got != want {
			t.Fatalf("knowledge vacuumed: %v, want %v (%+v)", got, want, rep)
		}
	}
	load(3000)
	// Upkeep's vector indexes come first, and CREATE INDEX records the
	// table's size in the catalog: the table is still never analyzed.
	if _, err := maint(b.ops).UpkeepVectorIndexes(b.ctx); err != nil {
		t.Fatal(err)
	}
	vacuumed(true) // never analyzed
	if n := b.count(t, "SELECT count(*) FROM pg_class WHERE relname = 'knowledge' AND reltuples >= 3000 AND relallvisible > 0"); n != 1 {
		t.Fatal("knowledge has no statistics and no visibility map after the pass")
	}
	vacuumed(false) // nothing new
	load(3000)
	vacuumed(true) // twice the pages it had at the last pass
	// Analyzed by someone else (an operator's ANALYZE records the size as
	// well), never vacuumed: the visibility map it recorded tells.
	load(3000)
	if _, err := b.pool.Exec(b.ctx, "ANALYZE knowledge"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, "SELECT pg_stat_reset()"); err != nil {
		t.Fatal(err)
	}
	vacuumed(true)
	vacuumed(false)
}

// One org whose batches fail does not stall the others: IndexAll indexes
// every other org and reports the failing one.
func TestIndexAllIsolatesAFailingOrg(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store(t, b.alice, "Broken org entry", "Its configuration is about to disappear.")
	b.indexAll(t)
	// The org's text search configuration disappears under it (a regconfig
	// value holds no dependency), so analysing its entries fails.
	for _, q := range []string{
		"CREATE TEXT SEARCH CONFIGURATION doomed (COPY = english)",
		"UPDATE knowledge_search_stats SET config = 'doomed' WHERE org_id = '" + b.org.String() + "'",
		"DROP TEXT SEARCH CONFIGURATION doomed",
	} {
		if _, err := b.pool.Exec(b.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	b.store(t, b.alice, "Another entry", "Queued in the broken org.")
	ok := b.store(t, b.eve, "Healthy org entry", "Indexed whatever happens next door.")
	n, err := maint(b.ops).IndexAll(b.ctx)
	if err == nil || !strings.Contains(err.Error(), b.org.String()) {
		t.Fatalf("want an error naming the failing org, got %v", err)
	}
	if n != 1 {
		t.Fatalf("indexed %d entries, want the healthy org's 1", n)
	}
	if got, _ := b.fullText(t, b.eve, "healthy"); !slices.Equal(got, []uuid.UUID{ok}) {
		t.Fatalf("the healthy org's entry is not indexed: %v", got)
	}
	if q := b.count(t, "SELECT count(*) FROM knowledge_index_queue WHERE org_id = $1", b.org); q != 1 {
		t.Fatalf("the failing org's entry must stay queued: %d", q)
	}
}

// IndexAll indexes everything queued before it, also what one round of
// batches cannot take: an org with more than a batch queued, and more orgs
// with queued entries than one read of the queue lists (it reads the queue
// again only then).
func TestIndexAllTakesEverythingQueuedBeforeIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	indexAll := func(orgs []uuid.UUID, queued int) {
		t.Helper()
		n, err := maint(b.ops).IndexAll(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n < queued {
			t.Fatalf("indexed %d entries, want at least the %d queued here", n, queued)
		}
		if q := b.count(t, "SELECT count(*) FROM knowledge_index_queue WHERE org_id = ANY($1)", orgs); q != 0 {
			t.Fatalf("%d entries left queued", q)
		}
	}
	for range knowledge.IndexBatchSize + 1 {
		testfactory.Entry(b.ctx, t, b.pool, &testfactory.EntryOpts{OrgID: b.org})
	}
	indexAll([]uuid.UUID{b.org}, knowledge.IndexBatchSize+1)
	var orgs []uuid.UUID
	for i := range 101 {
		org := b.mkOrg(t, fmt.Sprintf("queued-%d", i))
		testfactory.Entry(b.ctx, t, b.pool, &testfactory.EntryOpts{OrgID: org})
		orgs = append(orgs, org)
	}
	indexAll(orgs, len(orgs))
}

// A search runs its two ranking statements (the lexical lists, the vector
// list) at once on two connections on an idle pool, and one after the
// other otherwise (or with SerialSearch): the answers, and every list
// inside them, are the same either way, filters, entries not indexed yet
// and superseded entries included.
func TestSearchFanOutAnswersAsOneStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	serial := knowledge.New(b.pool, knowledge.Options{Testing: knowledge.TestingKnobs{SerialSearch: true}})
	// b.svc fans out: this test holds no other connection of its pool.
	if n := b.pool.Stat().MaxConns(); n < 2 {
		t.Fatalf("the test pool has %d connections: b.svc would not fan out", n)
	}
	b.filler(t, b.alice, 20)
	old := b.store(t, b.alice, "Postgres VACUUM stalls", "Autovacuum cannot remove dead rows while a long transaction is idle.", "postgres")
	b.store(t, b.alice, "Redis eviction policy", "The job queue lost keys under allkeys-lru.", "redis")
	b.store(t, b.alice, "vacuum tuning", "Lower autovacuum_vacuum_scale_factor on big tables.", "postgres")
	b.embedPending(t)
	b.indexAll(t)
	newer := b.store(t, b.alice, "Postgres VACUUM and idle transactions", "Kill idle-in-transaction sessions; then vacuum removes dead rows.", "postgres")
	if _, err := b.svc.Supersede(b.ctx, b.alice, old, newer); err != nil {
		t.Fatal(err)
	}
	b.store(t, b.alice, "Queued vacuum note", "Not indexed yet: vacuum found from the queue.")
	vectors := 0
	for _, in := range []knowledge.SearchInput{
		{Query: "why does vacuum not clean up dead rows"},
		{Query: "vacuum", Tags: []string{"postgres"}},
		{Query: "vacuum", IncludeSuperseded: true},
		{Query: "Redis eviction policy"},
		{Query: "qzxv frobnicate"},
	} {
		want, err := knowledge.SearchLists(b.ctx, serial, b.bob, in, 50)
		if err != nil {
			t.Fatal(err)
		}
		got, err := knowledge.SearchLists(b.ctx, b.svc, b.bob, in, 50)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
			t.Fatalf("%+v:\nfanned out %s\none statement %s", in, g, w)
		}
		vectors += len(want.Vector)
		if in.Query != "qzxv frobnicate" && len(want.Fused) == 0 {
			t.Fatalf("%+v: no hits: the comparison proves nothing", in)
		}
		sw, err := serial.Search(b.ctx, b.bob, in)
		if err != nil {
			t.Fatal(err)
		}
		gw := b.search(t, b.bob, in)
		if g, w := jsonOf(t, gw), jsonOf(t, sw); g != w {
			t.Fatalf("%+v: answers differ:\nfanned out %s\none statement %s", in, g, w)
		}
	}
	if vectors == 0 {
		t.Fatal("no vector list: the comparison left the vector run out")
	}
}

// A paragraph as query weighs each term by how often it holds it (BM25's
// query term frequency): the word its subject repeats outranks a rarer
// word it mentions once, and is looked up even when more than
// MaxQueryTerms words of the query are rarer still (words the org has
// never seen).
func TestFullTextQueryTermFrequencyWeighs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.filler(t, b.alice, 12)
	// "perovskite" is held by two entries, "zeolite" by one: by idf alone
	// the zeolite entry ranks first.
	film := b.store(t, b.alice, "Solar cell notes", "The perovskite film degraded under humidity.")
	batch := b.store(t, b.alice, "Lab batch", "A perovskite batch went to the lab.")
	zeolite := b.store(t, b.alice, "Catalyst notes", "The zeolite sample was calcined overnight.")
	b.indexAll(t)

	para := "Perovskite cells are cheap. Perovskite layers fail in the field, and perovskite " +
		"research should say why; a zeolite coating was tried once."
	for _, q := range []string{para, para + " " + unknownWords(knowledge.MaxQueryTerms+8)} {
		got, s := b.fullText(t, b.bob, q)
		if len(got) < 2 || !slices.Contains(got[:2], film) || !slices.Contains(got[:2], batch) {
			t.Fatalf("query of %d words: want the perovskite entries first, got %v (film %v, batch %v, zeolite %v: %v)",
				len(strings.Fields(q)), got, film, batch, zeolite, s)
		}
		r := b.search(t, b.bob, knowledge.SearchInput{Query: q})
		if len(r.Hits) == 0 || (r.Hits[0].ID != film && r.Hits[0].ID != batch) {
			t.Fatalf("query of %d words: search's first hit %v, want a perovskite entry", len(strings.Fields(q)), ids(r.Hits))
		}
	}
	// A question holding each word once ranks by idf, as before.
	if got, _ := b.fullText(t, b.bob, "perovskite or zeolite"); len(got) < 3 || got[0] != zeolite {
		t.Fatalf("question: want the rarer word's entry first, got %v (zeolite %v)", got, zeolite)
	}
}

// unknownWords is n distinct made-up words no entry holds, each rarer in
// any org than a word some entry holds.
func unknownWords(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("glim%c%cor", 'a'+i%26, 'a'+i/26)
	}
	return strings.Join(w, " ")
}
