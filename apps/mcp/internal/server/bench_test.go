package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// The end-to-end benchmark: one go-sdk client calling the server over real
// HTTP (loopback), the server calling real Postgres and Redis. It measures
// what an agent sees per call: JSON-RPC encoding, auth (cached), edge
// checks, the domain call, and the answer.
//
//	go test -run '^$' -bench . -benchtime 1x ./apps/mcp/internal/server
//
// Each sub-benchmark times benchSamples sequential calls whatever b.N is
// (run it with -benchtime 1x) and reports p50/p95/p99; ns/op is the mean.
// The search corpus is benchCorpus entries of English-like text with long
// bodies (150-400 words), embedded by the worker's handler with the local
// embedder (the longer bodies in chunks, as in a deployment) and indexed by
// Maintenance.IndexAll, never vacuumed or analyzed: the state of an org right
// after agents stored its knowledge. Searches are measured in
// that state, then after Maintenance.Upkeep.

const (
	benchCorpus  = 5000
	benchSamples = 300
)

// Vocabulary of the synthetic text: English function words (most of any
// text), general words of engineering notes, topics of technical words,
// and generated identifiers (the long tail: error codes, settings, hosts,
// versions, tickets). Earlier words of each list are drawn more often
// (Zipf-like), as in real text.
var (
	stopWords = strings.Fields(`the of and to a in is it that for on with as was be by this are at from or an
		but not have has we when which if all can will so there after before then also only into than more each
		other its our they their no should would may must been were one two some any every what how why where`)
	generalWords = strings.Fields(`use run set change check fix need make keep start stop fail work add remove
		update read write call return send wait retry restart deploy test build time value case way step part
		number size limit default new old first last next same different small large slow fast high low long
		short error problem issue cause result reason change request response client server service team user
		data file line log message job task queue worker process thread memory disk cpu load rate count total
		average peak spike drop increase decrease minute second hour day week during between under over without
		again still already because while until since instead however usually often sometimes never always
		manual automatic local remote internal external primary secondary backup production staging development
		config setting option flag parameter variable environment version release upgrade downgrade rollback
		migration schema table column row record field key id name path url host port address network
		connection pool limit timeout deadline budget quota alert alarm page incident outage degraded healthy
		available unavailable monitor metric dashboard trace span graph report note decision owner review
		approve merge branch commit patch bug feature test suite coverage flaky stable known workaround`)
	topicWords = [][]string{
		strings.Fields(`postgres vacuum autovacuum index btree replica wal checkpoint transaction deadlock planner statistics analyze bloat pgbouncer`),
		strings.Fields(`kubernetes pod node deployment kubelet namespace ingress helm container image readiness liveness probe scheduler taint`),
		strings.Fields(`redis cache eviction ttl keyspace sentinel cluster pubsub stream persistence aof snapshot pipeline lua maxmemory`),
		strings.Fields(`token oauth scope jwt session cookie password credential rotation expiry refresh issuer audience signature bearer`),
		strings.Fields(`dns tls certificate proxy balancer socket packet bandwidth firewall route handshake nginx envoy upstream keepalive`),
		strings.Fields(`embedding vector cosine similarity hnsw recall rerank chunk tokenizer model inference batch gpu quantization dimension`),
		strings.Fields(`terraform module provider state plan apply drift workspace backend lockfile variable output resource import taint`),
		strings.Fields(`kafka topic partition offset consumer producer broker rebalance lag retention compaction replication acks schema registry`),
		strings.Fields(`golang goroutine channel mutex context panic recover interface generics module vendor gofmt race pprof escape`),
		strings.Fields(`python virtualenv pip wheel asyncio await coroutine gil pytest fixture mypy typing poetry uvicorn fastapi`),
		strings.Fields(`javascript node npm bundle webpack react hook render state props typescript eslint promise async vite`),
		strings.Fields(`ci pipeline runner artifact cache job matrix workflow action secret trigger stage gitlab github jenkins`),
		strings.Fields(`s3 bucket object multipart presigned lifecycle glacier versioning acl policy iam role arn region endpoint`),
		strings.Fields(`prometheus scrape exporter histogram quantile counter gauge label cardinality alertmanager grafana promql recording rule federation`),
		strings.Fields(`logging logger structured json level debug warn fluentbit loki elasticsearch kibana retention shipper sampling correlation`),
		strings.Fields(`payment invoice refund charge currency stripe webhook idempotency ledger settlement chargeback subscription billing tax receipt`),
		strings.Fields(`search query ranking relevance bm25 tfidf stemming stopword analyzer synonym facet filter boost snippet highlight`),
		strings.Fields(`email smtp bounce spam dkim spf dmarc mailbox template unsubscribe deliverability sender relay queue inbox`),
		strings.Fields(`linux kernel systemd cgroup namespace oom swap inode filesystem mount ext4 xfs journal syslog ulimit`),
		strings.Fields(`agent planner tool prompt completion context window memory retrieval orchestrator handoff fleet supervisor critique reflection`),
	}
	idPrefixes = strings.Fields(`err max min db api auth cache queue retry conn pool worker http grpc pg redis job index shard lease`)
	idSuffixes = strings.Fields(`timeout reset refused size count limit backoff idle open closed ready failed ttl depth lag ratio bytes interval window`)
)

