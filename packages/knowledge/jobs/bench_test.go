package jobs_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// BenchmarkPipeline measures the whole pipeline against real Postgres and
// Redis: entries are stored (inserted and enqueued as the Service does) while
// a worker with the default batching settings (grace 1s, max delay 5s,
// concurrency 4, 8 groups per org) runs; the clock stops when the last one is
// ready. Reported: entries/s, provider calls, and the store-to-ready lag
// (embedded_at - embedding_requested_at) p50/p95.
//
// Run: go test -run '^$' -bench Pipeline ./packages/knowledge/jobs/
func BenchmarkPipeline(b *testing.B) {
	cases := []struct {
		name      string
		latency   time.Duration // 0: the local embedder's own speed
		batchSize int
		entries   int
	}{
		{"local/batch=1", 0, 1, 64},
		{"local/batch=32", 0, 32, 1024},
		{"fake50ms/batch=1", 50 * time.Millisecond, 1, 64},
		{"fake50ms/batch=32", 50 * time.Millisecond, 32, 1024},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			bd := setup(b)
			fake := newFake()
			fake.latency = c.latency
			var emb embed.Embedder = fake
			if c.latency == 0 {
				emb = embed.NewLocal()
			}
			pipelineRun(b, bd, emb, c.batchSize, c.entries)
		})
	}
}

// pipelineRun stores entries while a worker with the default batching (and
// batchSize) embeds them with emb, b.N times, and reports entries/s,
// provider calls and the store-to-ready lag.
func pipelineRun(b *testing.B, bd *bundle, emb embed.Embedder, batchSize, entries int) {
	calls := &countingEmbedder{Embedder: emb}
	w := jobs.NewWorker(bd.redis, bd.pool, calls, jobs.WorkerOptions{
		BatchSize: batchSize, ReconcileInterval: time.Hour, ShutdownTimeout: time.Second,
	})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Shutdown()
	var total time.Duration
	var lags []time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		js := storeMany(b, bd, entries)
		bd.waitStatus(b, knowledge.EmbeddingReady, 5*time.Minute, ids(js...)...)
		total += time.Since(start)
		lags = append(lags, readLags(b, bd, js)...)
	}
	b.ReportMetric(float64(entries*b.N)/total.Seconds(), "entries/s")
	b.ReportMetric(float64(calls.n.Load())/float64(b.N), "provider-calls/op")
	b.ReportMetric(float64(percentile(lags, 50).Milliseconds()), "lag-p50-ms")
	b.ReportMetric(float64(percentile(lags, 95).Milliseconds()), "lag-p95-ms")
}

func storeMany(b *testing.B, bd *bundle, n int) []knowledge.EmbeddingJob {
	ctx := context.Background()
	rows, err := bd.pool.Query(ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'entry ' || g, 'body of entry ' || g || ' about topic ' || (g % 17), $2 FROM generate_series(1, $3) g
		RETURNING id, embedding_generation`, bd.org, bd.agent, n)
	if err != nil {
		b.Fatal(err)
	}
	var js []knowledge.EmbeddingJob
	for rows.Next() {
		j := knowledge.EmbeddingJob{OrgID: bd.org}
		if err := rows.Scan(&j.EntryID, &j.Generation); err != nil {
			b.Fatal(err)
		}
		js = append(js, j)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	for _, j := range js {
		if err := bd.enq.EnqueueEmbedding(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
	return js
}

func readLags(b *testing.B, bd *bundle, js []knowledge.EmbeddingJob) []time.Duration {
	rows, err := bd.pool.Query(context.Background(),
		`SELECT extract(epoch FROM embedded_at - embedding_requested_at)::float8 FROM knowledge WHERE org_id = $1 AND id = ANY($2)`,
		bd.org, ids(js...))
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var s float64
		if err := rows.Scan(&s); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Duration(s*float64(time.Second)))
	}
	return out
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}
