package knowledge_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// Benchmarks of the knowledge module. Run them with
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 0 ./packages/knowledge/
//
// Environment (docs/benchmarks.md has the figures and the commands):
//
//   - KNOWLEDGE_BENCH_SIZES (default "10000,100000"): entry counts of the
//     searched ("big") org, one database each.
//   - KNOWLEDGE_BENCH_TABLE: total rows of the knowledge table, the other
//     rows spread over orgs of 10,000 entries (plus a small org holding 1% of
//     the table). Unset: a quarter of the size again over four orgs, plus the
//     1% org (10,000 -> 12,626 rows; 100,000 -> 126,262).
//   - KNOWLEDGE_BENCH_KEEP=1: keep the loaded database and log its name.
//   - KNOWLEDGE_BENCH_REUSE=<database>: search a database kept earlier
//     instead of loading one (one size only), with its functions brought up
//     to the migrations (refreshFunctions). Its state is what it is: a
//     database searched once has been through Upkeep.
//   - KNOWLEDGE_BENCH_SNAPSHOT=<database>: after the load and IndexAll,
//     before any search, copy the database (FILE_COPY, ~1 min per 15 GB):
//     the never-analyzed state can then be measured again from a copy of
//     the copy without reloading.
//   - KNOWLEDGE_BENCH_SAMPLES (default 300): timed searches per query mix,
//     after up to 20 warm-up searches (at most 20 s of them).
//   - KNOWLEDGE_BENCH_BUDGET (default 2m): a mix stops sampling when its
//     timed searches have taken this long (a slow case would otherwise take
//     hours); the "samples" metric says how many were taken.
//   - KNOWLEDGE_BENCH_EXPLAIN=1: log the plans, with actual times and
//     buffers (auto_explain), of two searches of each mix in each state: a
//     fixed one and the slowest of the run.
//   - KNOWLEDGE_BENCH_SERIAL=1: after Upkeep, also run each mix with
//     Options.Testing.SerialSearch (the two statements one after the other), right
//     after the default (fanned out on an idle pool), to compare them in one
//     run.
//
// The load is a bulk load as an operator would do it: COPY with the HNSW,
// title trigram and tags indexes dropped and rebuilt afterwards, then the
// product's own lexical indexer (Maintenance.IndexAll) over everything the
// insert trigger queued. Nothing is vacuumed or analyzed: search is measured
// first in that state (what production looks like after a bulk load), then
// after Maintenance.Upkeep. Vectors come from the local embedder over synthetic
// but varied text (topics of pseudo-words, three common real words, rare
// words). Each sub-benchmark runs a fixed number of samples and reports
// custom metrics; ns/op is the mean latency of one operation.

type benchEnv struct {
	sizes   []int
	table   int
	keep    bool
	reuse   string
	samples int
	budget  time.Duration
	explain bool
	// snapshot names a copy of the loaded database (see snapshot).
	snapshot string
	// serial also runs each mix with Options.Testing.SerialSearch (the statements
	// one after the other), alternating with the default, for comparison.
	serial bool
}

func readBenchEnv(b *testing.B) benchEnv {
	e := benchEnv{samples: 300, budget: 2 * time.Minute}
	v := os.Getenv("KNOWLEDGE_BENCH_SIZES")
	if v == "" {
		v = "10000,100000"
	}
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("KNOWLEDGE_BENCH_SIZES: %q is not a positive number", f)
		}
		e.sizes = append(e.sizes, n)
	}
	if v := os.Getenv("KNOWLEDGE_BENCH_TABLE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("KNOWLEDGE_BENCH_TABLE: %q is not a positive number", v)
		}
		e.table = n
	}
	if v := os.Getenv("KNOWLEDGE_BENCH_SAMPLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("KNOWLEDGE_BENCH_SAMPLES: %q is not a positive number", v)
		}
		e.samples = n
	}
	if v := os.Getenv("KNOWLEDGE_BENCH_BUDGET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("KNOWLEDGE_BENCH_BUDGET: %q is not a positive duration", v)
		}
		e.budget = d
	}
	e.keep = os.Getenv("KNOWLEDGE_BENCH_KEEP") == "1"
	e.explain = os.Getenv("KNOWLEDGE_BENCH_EXPLAIN") == "1"
	e.reuse = os.Getenv("KNOWLEDGE_BENCH_REUSE")
	e.snapshot = os.Getenv("KNOWLEDGE_BENCH_SNAPSHOT")
	e.serial = os.Getenv("KNOWLEDGE_BENCH_SERIAL") == "1"
	if e.snapshot != "" && (e.reuse != "" || len(e.sizes) != 1) {
		b.Fatal("KNOWLEDGE_BENCH_SNAPSHOT: copies a database this run loads, of one size")
	}
	if e.reuse != "" && len(e.sizes) != 1 {
		b.Fatalf("KNOWLEDGE_BENCH_REUSE=%s: set KNOWLEDGE_BENCH_SIZES to the one size that database holds", e.reuse)
	}
	return e
}

// textGen makes deterministic synthetic text: 300 topics of 12 pseudo-words
// each, over a general vocabulary of 3000 pseudo-words.
type textGen struct {
	topics  [][]string
	general []string
}

