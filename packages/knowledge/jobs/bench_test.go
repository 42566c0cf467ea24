package jobs_test

import (
	"context"
	"fmt"
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
	js := insertMany(b, bd, n)
	for _, j := range js {
		if err := bd.enq.EnqueueEmbedding(context.Background(), j); err != nil {
			b.Fatal(err)
		}
	}
	return js
}

// insertMany stores n entries of bd's org in one statement, pending, and
// returns their jobs (not enqueued).
func insertMany(b *testing.B, bd *bundle, n int) []knowledge.EmbeddingJob {
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

// BenchmarkBacklog measures catching up on a backlog: an org with n
// entries waiting for their vectors (stored in one statement, tables never
// analyzed), embedded in the worker's batches of 32 by the handler alone
// (no queue), the first batches and the last. Reported: entries/s over
// the whole backlog and the mean ms a batch of the first and last tenth.
// A statement that reads the org's pending entries to find its batch's
// makes each batch cost what is left, and the whole grow with n².
//
// Run: go test -run '^$' -bench Backlog -benchtime 1x ./packages/knowledge/jobs/
func BenchmarkBacklog(b *testing.B) {
	for _, n := range []int{5000, 20000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				bd := setup(b)
				ctx := context.Background()
				js := insertMany(b, bd, n)
				h := jobs.NewEmbedHandler(bd.pool, embed.NewLocal(), jobs.HandlerOptions{})
				const batch = 32
				var times []time.Duration
				start := time.Now()
				for k := 0; k < len(js); k += batch {
					t0 := time.Now()
					if err := h.Process(ctx, js[k:min(k+batch, len(js))]); err != nil {
						b.Fatal(err)
					}
					times = append(times, time.Since(t0))
				}
				total := time.Since(start)
				tenth := max(len(times)/10, 1)
				mean := func(ds []time.Duration) float64 {
					var s time.Duration
					for _, d := range ds {
						s += d
					}
					return float64(s.Microseconds()) / 1000 / float64(len(ds))
				}
				b.ReportMetric(float64(n)/total.Seconds(), "entries/s")
				b.ReportMetric(mean(times[:tenth]), "first-batch-ms")
				b.ReportMetric(mean(times[len(times)-tenth:]), "last-batch-ms")
			}
		})
	}
}
