package knowledge_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// BenchmarkStats measures Operations.Stats (ctl stats, knowledge://stats)
// for orgs of the sizes in KNOWLEDGE_STATS_BENCH_SIZES (default
// 10000,100000), all in one table, with rows as wide as production's (a
// 768-dimension vector stored inline, ~600-character bodies), 20 authors,
// three tags an entry out of ~2,000 distinct; 85% ready, 10% pending, 5%
// failed, 3% of heads expired (over the last 30 days, a few in the
// current hour) and 3.4% expiring within 30 days, 10% superseded. Loaded in statements of 50,000
// rows (the counters' trigger runs once a statement, as for an import's
// COPY). Measured twice: never analyzed nor vacuumed, with the load's
// deltas not folded (the state right after a bulk load), then after the
// upkeep (CompactCounts, VACUUM ANALYZE); p50 and p99 of 50 calls per org
// after one warm-up. A shared HNSW index, if the schema has one, is
// dropped in this benchmark's own database first: building the graph
// would only slow the load.
func BenchmarkStats(b *testing.B) {
	sizes := []int{10000, 100000}
	if v := os.Getenv("KNOWLEDGE_STATS_BENCH_SIZES"); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				b.Fatalf("KNOWLEDGE_STATS_BENCH_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	ctx := context.Background()
	db := testenv.Postgres(b)
	if _, err := db.Pool.Exec(ctx, "DROP INDEX IF EXISTS knowledge_embedding_hnsw_idx"); err != nil {
		b.Fatal(err)
	}
	orgs := make([]uuid.UUID, len(sizes))
	for i, n := range sizes {
		orgs[i] = testfactory.Org(ctx, b, db.Pool, &testfactory.OrgOpts{Name: fmt.Sprint("org-", n)}).ID
		if _, err := db.Pool.Exec(ctx, "INSERT INTO agents (org_id, name) SELECT $1, 'agent-' || a FROM generate_series(1, 20) a", orgs[i]); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for from := 1; from <= n; from += 50000 {
			to := min(from+49999, n)
			if _, err := db.Pool.Exec(ctx, `
				WITH ag AS (SELECT array_agg(id ORDER BY name) AS ids FROM agents WHERE org_id = $1)
				INSERT INTO knowledge (org_id, title, body, tags, created_by_agent_id, embedding, embedding_status, embedding_model, embedded_at,
				                       expires_at)
				SELECT $1, 'entry ' || i, repeat(md5(i::text) || ' lorem ipsum dolor sit amet ', 12),
				       ARRAY['tag-' || (i % 1999), 'area-' || (i % 37), 'ops'], ag.ids[1 + i % 20],
				       CASE WHEN i % 20 > 2 THEN array_fill((i % 97)::real / 97, ARRAY[768])::vector END,
				       CASE WHEN i % 20 > 2 THEN 'ready' WHEN i % 20 = 0 THEN 'failed' ELSE 'pending' END,
				       CASE WHEN i % 20 > 2 THEN 'local-hash-v1' END, CASE WHEN i % 20 > 2 THEN now() END,
				       CASE WHEN i % 33 = 0 THEN now() - (i % 720) * interval '1 hour' - interval '1 second'
				            WHEN i % 29 = 0 THEN now() + (i % 720) * interval '1 hour' END
				FROM generate_series($2::int, $3::int) i, ag`, orgs[i], from, to); err != nil {
				b.Fatal(err)
			}
		}
		// Every tenth entry superseded by the next one (one UPDATE).
		if _, err := db.Pool.Exec(ctx, `
			WITH e AS (SELECT id, row_number() OVER (ORDER BY created_at, id) AS r FROM knowledge WHERE org_id = $1),
			     p AS (SELECT a.id AS old, b.id AS new FROM e a JOIN e b ON b.r = a.r + 1 WHERE a.r % 10 = 0)
			UPDATE knowledge k SET superseded_by = p.new, head_id = p.new, superseded_at = now()
			FROM p WHERE k.org_id = $1 AND k.id = p.old`, orgs[i]); err != nil {
			b.Fatal(err)
		}
		b.Logf("org of %d loaded in %s", n, time.Since(t0).Round(time.Millisecond))
	}
	svc := knowledge.New(db.Pool, knowledge.Options{})
	measure := func(state string) {
		for i, n := range sizes {
			b.Run(fmt.Sprintf("%s/entries=%d", state, n), func(b *testing.B) {
				for range b.N {
					if _, err := svc.Operations().Stats(ctx, orgs[i], 10); err != nil { // warm-up
						b.Fatal(err)
					}
					lat := make([]time.Duration, 50)
					for j := range lat {
						t0 := time.Now()
						st, err := svc.Operations().Stats(ctx, orgs[i], 10)
						lat[j] = time.Since(t0)
						if err != nil || st.Entries != int64(n) || st.Heads+st.Superseded+st.Expired != st.Entries {
							b.Fatalf("stats: %+v %v", st, err)
						}
					}
					sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				}
			})
		}
	}
	measure("never-analyzed")
	t0 := time.Now()
	if _, err := maint(svc).CompactCounts(ctx, 0); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE knowledge"); err != nil {
		b.Fatal(err)
	}
	b.Logf("compacted, vacuumed and analyzed in %s", time.Since(t0).Round(time.Millisecond))
	measure("after-upkeep")
}