var syllables = []string{"ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "vu", "de", "ga", "fi", "zo", "be", "ly", "qu", "ra", "te", "xo", "wa"}

func newTextGen() *textGen {
	rng := mrand.New(mrand.NewPCG(1, 2))
	word := func() string {
		n := 2 + rng.IntN(3)
		var sb strings.Builder
		for range n {
			sb.WriteString(syllables[rng.IntN(len(syllables))])
		}
		return sb.String()
	}
	g := &textGen{}
	for range 3000 {
		g.general = append(g.general, word())
	}
	for range 300 {
		t := make([]string, 12)
		for i := range t {
			t[i] = word()
		}
		g.topics = append(g.topics, t)
	}
	return g
}

func (g *textGen) words(rng *mrand.Rand, topic, n int, topical float64) string {
	w := make([]string, n)
	for i := range w {
		if rng.Float64() < topical {
			w[i] = g.topics[topic][rng.IntN(12)]
		} else {
			w[i] = g.general[rng.IntN(len(g.general))]
		}
	}
	return strings.Join(w, " ")
}

func (g *textGen) entry(rng *mrand.Rand) (title, body string, tags []string) {
	topic := rng.IntN(len(g.topics))
	title = g.words(rng, topic, 4+rng.IntN(5), 0.7)
	body = g.words(rng, topic, 30+rng.IntN(40), 0.5)
	tags = []string{"topic-" + strconv.Itoa(topic%50), "kind-" + strconv.Itoa(rng.IntN(5))}
	return
}

// commonWords are real words spread over the corpus with fixed shares of
// the entries (decided by a separate RNG, so the topical text above does not
// change): what a common word ("service", "error") looks like to the lexical
// lists of a large org. Bodies get the word; titles get it a fifth as often.
var commonWords = []struct {
	word  string
	share float64
}{{"service", 0.50}, {"config", 0.25}, {"error", 0.10}}

// rareWord is the k-th rare word: "qx" (no syllable of the pseudo-words)
// and k in syllables, so it is a word of its own.
func rareWord(k int) string {
	var sb strings.Builder
	sb.WriteString("qx")
	for {
		sb.WriteString(syllables[k%len(syllables)])
		k /= len(syllables)
		if k == 0 {
			return sb.String()
		}
	}
}

// rareVocabulary is how many rare words an org of n entries draws from: each
// entry's body gets one, so a rare word is held by about four entries of
// the org (Poisson, mean 4).
func rareVocabulary(n int) int { return max(1, n/4) }

// decorate adds the common words and one rare word to one entry.
func decorate(rng *mrand.Rand, orgSize int, title, body string) (string, string) {
	for _, c := range commonWords {
		if rng.Float64() < c.share {
			body += " " + c.word
			if rng.Float64() < 0.2 {
				title += " " + c.word
			}
		}
	}
	body += " " + rareWord(rng.IntN(rareVocabulary(orgSize)))
	return title, body
}

// The query mixes. Each is a generator of queries over the big org.

// query is a topical query: 2-4 words, mostly of one topic.
func (g *textGen) query(rng *mrand.Rand) string {
	return g.words(rng, rng.IntN(len(g.topics)), 2+rng.IntN(3), 0.9)
}

// commonQuery is a query made of common words, alone or with topical words:
// each matches 2.5% to 50% of the org in the full-text list, and the
// one-word ones 5% to 10% of the titles; "ka" is a syllable of most
// pseudo-words (a short query: trigram indexes need 3 characters).
func (g *textGen) commonQuery(rng *mrand.Rand) string {
	switch rng.IntN(6) {
	case 0:
		return "service"
	case 1:
		return "config"
	case 2:
		return "service config"
	case 3:
		return "error " + g.words(rng, rng.IntN(len(g.topics)), 1, 0)
	case 4:
		return "ka"
	default:
		return "config " + g.words(rng, rng.IntN(len(g.topics)), 1, 1)
	}
}

// rareQuery is a rare word of the org (held by about four of its entries),
// alone or with a topical word.
func (g *textGen) rareQuery(rng *mrand.Rand, orgSize int) string {
	w := rareWord(rng.IntN(rareVocabulary(orgSize)))
	if rng.IntN(2) == 0 {
		return w
	}
	return w + " " + g.words(rng, rng.IntN(len(g.topics)), 1, 1)
}

var (
	questionStarts = [][]string{
		{"how", "do", "i"}, {"what", "is", "the"}, {"why", "does", "the"}, {"where", "can", "i", "find", "the"},
		{"how", "to"}, {"what", "happens", "when", "the"}, {"is", "there", "a", "way", "to"}, {"which"},
	}
	questionFillers = []string{"a", "the", "of", "in", "for", "with", "when", "to", "and", "on", "my", "it", "is", "after", "from"}
)

// question is a natural-language question of 6 to 12 words: a question
// opening, stop words, usually one common word and 2-4 topical words, in
// a shuffled middle ("how do i kalomi the service for rutafi when ...").
func (g *textGen) question(rng *mrand.Rand) string {
	n := 6 + rng.IntN(7)
	w := slices.Clone(questionStarts[rng.IntN(len(questionStarts))])
	topic := rng.IntN(len(g.topics))
	var mid []string
	for range 2 + rng.IntN(3) {
		mid = append(mid, g.topics[topic][rng.IntN(12)])
	}
	if rng.Float64() < 0.7 {
		mid = append(mid, commonWords[rng.IntN(len(commonWords))].word)
	}
	for len(w)+len(mid) < n {
		mid = append(mid, questionFillers[rng.IntN(len(questionFillers))])
	}
	rng.Shuffle(len(mid), func(i, j int) { mid[i], mid[j] = mid[j], mid[i] })
	return strings.Join(append(w, mid...), " ")
}

type queryMix struct {
	name string
	gen  func(*mrand.Rand) string
}

func (bd *benchDB) mixes() []queryMix {
	return []queryMix{
		{"topical", bd.gen.query},
		{"common", bd.gen.commonQuery},
		{"rare", func(rng *mrand.Rand) string { return bd.gen.rareQuery(rng, bd.n) }},
		{"question", bd.gen.question},
	}
}

type benchDB struct {
	name              string
	pool              *pgxpool.Pool
	svc               *knowledge.Service
	big, small        knowledge.Caller
	n                 int // entries of the big org
	total, smallCount int
	gen               *textGen
	exact             [][]uuid.UUID      // exact top 10 of the recall queries, by query
	explain           *knowledge.Service // on a pool with auto_explain (explainSearch)
	notices           []string
}

// benchDatabase makes a fresh migrated database (dropped at the end unless
// keep), or opens the kept database reuse.
func benchDatabase(b *testing.B, reuse string, keep bool) (string, *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	urlOf := func(name string) string { return benchURL(b, name) }
	if reuse != "" {
		pool, err := db.Open(ctx, urlOf(reuse))
		if err != nil {
			b.Fatalf("KNOWLEDGE_BENCH_REUSE=%s: %v", reuse, err)
		}
		b.Cleanup(pool.Close)
		refreshFunctions(b, pool)
		return reuse, pool
	}
	admin, err := pgx.Connect(ctx, testenv.DatabaseURL())
	if err != nil {
		b.Fatalf("cannot reach PostgreSQL at %s (run `go tool task setup`): %v", testenv.DatabaseURL(), err)
	}
	defer admin.Close(ctx)
	rb := make([]byte, 6)
	if _, err := rand.Read(rb); err != nil {
		b.Fatal(err)
	}
	name := "knowledge_bench_" + hex.EncodeToString(rb)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	pool, err := db.Open(ctx, urlOf(name))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	pool.Close()
	// Reopen: the vector type is registered on connections made after the
	// migration created it.
	if pool, err = db.Open(ctx, urlOf(name)); err != nil {
		b.Fatal(err)
	}
	if keep {
		logf("KNOWLEDGE_BENCH_KEEP: database %s is kept (KNOWLEDGE_BENCH_REUSE=%s to search it again; DROP DATABASE %s when done)", name, name, name)
		b.Cleanup(pool.Close)
		return name, pool
	}
	b.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		admin, err := pgx.Connect(ctx, testenv.DatabaseURL())
		if err != nil {
			logf("drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			logf("drop %s: %v", name, err)
		}
	})
	return name, pool
}