// zipf picks an index of a list of n words, earlier ones more often.
func zipf(r *rand.Rand, n int) int {
	x := r.Float64()
	return min(n-1, int(float64(n)*x*x*x))
}

// identifier is one token of the long tail: a setting or error code, a
// host, a version or a ticket; most are held by few entries.
func identifier(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return idPrefixes[r.IntN(len(idPrefixes))] + "_" + idSuffixes[r.IntN(len(idSuffixes))] + "_" + idSuffixes[r.IntN(len(idSuffixes))]
	case 1:
		return fmt.Sprintf("%s-%d.internal", idPrefixes[r.IntN(len(idPrefixes))], r.IntN(200))
	case 2:
		return fmt.Sprintf("v%d.%d.%d", 1+r.IntN(3), r.IntN(40), r.IntN(20))
	default:
		return fmt.Sprintf("INC-%d", 1000+r.IntN(50000))
	}
}

// benchEntry is the title and body of entry i (the same for the same i): a
// title of 4-9 topical and general words, a body of 150-400 words in
// sentences of 6-18 words.
func benchEntry(i int) (title, body string) {
	r := rand.New(rand.NewPCG(uint64(i), 11))
	topic, second := r.IntN(len(topicWords)), r.IntN(len(topicWords))
	word := func(stop, general float64) string {
		x := r.Float64()
		switch {
		case x < stop:
			return stopWords[zipf(r, len(stopWords))]
		case x < stop+general:
			return generalWords[zipf(r, len(generalWords))]
		case x < 0.97:
			t := topic
			if r.IntN(5) == 0 {
				t = second
			}
			return topicWords[t][zipf(r, len(topicWords[t]))]
		default:
			return identifier(r)
		}
	}
	tw := make([]string, 4+r.IntN(6))
	for k := range tw {
		tw[k] = word(0.1, 0.35)
	}
	var sb strings.Builder
	n := 150 + r.IntN(251)
	for n > 0 {
		m := min(n, 6+r.IntN(13))
		for k := range m {
			w := word(0.45, 0.30)
			if k == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				sb.WriteByte(' ')
			}
			sb.WriteString(w)
		}
		sb.WriteString(". ")
		n -= m
	}
	return strings.Join(tw, " "), strings.TrimSpace(sb.String())
}

