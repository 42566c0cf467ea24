package knowledge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// Benchmarks of the knowledge module. Run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./packages/knowledge/
//
// KNOWLEDGE_BENCH_SIZES (default "10000,100000") sets the entry counts of the
// searched org. Each size gets its own database whose knowledge table is
// shared with other orgs (a quarter of the size again, over four orgs) and a
// small org holding 1% of the table, used for recall. Vectors come from the
// local embedder over synthetic but varied text (topics of pseudo-words).
// Each sub-benchmark runs a fixed number of samples and reports custom
// metrics; ns/op is the mean latency of one operation.

func benchSizes(b *testing.B) []int {
	v := os.Getenv("KNOWLEDGE_BENCH_SIZES")
	if v == "" {
		v = "10000,100000"
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("KNOWLEDGE_BENCH_SIZES: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out
}

// textGen makes deterministic synthetic text: 300 topics of 12 pseudo-words
// each, over a general vocabulary of 3000 pseudo-words.
type textGen struct {
	topics  [][]string
	general []string
}

func newTextGen() *textGen {
	rng := rand.New(rand.NewPCG(1, 2))
	syl := []string{"ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "vu", "de", "ga", "fi", "zo", "be", "ly", "qu", "ra", "te", "xo", "wa"}
	word := func() string {
		n := 2 + rng.IntN(3)
		var sb strings.Builder
		for range n {
			sb.WriteString(syl[rng.IntN(len(syl))])
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

func (g *textGen) words(rng *rand.Rand, topic, n int, topical float64) string {
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

func (g *textGen) entry(rng *rand.Rand) (title, body string, tags []string) {
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

// decorate adds the common words to one entry.
func decorate(rng *rand.Rand, title, body string) (string, string) {
	for _, c := range commonWords {
		if rng.Float64() < c.share {
			body += " " + c.word
			if rng.Float64() < 0.2 {
				title += " " + c.word
			}
		}
	}
	return title, body
}

// commonQuery is a query made of common words, alone or with topical words:
// each matches 2.5% to 50% of the org in the full-text list, and the
// one-word ones 5% to 10% of the titles; "ka" is a syllable of most
// pseudo-words (a short query: trigram indexes need 3 characters).
func (g *textGen) commonQuery(rng *rand.Rand) string {
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

func (g *textGen) query(rng *rand.Rand) string {
	return g.words(rng, rng.IntN(len(g.topics)), 2+rng.IntN(3), 0.9)
}

type benchDB struct {
	pool              *pgxpool.Pool
	svc               *knowledge.Service
	big, small        knowledge.Caller
	total, smallCount int
	gen               *textGen
}

// loadBench fills a fresh database: n entries in the big org, n/4 spread over
// four other orgs, and 1% of the table in the small org. Indexes are built
// after the COPY, as a bulk load would.
func loadBench(b *testing.B, n int) *benchDB {
	b.Helper()
	ctx := context.Background()
	db := testenv.Postgres(b)
	pool := db.Pool
	mkOrg := func(name string) (uuid.UUID, uuid.UUID) {
		var org, agent uuid.UUID
		if err := pool.QueryRow(ctx, "INSERT INTO orgs (name) VALUES ($1) RETURNING id", name).Scan(&org); err != nil {
			b.Fatal(err)
		}
		if err := pool.QueryRow(ctx, "INSERT INTO agents (org_id, name) VALUES ($1, 'bench') RETURNING id", org).Scan(&agent); err != nil {
			b.Fatal(err)
		}
		return org, agent
	}
	bd := &benchDB{gen: newTextGen()}
	type part struct {
		org, agent uuid.UUID
		n          int
	}
	var parts []part
	o, a := mkOrg("big")
	bd.big = knowledge.Caller{OrgID: o, AgentID: a}
	parts = append(parts, part{o, a, n})
	for i := range 4 {
		o, a := mkOrg("other-" + strconv.Itoa(i))
		parts = append(parts, part{o, a, n / 16})
	}
	bd.smallCount = max(10, (n+n/4)/99) // 1% of the whole table
	o, a = mkOrg("small")
	bd.small = knowledge.Caller{OrgID: o, AgentID: a}
	parts = append(parts, part{o, a, bd.smallCount})

	for _, ix := range []string{"knowledge_embedding_hnsw_idx", "knowledge_search_tsv_idx", "knowledge_title_trgm_idx", "knowledge_tags_idx"} {
		if _, err := pool.Exec(ctx, "DROP INDEX "+ix); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	local := embed.NewLocal()
	now := time.Now()
	for pi, p := range parts {
		rows := make([][]any, p.n)
		var wg sync.WaitGroup
		const workers = 2
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(pi), uint64(w)))
				crng := rand.New(rand.NewPCG(uint64(pi), uint64(w)+100))
				for i := w; i < p.n; i += workers {
					title, body, tags := bd.gen.entry(rng)
					title, body = decorate(crng, title, body)
					vs, _ := local.Embed(ctx, []string{title + "\n" + body})
					rows[i] = []any{p.org, uuid.New(), title, body, tags, int16(80), "agent", p.agent,
						pgvector.NewVector(vs[0]), "ready", local.Model(), now,
						now.Add(-time.Duration(p.n-i) * time.Second)} // one entry a second
				}
			}()
		}
		wg.Wait()
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"knowledge"},
			[]string{"org_id", "id", "title", "body", "tags", "confidence", "source", "created_by_agent_id",
				"embedding", "embedding_status", "embedding_model", "embedded_at", "created_at"},
			pgx.CopyFromRows(rows))
		if err != nil {
			b.Fatal(err)
		}
		bd.total += p.n
	}
	loaded := time.Since(start)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	for _, s := range []string{
		"SET maintenance_work_mem = '2GB'",
		"SET max_parallel_maintenance_workers = 1",
		"CREATE INDEX knowledge_embedding_hnsw_idx ON knowledge USING hnsw (embedding vector_cosine_ops)",
		"CREATE INDEX knowledge_search_tsv_idx ON knowledge USING gin (search_tsv)",
		"CREATE INDEX knowledge_title_trgm_idx ON knowledge USING gin (title gin_trgm_ops)",
		"CREATE INDEX knowledge_tags_idx ON knowledge USING gin (tags)",
		"VACUUM ANALYZE knowledge",
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			b.Fatalf("%s: %v", s, err)
		}
	}
	b.Logf("loaded %d entries (big org %d, small org %d) in %v, indexes in %v",
		bd.total, n, bd.smallCount, loaded.Round(time.Millisecond), (time.Since(start) - loaded).Round(time.Millisecond))
	bd.pool = pool
	bd.svc = knowledge.New(pool, knowledge.Options{})
	return bd
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

// BenchmarkStore measures stores per second: one client, eight clients in
// one org (they queue on the org's quota row), eight clients in eight orgs.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	db := testenv.Postgres(b)
	svc := knowledge.New(db.Pool, knowledge.Options{})
	gen := newTextGen()
	var callers []knowledge.Caller
	for i := range 8 {
		var org, agent uuid.UUID
		if err := db.Pool.QueryRow(ctx, "INSERT INTO orgs (name) VALUES ($1) RETURNING id", "o"+strconv.Itoa(i)).Scan(&org); err != nil {
			b.Fatal(err)
		}
		if err := db.Pool.QueryRow(ctx, "INSERT INTO agents (org_id, name) VALUES ($1, 'a') RETURNING id", org).Scan(&agent); err != nil {
			b.Fatal(err)
		}
		callers = append(callers, knowledge.Caller{OrgID: org, AgentID: agent})
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
					rng := rand.New(rand.NewPCG(uint64(w), 7))
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
}

// BenchmarkSearch measures Search latency in the big org and the recall@10
// of the vector list in the 1% org against exact search, per size.
func BenchmarkSearch(b *testing.B) {
	for _, n := range benchSizes(b) {
		bd := loadBench(b, n)
		ctx := context.Background()
		b.Run(fmt.Sprintf("search/n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(9, 9))
			const samples = 300
			for range 20 { // warm up caches and the statement cache
				if _, err := bd.svc.Search(ctx, bd.big, knowledge.SearchInput{Query: bd.gen.query(rng)}); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, samples)
			hits := 0
			for range samples {
				q := bd.gen.query(rng)
				t0 := time.Now()
				r, err := bd.svc.Search(ctx, bd.big, knowledge.SearchInput{Query: q})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				hits += len(r.Hits)
			}
			reportLatencies(b, lat)
			b.ReportMetric(float64(hits)/samples, "hits/query")
		})
		b.Run(fmt.Sprintf("search-common-words/n=%d", n), func(b *testing.B) {
			searchCommon(b, bd)
		})
		for _, forced := range []bool{false, true} {
			for _, ef := range []int{40, 64, 200} {
				name := fmt.Sprintf("recall/n=%d/org=1%%/ef=%d", n, ef)
				if forced {
					name += "/hnsw-forced"
				}
				b.Run(name, func(b *testing.B) {
					recall, lat := measureRecall(b, bd, ef, forced)
					reportLatencies(b, lat)
					b.ReportMetric(recall, "recall@10")
				})
			}
		}
	}
}

// searchCommon measures Search in the big org with queries of common words
// (commonQuery), whose lexical lists match thousands to tens of thousands of
// rows, and logs how the time splits between the three lists.
func searchCommon(b *testing.B, bd *benchDB) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 11))
	const samples = 300
	for range 20 {
		if _, err := bd.svc.Search(ctx, bd.big, knowledge.SearchInput{Query: bd.gen.commonQuery(rng)}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, samples)
	hits := 0
	for range samples {
		q := bd.gen.commonQuery(rng)
		t0 := time.Now()
		r, err := bd.svc.Search(ctx, bd.big, knowledge.SearchInput{Query: q})
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		hits += len(r.Hits)
	}
	reportLatencies(b, lat)
	b.ReportMetric(float64(hits)/samples, "hits/query")
	for _, q := range []string{"service", "service config", "ka"} {
		var fts, ttl int
		if err := bd.pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE search_tsv @@ plainto_tsquery('simple', $2)),
			count(*) FILTER (WHERE title ILIKE $3)
			FROM knowledge WHERE org_id = $1`, bd.big.OrgID, q, knowledge.LikePattern(q)).Scan(&fts, &ttl); err != nil {
			b.Fatal(err)
		}
		b.Logf("query %q matches %d rows by full text, %d by title, of %d", q, fts, ttl, bd.total)
	}
}

// vectorList is the vector CTE of SearchHybrid (queries/search.sql), alone:
// 40 candidates by the index, re-ranked by exact distance, top 10.
const vectorList = `
WITH v AS MATERIALIZED (
    SELECT id, embedding <=> $2 AS dist FROM knowledge
    WHERE org_id = $1 AND embedding_status = 'ready' AND embedding_model = $3
    ORDER BY embedding <=> $2 LIMIT 40
)
SELECT id FROM v ORDER BY dist, id LIMIT 10`

// measureRecall compares the vector list with exact search (the same query
// with index scans off, so it is a scan and a sort) over 100 queries. The
// planner may prefer the org's btree plus an exact sort for a small org;
// "forced" turns sorts off so the HNSW index path is taken, showing its
// own recall.
func measureRecall(b *testing.B, bd *benchDB, ef int, forced bool) (float64, []time.Duration) {
	ctx := context.Background()
	local := embed.NewLocal()
	rng := rand.New(rand.NewPCG(5, uint64(ef)))
	const queries = 100
	var found, total int
	lat := make([]time.Duration, 0, queries)
	run := func(settings []string, vec pgvector.Vector) ([]uuid.UUID, time.Duration) {
		var out []uuid.UUID
		t0 := time.Now()
		err := pgx.BeginFunc(ctx, bd.pool, func(tx pgx.Tx) error {
			for _, s := range settings {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			rows, err := tx.Query(ctx, vectorList, bd.small.OrgID, vec, local.Model())
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return out, time.Since(t0)
	}
	approxSettings := []string{
		fmt.Sprintf("SET LOCAL hnsw.ef_search = %d", ef),
		"SET LOCAL hnsw.iterative_scan = relaxed_order",
	}
	if forced {
		approxSettings = append(approxSettings, "SET LOCAL enable_sort = off")
	}
	exactSettings := []string{"SET LOCAL enable_indexscan = off"}
	for i := range queries {
		vs, _ := local.Embed(ctx, []string{bd.gen.query(rng)})
		vec := pgvector.NewVector(vs[0])
		approx, d := run(approxSettings, vec)
		lat = append(lat, d)
		exact, _ := run(exactSettings, vec)
		if i == 0 {
			plan := explain(b, bd, approxSettings, vec)
			b.Logf("plan of the vector list: %s", plan)
		}
		total += len(exact)
		for _, id := range exact {
			if slices.Contains(approx, id) {
				found++
			}
		}
	}
	if total == 0 {
		b.Fatal("exact search found nothing")
	}
	return float64(found) / float64(total), lat
}

func explain(b *testing.B, bd *benchDB, settings []string, vec pgvector.Vector) string {
	ctx := context.Background()
	var lines []string
	err := pgx.BeginFunc(ctx, bd.pool, func(tx pgx.Tx) error {
		for _, s := range settings {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+vectorList, bd.small.OrgID, vec, embed.LocalModel)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	var keep []string
	for _, l := range lines {
		if strings.Contains(l, "Scan") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	return strings.Join(keep, " | ")
}