// benchURL is the URL of database name on the test server.
func benchURL(b *testing.B, name string) string {
	u, err := url.Parse(testenv.DatabaseURL())
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// snapshot copies the loaded database, before anything searched or
// maintained it, to a database named name: a later run can measure that
// state again (KNOWLEDGE_BENCH_REUSE=name, or a copy of it) without a
// reload. The copy keeps the tables, indexes and planner state (none); the
// server's activity counters are not copied, so Upkeep on a copy goes by
// the catalog alone (maintenance/upkeep.go, unseen), as after a restore.
func snapshot(b *testing.B, bd *benchDB, name string) {
	ctx := context.Background()
	bd.pool.Close()
	admin, err := pgx.Connect(ctx, testenv.DatabaseURL())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	t0 := time.Now()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+
		pgx.Identifier{bd.name}.Sanitize()+" STRATEGY = FILE_COPY"); err != nil {
		b.Fatalf("KNOWLEDGE_BENCH_SNAPSHOT=%s: %v", name, err)
	}
	logf("KNOWLEDGE_BENCH_SNAPSHOT: copied the loaded database to %s in %v (CREATE DATABASE x TEMPLATE %s to measure it again)",
		name, time.Since(t0).Round(time.Second), name)
	if bd.pool, err = db.Open(ctx, benchURL(b, bd.name)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bd.pool.Close)
	bd.svc = knowledge.New(bd.pool, knowledge.Options{})
}