// benchQuery is what an agent would ask about entry i: two or three words
// of its title.
func benchQuery(i int) string {
	title, _ := benchEntry(i)
	w := strings.Fields(title)
	r := rand.New(rand.NewPCG(uint64(i), 13))
	n := min(len(w), 2+r.IntN(2))
	s := r.IntN(len(w) - n + 1)
	return strings.Join(w[s:s+n], " ")
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	b.ReportMetric(float64(sum)/float64(len(lat)), "ns/op")
	q := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.95), "p95-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func BenchmarkMCPEndToEnd(b *testing.B) {
	// One agent calling as fast as it can: no rate limits here (the fair-
	// under-load benchmark is BenchmarkRateLimitFairness).
	// MCP_BENCH_ROLE=owner runs the server as the schema's owner instead
	// of the application's role: the same calls without row-level security.
	asOwner := os.Getenv("MCP_BENCH_ROLE") == "owner"
	bd := setup(b, setupOpts{cacheTTL: 5 * time.Second, rate: &ratelimit.Limits{}, asOwner: asOwner})
	fmt.Printf("server role: %s\n", map[bool]string{true: "owner (no row-level security)", false: "knowledge_app (row-level security)"}[asOwner])
	// The worker's calls (index builds, the lexical indexer) as the worker
	// makes them: as the owner.
	ops := knowledge.New(bd.db.Pool, knowledge.Options{Embedder: embed.NewLocal()})
	org := bd.org("bench")
	ag := bd.agent(org, "bench", allScopes, 0)
	cs := bd.session(ag)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The collector paced as apps/mcp paces it (GC_MIN_HEAP_MIB, default
	// 64; 0 measures Go's default pacing). The client in this process
	// shares it.
	appenv.PaceGC(ctx, appenv.New(os.Getenv).GCMinHeap(appenv.DefaultGCMinHeapMiB))
	// The worker builds the vector index of its model at start (before
	// the knowledge it serves is stored, in a deployment): do the same.
	if _, err := knowledge.NewMaintenance(ops, knowledge.MaintenanceConfig{}).EnsureVectorIndex(ctx); err != nil {
		b.Fatal(err)
	}

	b.Run("store", func(b *testing.B) {
		var n int
		if err := bd.db.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&n); err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, benchSamples)
		for i := n; i < n+benchSamples; i++ {
			title, body := benchEntry(i)
			start := time.Now()
			res := call(b, cs, kt.ToolStore, map[string]any{
				"title": title, "body": body,
				"tags": []string{"topic-" + fmt.Sprint(i%20), "kind-" + fmt.Sprint(i%3)},
			})
			lat = append(lat, time.Since(start))
			if res.IsError {
				b.Fatal(text(res))
			}
		}
		report(b, lat)
	})

	// The search corpus: benchCorpus entries (the stores above, and more
	// through the service), embedded by the worker's handler and indexed
	// by the lexical indexer as the worker would. Nothing is vacuumed or
	// analyzed.
	var n int
	if err := bd.db.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&n); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	author := knowledge.Caller{OrgID: org, AgentID: ag.id}
	for i := n; i < benchCorpus; i++ {
		title, body := benchEntry(i)
		if _, err := bd.svc.Store(ctx, author, knowledge.StoreInput{Title: title, Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	stored := time.Since(t0)
	t0 = time.Now()
	// The worker's own handler: bodies longer than the model's chunk size
	// (2,000 characters for the local embedder; about a fifth of these)
	// get chunk vectors too, as in a deployment.
	embedPending(b, bd.db.Pool, org)
	embedded := time.Since(t0)
	var chunked int
	if err := bd.db.Pool.QueryRow(ctx, "SELECT count(DISTINCT entry_id) FROM knowledge_chunks WHERE org_id = $1", org).Scan(&chunked); err != nil {
		b.Fatal(err)
	}
	t0 = time.Now()
	indexed, err := knowledge.NewMaintenance(ops, knowledge.MaintenanceConfig{}).IndexAll(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("corpus: %d entries (stored in %v, embedded in %v, %d of them in chunks), %d indexed by IndexAll in %v; never vacuumed or analyzed\n",
		benchCorpus, stored.Round(time.Millisecond), embedded.Round(time.Millisecond), chunked, indexed, time.Since(t0).Round(time.Millisecond))
	title, body := benchEntry(1)
	fmt.Printf("entry 1: %q / %q... (%d words); queries: %q, %q, %q\n", title, body[:200], len(strings.Fields(body)),
		benchQuery(0), benchQuery(31), benchQuery(62))

	// The searches of one state: benchSamples over MCP and as many
	// straight on the domain service, to tell what MCP over HTTP adds from
	// what the search itself costs. The two are interleaved (which goes
	// first alternates) and every call asks a query asked by no call
	// before it, so both meet the same cache and load: the query's vector
	// is computed, not read from the query cache, and the pages it reads
	// were not just read by the other path's call of the same query.
	searches := func(state string, round int) {
		for i := range 20 {
			call(b, cs, kt.ToolSearch, map[string]any{"query": benchQuery(benchCorpus - 1 - i - 20*round), "limit": 10})
		}
		caller := knowledge.Caller{OrgID: org}
		query := func(i, path int) string { return benchQuery((round*2*benchSamples + 2*i + path) * 31 % benchCorpus) }
		load := loadAvg()
		viaMCP := make([]time.Duration, 0, benchSamples)
		direct := make([]time.Duration, 0, benchSamples)
		hits := 0
		for i := range benchSamples {
			for k := range 2 {
				path := (i + k) % 2
				start := time.Now()
				if path == 0 {
					res := call(b, cs, kt.ToolSearch, map[string]any{"query": query(i, path), "limit": 10})
					viaMCP = append(viaMCP, time.Since(start))
					if res.IsError {
						b.Fatal(text(res))
					}
					continue
				}
				r, err := bd.svc.Search(ctx, caller, knowledge.SearchInput{Query: query(i, path), Limit: new(10)})
				if err != nil {
					b.Fatal(err)
				}
				direct = append(direct, time.Since(start))
				hits += len(r.Hits)
			}
		}
		fmt.Printf("search/%s: load average %s -> %s\n", state, load, loadAvg())
		b.Run("search/"+state, func(b *testing.B) { report(b, viaMCP) })
		b.Run("search-direct/"+state, func(b *testing.B) {
			report(b, direct)
			b.ReportMetric(float64(hits)/benchSamples, "hits/query")
		})
	}
	searches("never-analyzed", 0)
	t0 = time.Now()
	rep, err := knowledge.NewMaintenance(ops, knowledge.MaintenanceConfig{}).Upkeep(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("Maintenance.Upkeep in %v: vacuumed %v, analyzed %v\n", time.Since(t0).Round(time.Millisecond), rep.Vacuumed, rep.Analyzed)
	searches("after-upkeep", 1)
}

// embedPending embeds the org's pending entries as the worker would: its
// own handler, batches of 64 (long bodies get chunk vectors too).
func embedPending(b *testing.B, pool *pgxpool.Pool, org uuid.UUID) {
	b.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, "SELECT id FROM knowledge WHERE org_id = $1 AND embedding_status = 'pending'", org)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		b.Fatal(err)
	}
	h := jobs.NewEmbedHandler(pool, embed.NewLocal(), jobs.HandlerOptions{})
	for batch := range slices.Chunk(ids, 64) {
		js := make([]knowledge.EmbeddingJob, len(batch))
		for k, id := range batch {
			js[k] = knowledge.EmbeddingJob{OrgID: org, EntryID: id, Generation: 1}
		}
		if err := h.Process(ctx, js); err != nil {
			b.Fatal(err)
		}
	}
}
