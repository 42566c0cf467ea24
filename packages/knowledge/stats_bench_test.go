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
)

// BenchmarkStats measures Service.Stats (ctl stats) for orgs of the sizes
// in KNOWLEDGE_STATS_BENCH_SIZES (default 1000,10000,100000), all in one
// table, with rows as wide as production's (a 768-dimension vector stored
// inline, ~600-character bodies, three tags): p50 and p99 of 30 calls per
// org after one warm-up. The shared HNSW index is dropped in this
// benchmark's own database first: the rows are written to be read, and
// building the graph for them would only slow the load.
func BenchmarkStats(b *testing.B) {
	sizes := []int{1000, 10000, 100000}
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
	if _, err := db.Pool.Exec(ctx, "DROP INDEX knowledge_embedding_hnsw_idx"); err != nil {
		b.Fatal(err)
	}
	orgs := make([]uuid.UUID, len(sizes))
	for i, n := range sizes {
		var agent uuid.UUID
		if err := db.Pool.QueryRow(ctx, "INSERT INTO orgs (name) VALUES ($1) RETURNING id", fmt.Sprint("org-", n)).Scan(&orgs[i]); err != nil {
			b.Fatal(err)
		}
		if err := db.Pool.QueryRow(ctx, "INSERT INTO agents (org_id, name) VALUES ($1, 'a') RETURNING id", orgs[i]).Scan(&agent); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := db.Pool.Exec(ctx, `
			INSERT INTO knowledge (org_id, title, body, tags, created_by_agent_id, embedding, embedding_status, embedding_model, embedded_at,
			                       expires_at)
			SELECT $1, 'entry ' || i, repeat(md5(i::text) || ' lorem ipsum dolor sit amet ', 12), ARRAY['tag-' || (i % 50), 'ops', 'db'], $2,
			       CASE WHEN i % 10 <> 0 THEN array_fill((i % 97)::real / 97, ARRAY[768])::vector END,
			       CASE WHEN i % 10 <> 0 THEN 'ready' WHEN i % 20 = 0 THEN 'failed' ELSE 'pending' END,
			       CASE WHEN i % 10 <> 0 THEN 'local-hash-v1' END, CASE WHEN i % 10 <> 0 THEN now() END,
			       CASE WHEN i % 33 = 0 THEN now() - interval '1 day' END
			FROM generate_series(1, $3::int) i`, orgs[i], agent, n); err != nil {
			b.Fatal(err)
		}
		b.Logf("org of %d loaded in %s", n, time.Since(t0).Round(time.Millisecond))
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE knowledge"); err != nil {
		b.Fatal(err)
	}
	svc := knowledge.New(db.Pool, knowledge.Options{})
	for i, n := range sizes {
		b.Run(fmt.Sprint("entries=", n), func(b *testing.B) {
			for range b.N {
				if _, err := svc.Stats(ctx, orgs[i], 10); err != nil { // warm-up
					b.Fatal(err)
				}
				lat := make([]time.Duration, 30)
				for j := range lat {
					t0 := time.Now()
					st, err := svc.Stats(ctx, orgs[i], 10)
					lat[j] = time.Since(t0)
					if err != nil || st.Entries != int64(n) {
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