// refreshFunctions brings the functions of a kept database up to the
// migrations as they are now: while the module is unreleased its migrations
// are edited in place, and reloading a million rows for a changed search
// function is an hour. Every CREATE FUNCTION of the migrations' Up sections
// is run as CREATE OR REPLACE FUNCTION. Tables and indexes are not
// touched: a changed table (or a changed analysis, which the postings were
// built with) needs a fresh load.
func refreshFunctions(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	files, err := fs.Glob(db.Migrations(), "*.sql")
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(files)
	n := 0
	for _, f := range files {
		src, err := fs.ReadFile(db.Migrations(), f)
		if err != nil {
			b.Fatal(err)
		}
		up, _, _ := strings.Cut(string(src), "-- +goose Down")
		for _, block := range strings.Split(up, "-- +goose StatementBegin")[1:] {
			block, _, _ = strings.Cut(block, "-- +goose StatementEnd")
			// A later migration's CREATE OR REPLACE FUNCTION (00013's
			// knowledge_terms) replaces an earlier one's, in file order.
			if !strings.Contains(block, "CREATE FUNCTION") && !strings.Contains(block, "CREATE OR REPLACE FUNCTION") {
				continue
			}
			if _, err := pool.Exec(context.Background(), strings.ReplaceAll(block, "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")); err != nil {
				b.Fatalf("KNOWLEDGE_BENCH_REUSE: refreshing the functions of %s: %v (load a fresh database)", f, err)
			}
			n += strings.Count(block, "CREATE FUNCTION") + strings.Count(block, "CREATE OR REPLACE FUNCTION")
		}
	}
	logf("refreshed %d functions from the migrations", n)
}

// loadBench fills a fresh database: n entries in the big org, the other
// orgs (see the package comment) and 1% of the table in the small org, then
// builds the indexes and runs the lexical indexer. With reuse, it finds the
// orgs of a kept database instead.
func loadBench(b *testing.B, e benchEnv, n int) *benchDB {
	b.Helper()
	ctx := context.Background()
	name, pool := benchDatabase(b, e.reuse, e.keep)
	bd := &benchDB{name: name, pool: pool, gen: newTextGen(), n: n, svc: knowledge.New(pool, knowledge.Options{})}
	if e.reuse != "" {
		caller := func(org string) (knowledge.Caller, int) {
			var c knowledge.Caller
			var cnt int
			if err := pool.QueryRow(ctx, `SELECT o.id, a.id, (SELECT count(*) FROM knowledge k WHERE k.org_id = o.id)
				FROM orgs o JOIN agents a ON a.org_id = o.id WHERE o.name = $1`, org).Scan(&c.OrgID, &c.AgentID, &cnt); err != nil {
				b.Fatalf("KNOWLEDGE_BENCH_REUSE=%s: org %q: %v", name, org, err)
			}
			return c, cnt
		}
		var big int
		bd.big, big = caller("big")
		bd.small, bd.smallCount = caller("small")
		if big != n {
			b.Fatalf("KNOWLEDGE_BENCH_REUSE=%s holds a big org of %d entries, KNOWLEDGE_BENCH_SIZES says %d", name, big, n)
		}
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&bd.total); err != nil {
			b.Fatal(err)
		}
		logf("reusing %s: %d entries (big org %d, small org %d)", name, bd.total, n, bd.smallCount)
		return bd
	}

	mkOrg := func(name string) (uuid.UUID, uuid.UUID) {
		org := testfactory.Org(ctx, b, pool, &testfactory.OrgOpts{Name: name})
		return org.ID, testfactory.Agent(ctx, b, pool, &testfactory.AgentOpts{OrgID: org.ID, Name: "bench"}).ID
	}
	type part struct {
		org, agent uuid.UUID
		n          int
	}
	var parts []part
	o, a := mkOrg("big")
	bd.big = knowledge.Caller{OrgID: o, AgentID: a}
	parts = append(parts, part{o, a, n})
	var others []int
	if e.table == 0 {
		for range 4 {
			others = append(others, n/16)
		}
		bd.smallCount = max(10, (n+n/4)/99) // 1% of the whole table
	} else {
		bd.smallCount = max(10, e.table/100)
		rest := e.table - n - bd.smallCount
		if rest < 0 {
			b.Fatalf("KNOWLEDGE_BENCH_TABLE=%d is smaller than the big org (%d) and the 1%% org (%d)", e.table, n, bd.smallCount)
		}
		for ; rest > 0; rest -= 10000 {
			others = append(others, min(rest, 10000))
		}
	}
	for i, m := range others {
		o, a := mkOrg("other-" + strconv.Itoa(i))
		parts = append(parts, part{o, a, m})
	}
	o, a = mkOrg("small")
	bd.small = knowledge.Caller{OrgID: o, AgentID: a}
	parts = append(parts, part{o, a, bd.smallCount})

	// The HNSW and GIN indexes of the table (whatever the migrations
	// define) are dropped before the COPY and rebuilt after it from their
	// definitions, as a bulk load does; the btrees stay (the queue's
	// foreign key needs the primary key).
	rows, err := pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'knowledge' AND indexdef ~ ' USING (hnsw|gin) '
		ORDER BY indexname`)
	if err != nil {
		b.Fatal(err)
	}
	type indexDef struct{ name, def string }
	bulk, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (indexDef, error) {
		var d indexDef
		return d, r.Scan(&d.name, &d.def)
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, ix := range bulk {
		if _, err := pool.Exec(ctx, "DROP INDEX "+pgx.Identifier{ix.name}.Sanitize()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	local := embed.NewLocal()
	now := time.Now()
	const chunk = 50000 // rows per COPY, to bound memory
	for pi, p := range parts {
		for lo := 0; lo < p.n; lo += chunk {
			hi := min(p.n, lo+chunk)
			rows := make([][]any, hi-lo)
			var wg sync.WaitGroup
			const workers = 2
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// One RNG per (org, worker, chunk): the text of an org
					// does not depend on the table around it.
					rng := mrand.New(mrand.NewPCG(uint64(pi), uint64(w)+uint64(lo)*1000))
					crng := mrand.New(mrand.NewPCG(uint64(pi), uint64(w)+100+uint64(lo)*1000))
					for i := lo + w; i < hi; i += workers {
						title, body, tags := bd.gen.entry(rng)
						title, body = decorate(crng, p.n, title, body)
						vs, _ := local.Embed(ctx, []string{title + "\n" + body})
						rows[i-lo] = []any{p.org, uuid.New(), title, body, tags, int16(80), "agent", p.agent,
							pgvector.NewVector(vs[0]), "ready", local.Model(), now,
							now.Add(-time.Duration(p.n-i) * time.Second), // one entry a second
							benchMetadata(i)}
					}
				}()
			}
			wg.Wait()
			_, err := pool.CopyFrom(ctx, pgx.Identifier{"knowledge"},
				[]string{"org_id", "id", "title", "body", "tags", "confidence", "origin", "created_by_agent_id",
					"embedding", "embedding_status", "embedding_model", "embedded_at", "created_at", "metadata"},
				pgx.CopyFromRows(rows))
			if err != nil {
				b.Fatal(err)
			}
			bd.total += len(rows)
		}
	}
	loaded := time.Since(start)
	logf("loaded %d entries in %d orgs (big org %d, small org %d) by COPY in %v (the trigger queued each for the indexer)",
		bd.total, len(parts), n, bd.smallCount, loaded.Round(time.Millisecond))

	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []string{"SET maintenance_work_mem = '6GB'", "SET max_parallel_maintenance_workers = 1"} {
		if _, err := conn.Exec(ctx, s); err != nil {
			b.Fatalf("%s: %v", s, err)
		}
	}
	for _, ix := range bulk {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, ix.def); err != nil {
			b.Fatalf("%s: %v", ix.def, err)
		}
		logf("index %s built in %v", ix.name, time.Since(t0).Round(time.Millisecond))
	}
	// The model's vector indexes, as the worker builds them at start.
	t1 := time.Now()
	if _, err := maint(bd.svc).EnsureVectorIndex(ctx); err != nil {
		b.Fatal(err)
	}
	logf("vector indexes of the model built in %v", time.Since(t1).Round(time.Millisecond))
	// CREATE INDEX counted the table's rows into pg_class; a table filled by
	// inserts (Store, or a COPY into the indexed table) has never been
	// counted. Put back that state: no planner statistics of any kind.
	if _, err := conn.Exec(ctx, "UPDATE pg_class SET reltuples = -1, relpages = 0, relallvisible = 0 WHERE oid = 'knowledge'::regclass"); err != nil {
		logf("could not reset the table's row count (not a superuser?): %v", err)
	}
	conn.Release()

	t0 := time.Now()
	indexed, err := maint(bd.svc).IndexAll(ctx)
	if err != nil {
		b.Fatal(err)
	}
	el := time.Since(t0)
	logf("Maintenance.IndexAll indexed %d entries in %v: %.0f entries/s", indexed, el.Round(time.Millisecond), float64(indexed)/el.Seconds())
	logTables(b, bd)
	if e.snapshot != "" {
		snapshot(b, bd, e.snapshot)
	}
	return bd
}

// logTables logs the size and maintenance state of the module's tables.
func logTables(b *testing.B, bd *benchDB) {
	b.Helper()
	rows, err := bd.pool.Query(context.Background(), `
		SELECT c.relname, c.reltuples::bigint, s.n_live_tup, s.n_dead_tup,
		       pg_size_pretty(pg_table_size(c.oid)), pg_size_pretty(pg_indexes_size(c.oid)),
		       coalesce(s.last_analyze, s.last_autoanalyze) IS NOT NULL,
		       coalesce(s.last_vacuum, s.last_autovacuum) IS NOT NULL,
		       c.relallvisible, c.relpages
		FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
		WHERE c.relname IN ('knowledge', 'knowledge_postings', 'knowledge_term_stats', 'knowledge_search_stats', 'knowledge_index_queue')
		ORDER BY c.relname`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, size, isize string
		var reltuples, live, dead int64
		var analyzed, vacuumed bool
		var allVisible, pages int32
		if err := rows.Scan(&name, &reltuples, &live, &dead, &size, &isize, &analyzed, &vacuumed, &allVisible, &pages); err != nil {
			b.Fatal(err)
		}
		logf("table %-22s live %9d dead %8d heap %8s indexes %8s | analyzed %-5v vacuumed %-5v reltuples %d all-visible %d/%d pages",
			name, live, dead, size, isize, analyzed, vacuumed, reltuples, allVisible, pages)
	}
}

// analyzed says whether any table search reads has planner statistics.
func (bd *benchDB) analyzed(b *testing.B) bool {
	var n int
	if err := bd.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_user_tables
		WHERE coalesce(last_analyze, last_autoanalyze) IS NOT NULL
		  AND relname IN ('knowledge', 'knowledge_postings', 'knowledge_term_stats', 'knowledge_index_queue')`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n > 0
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(sum)/float64(len(lat)), "ns/op")
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.95)), "p95-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// logf prints at once, to standard output: a benchmark's own log is cut to
// ten lines, and a parent benchmark's is not printed at all.
func logf(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// BenchmarkStore measures stores per second: one client, eight clients in
// one org (they queue on the org's quota row), eight clients in eight orgs;
// then how fast the lexical indexer (Maintenance.IndexAll) indexes what they
// queued, the work a store leaves for the worker.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	db := testenv.Postgres(b)
	svc := knowledge.New(db.Pool, knowledge.Options{})
	gen := newTextGen()
	var callers []knowledge.Caller
	for range 8 {
		a := testfactory.Agent(ctx, b, db.Pool, nil)
		callers = append(callers, knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID})
	}
	const stores = 1500
	for _, tc := range []struct {
		name    string
		clients int
		orgs    int
	}{{"clients=1", 1, 1}, {"clients=8/one-org", 8, 1}, {"clients=8/8-orgs", 8, 8}} {
		b.Run(tc.name, func(b *testing.B) {
			var wg sync.WaitGroup
			start := time.Now()
			for w := range tc.clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := mrand.New(mrand.NewPCG(uint64(w), 7))
					c := callers[w%tc.orgs]
					for range stores / tc.clients {
						title, body, tags := gen.entry(rng)
						if _, err := svc.Store(ctx, c, knowledge.StoreInput{Title: title, Body: body, Tags: tags}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.ReportMetric(float64(el)/stores, "ns/op")
			b.ReportMetric(stores/el.Seconds(), "stores/s")
		})
	}
	b.Run("index-queued", func(b *testing.B) {
		start := time.Now()
		n, err := maint(svc).IndexAll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		if n == 0 {
			b.Skip("nothing queued: the stores above were indexed by an earlier run of this case (-count)")
		}
		b.ReportMetric(float64(el)/float64(n), "ns/op")
		b.ReportMetric(float64(n)/el.Seconds(), "entries/s")
	})
}

// BenchmarkSearch measures Search latency in the big org per query mix,
// first on the never-analyzed, never-vacuumed tables of the load, then
// with the big org's own vector index (Upkeep's first step, when it has
// one to build) on the same tables, then after Maintenance.Upkeep, and the
// recall@10 of the vector list's HNSW plan in the big org against exact
// search.
func BenchmarkSearch(b *testing.B) {
	e := readBenchEnv(b)
	for _, n := range e.sizes {
		bd := loadBench(b, e, n)
		ctx := context.Background()
		if e.explain {
			bd.explain = explainService(b, bd)
		}
		logTermStats(b, bd)
		prefix := fmt.Sprintf("n=%d/table=%d", n, bd.total)
		state := "never-analyzed"
		if bd.analyzed(b) {
			state = "analyzed"
		}
		mixes := func(state string) {
			b.Run(fmt.Sprintf("search/%s/%s/first", prefix, state), func(b *testing.B) {
				firstSearches(b, bd, e)
			})
			for _, m := range bd.mixes() {
				b.Run(fmt.Sprintf("search/%s/%s/%s", prefix, state, m.name), func(b *testing.B) {
					searchMix(b, bd, m, e)
				})
			}
		}
		mixes(state)
		if state == "never-analyzed" {
			// Upkeep's first step alone (the org's vector index): the
			// tables stay unvacuumed and without statistics, as they are
			// while the rest of the first Upkeep after a bulk load runs.
			t0 := time.Now()
			rep, err := maint(bd.svc).UpkeepVectorIndexes(ctx)
			if err != nil {
				b.Fatal(err)
			}
			logf("Maintenance.UpkeepVectorIndexes in %v: built %v, dropped %v", time.Since(t0).Round(time.Millisecond), rep.Built, rep.Dropped)
			if len(rep.Built) > 0 {
				mixes("never-analyzed-own-index")
			}
		}
		t0 := time.Now()
		rep, err := maint(bd.svc).Upkeep(ctx)
		if err != nil {
			b.Fatal(err)
		}
		logf("Maintenance.Upkeep in %v: vacuumed %v, analyzed %v, built %v, dropped %v",
			time.Since(t0).Round(time.Millisecond), rep.Vacuumed, rep.Analyzed, rep.Built, rep.Dropped)
		logTables(b, bd)
		serial := *bd
		serial.svc = knowledge.New(bd.pool, knowledge.Options{Testing: knowledge.TestingKnobs{SerialSearch: true}})
		b.Run(fmt.Sprintf("search/%s/after-upkeep/first", prefix), func(b *testing.B) {
			firstSearches(b, bd, e)
		})
		for _, m := range bd.mixes() {
			b.Run(fmt.Sprintf("search/%s/after-upkeep/%s", prefix, m.name), func(b *testing.B) {
				searchMix(b, bd, m, e)
			})
			if e.serial {
				b.Run(fmt.Sprintf("search/%s/after-upkeep/serial/%s", prefix, m.name), func(b *testing.B) {
					searchMix(b, &serial, m, e)
				})
			}
		}
		for _, ef := range []int{40, 64, 200} {
			b.Run(fmt.Sprintf("recall/%s/big-org/ef=%d", prefix, ef), func(b *testing.B) {
				recall, lat := measureRecall(b, bd, ef)
				reportLatencies(b, lat)
				b.ReportMetric(recall, "recall@10")
			})
		}
	}
}

// firstSearches measures a state's first searches, the mixes taken in
// turn, before any mix is measured on its own. A state begins after a bulk
// load, an index build or a vacuum, each of which leaves the cache cold
// (at 1M rows the database is 17 GB and shared_buffers 128 MB); the first
// mix measured after it used to take that cost alone, which made topical,
// always first, look 1.5-3x slower than the others (docs/benchmarks.md,
// "Method"). Reported on its own, it is what the first
// minute after such a step costs; the mixes after it measure the state.
func firstSearches(b *testing.B, bd *benchDB, e benchEnv) {
	ms := bd.mixes()
	rng := mrand.New(mrand.NewPCG(11, 11))
	i := 0
	t := timeSearches(b, bd, min(e.samples, firstSearchesMax), firstSearchesBudget, func() string {
		i++
		return ms[(i-1)%len(ms)].gen(rng)
	})
	reportLatencies(b, t.lat)
	b.ReportMetric(float64(len(t.lat)), "samples")
}

// timed is what timeSearches measured.
type timed struct {
	lat      []time.Duration
	hits     int
	slowest  string
	slowestT time.Duration
	// outOfBudget: the searches stopped at the budget, before n.
	outOfBudget bool
}

// timeSearches runs up to n searches of next's queries in the big org, one
// after the other, until they have taken budget.
func timeSearches(b *testing.B, bd *benchDB, n int, budget time.Duration, next func() string) timed {
	ctx := context.Background()
	t := timed{lat: make([]time.Duration, 0, n)}
	var spent time.Duration
	for range n {
		if spent > budget {
			t.outOfBudget = true
			break
		}
		q := next()
		t0 := time.Now()
		r, err := bd.svc.Search(ctx, bd.big, knowledge.SearchInput{Query: q})
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		t.lat = append(t.lat, d)
		spent += d
		if d > t.slowestT {
			t.slowest, t.slowestT = q, d
		}
		t.hits += len(r.Hits)
	}
	return t
}

// A state's first searches: at most this many, for at most this long.
const (
	firstSearchesMax    = 100
	firstSearchesBudget = 30 * time.Second
)

// searchMix runs e.samples searches of one mix in the big org, after 20
// untimed warm-up searches, sequentially; the time includes the query
// embedding and the snippets.
func searchMix(b *testing.B, bd *benchDB, m queryMix, e benchEnv) {
	ctx := context.Background()
	rng := mrand.New(mrand.NewPCG(9, uint64(len(m.name))))
	warm := time.Now()
	for range 20 {
		if _, err := bd.svc.Search(ctx, bd.big, knowledge.SearchInput{Query: m.gen(rng)}); err != nil {
			b.Fatal(err)
		}
		if time.Since(warm) > 20*time.Second {
			break
		}
	}
	load := loadAvg()
	t := timeSearches(b, bd, e.samples, e.budget, func() string { return m.gen(rng) })
	if t.outOfBudget {
		logf("%s: budget of %v spent after %d searches", b.Name(), e.budget, len(t.lat))
	}
	logf("load average %s -> %s; slowest query %q (%v)", load, loadAvg(), t.slowest, t.slowestT.Round(time.Microsecond))
	reportLatencies(b, t.lat)
	b.ReportMetric(float64(t.hits)/float64(len(t.lat)), "hits/query")
	b.ReportMetric(float64(len(t.lat)), "samples")
	if e.explain {
		explainSearch(b, bd, m.gen(mrand.New(mrand.NewPCG(3, 3))))
		explainSearch(b, bd, t.slowest)
	}
}

// logTermStats logs the document frequencies (knowledge_term_stats) of the
// terms of a few queries in the big org: how many entries each list has to
// choose from.
func logTermStats(b *testing.B, bd *benchDB) {
	rng := mrand.New(mrand.NewPCG(4, 4))
	for _, q := range []string{"service", "service config", "error", bd.gen.rareQuery(rng, bd.n), bd.gen.query(rng), bd.gen.question(rng)} {
		rows, err := bd.pool.Query(context.Background(), `
			SELECT q.term, coalesce(b.df, 0), coalesce(t.df, 0)
			FROM (SELECT DISTINCT term FROM knowledge_terms('english', '', $2) WHERE field = 'b') q
			LEFT JOIN knowledge_term_stats b ON b.org_id = $1 AND b.field = 'b' AND b.term = q.term
			LEFT JOIN knowledge_term_stats t ON t.org_id = $1 AND t.field = 't' AND t.term = q.term
			ORDER BY q.term`, bd.big.OrgID, q)
		if err != nil {
			b.Fatal(err)
		}
		var parts []string
		for rows.Next() {
			var term string
			var dfb, dft int
			if err := rows.Scan(&term, &dfb, &dft); err != nil {
				b.Fatal(err)
			}
			parts = append(parts, fmt.Sprintf("%s: %d bodies, %d titles", term, dfb, dft))
		}
		rows.Close()
		var titles int
		if err := bd.pool.QueryRow(context.Background(), "SELECT count(*) FROM knowledge WHERE org_id = $1 AND title ILIKE $2",
			bd.big.OrgID, knowledge.LikePattern(q)).Scan(&titles); err != nil {
			b.Fatal(err)
		}
		logf("query %q (of %d entries): %s; %d titles contain it", q, bd.n, strings.Join(parts, "; "), titles)
	}
}

// explainService is a Service on a pool of its own that loads auto_explain
// (a superuser's LOAD) and turns the plans into notices, kept in bd.notices.
// The pool lives as long as b.
func explainService(b *testing.B, bd *benchDB) *knowledge.Service {
	cfg, err := pgxpool.ParseConfig(bd.pool.Config().ConnString())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		bd.notices = append(bd.notices, n.Message)
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		for _, s := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
			"SET auto_explain.log_analyze = on", "SET auto_explain.log_buffers = on",
			"SET auto_explain.log_nested_statements = on", "SET auto_explain.log_level = notice"} {
			if _, err := conn.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return pgxvec.RegisterTypes(ctx, conn)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return knowledge.New(pool, knowledge.Options{})
}

// explainSearch logs the plans of one Search, with EXPLAIN ANALYZE's
// actual times and buffers, as auto_explain writes them: the statements the
// product sends, with its settings and arguments, and the statements inside
// the functions they call (log_nested_statements); see explainService.
func explainSearch(b *testing.B, bd *benchDB, q string) {
	ctx := context.Background()
	bd.notices = nil
	if _, err := bd.explain.Search(ctx, bd.big, knowledge.SearchInput{Query: q}); err != nil {
		b.Fatalf("explain %q: %v", q, err)
	}
	var out []string
	for _, n := range bd.notices {
		out = append(out, shortPlan(n))
	}
	logf("auto_explain of the search of %q:\n%s", q, strings.Join(out, "\n"))
}

// shortPlan is one auto_explain notice with its query text cut to its
// first line of SQL.
func shortPlan(notice string) string {
	lines := strings.Split(notice, "\n")
	var out []string
	inText, named := false, false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "Query Text: "):
			inText = true
			l = strings.TrimPrefix(l, "Query Text: ")
			fallthrough
		case inText && !(strings.Contains(l, "(cost=") && !strings.HasPrefix(l, " ")):
			t := strings.TrimSpace(l)
			if !named && t != "" && !strings.HasPrefix(t, "--") {
				out = append(out, "  query: "+t[:min(len(t), 100)])
				named = true
			}
		default:
			inText = false
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}

// measureRecall compares the product's HNSW plan of the vector list
// (knowledge_vector_hnsw: iterative scan, relaxed order, 40 candidates,
// re-ranked, top 10) with its exact plan (knowledge_vector_exact: the org's
// rows sorted by distance) in the big org, over 100 queries.
func measureRecall(b *testing.B, bd *benchDB, ef int) (float64, []time.Duration) {
	ctx := context.Background()
	local := embed.NewLocal()
	rng := mrand.New(mrand.NewPCG(5, 5))
	const queries = 100
	var found, total int
	lat := make([]time.Duration, 0, queries)
	for i := range queries {
		vs, _ := local.Embed(ctx, []string{bd.gen.query(rng)})
		vec := pgvector.NewVector(vs[0])
		t0 := time.Now()
		approx := vectorTop10(b, bd, "knowledge_vector_hnsw", vec, ef, "", "")
		lat = append(lat, time.Since(t0))
		if len(bd.exact) <= i { // the same queries for every ef
			bd.exact = append(bd.exact, vectorTop10(b, bd, "knowledge_vector_exact", vec, ef, "", ""))
		}
		found += shared(bd.exact[i], approx)
		total += len(bd.exact[i])
	}
	if total == 0 {
		b.Fatal("exact search found nothing")
	}
	return float64(found) / float64(total), lat
}

// vectorTop10 is the top 10 of a vector list function (fn:
// knowledge_vector_hnsw or knowledge_vector_exact) for vec in the big org,
// 40 candidates deep, as the statement runs it (ef_search ef, iterative
// scan, relaxed order), filtered by the metadata meta ("": none), the
// pairs' indexes named by prefix when fn is knowledge_vector_hnsw ("":
// none).
func vectorTop10(b *testing.B, bd *benchDB, fn string, vec pgvector.Vector, ef int, meta, prefix string) []uuid.UUID {
	ctx := context.Background()
	var out []uuid.UUID
	err := pgx.BeginFunc(ctx, bd.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
			strconv.Itoa(ef)); err != nil {
			return err
		}
		nullable := func(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
		args := []any{bd.big.OrgID, vec, embed.NewLocal().Model(), nullable(meta)}
		call := fn + "($1, $2, $3, '{}', false, false, 40, NULL, NULL, NULL, $4::jsonb)"
		if fn == "knowledge_vector_hnsw" {
			call = fn + "($1, $2, $3, '{}', false, false, 40, NULL, NULL, NULL, $4::jsonb, $5)"
			args = append(args, nullable(prefix))
		}
		rows, err := tx.Query(ctx, "SELECT id FROM "+call+" ORDER BY dist, id LIMIT 10", args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// shared is how many of exact's entries approx holds.
func shared(exact, approx []uuid.UUID) int {
	n := 0
	for _, id := range exact {
		if slices.Contains(approx, id) {
			n++
		}
	}
	return n
}
