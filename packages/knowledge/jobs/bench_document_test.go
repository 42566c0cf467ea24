package jobs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/docsplit"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// jobRecorder is the Enqueuer of the benchmark: it keeps the jobs, which
// the benchmark hands to the embeddings handler as the worker would.
type jobRecorder struct {
	mu   sync.Mutex
	jobs []knowledge.EmbeddingJob
}

func (r *jobRecorder) EnqueueEmbedding(_ context.Context, j knowledge.EmbeddingJob) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = append(r.jobs, j)
	return nil
}

func (r *jobRecorder) take() []knowledge.EmbeddingJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.jobs
	r.jobs = nil
	return out
}

// embedAll plays the worker's defaults (batches of 32, 4 at a time) with
// the real handler and the local embedder.
func embedAll(ctx context.Context, b *testing.B, h *jobs.EmbedHandler, js []knowledge.EmbeddingJob) {
	const batch, workers = 32, 4
	next := make(chan []knowledge.EmbeddingJob)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for part := range next {
				if err := h.Process(ctx, part); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := 0; i < len(js); i += batch {
		next <- js[i:min(i+batch, len(js))]
	}
	close(next)
	wg.Wait()
}

// BenchmarkStoreDocument measures issue 27's document targets through the
// Service (the MCP layer adds the decoding of the request, measured in
// apps/mcp): store_document of the 1 MiB, 300-section handbook
// (docsplit.Handbook), the time until every section is embedded by the
// handler the worker runs (local embedder, worker defaults), and a
// replacement of it with 3 sections changed. Run with -benchtime=1x:
//
//	go test -run '^$' -bench BenchmarkStoreDocument -benchtime=1x ./packages/knowledge/jobs/
func BenchmarkStoreDocument(b *testing.B) {
	ctx := context.Background()
	db := testenv.Postgres(b)
	a := testfactory.Agent(ctx, b, db.Pool, nil)
	c := knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
	rec := &jobRecorder{}
	svc := knowledge.New(db.AppPool(b), knowledge.Options{Enqueuer: rec})
	h := jobs.NewEmbedHandler(db.Pool, embed.NewLocal(), jobs.HandlerOptions{})
	doc := docsplit.Handbook(1, 300)
	for b.Loop() {
		in := knowledge.DocumentInput{Title: "Handbook", Content: doc, Source: "handbook-" + time.Now().Format(time.RFC3339Nano)}
		start := time.Now()
		r, err := svc.StoreDocument(ctx, c, in)
		if err != nil {
			b.Fatal(err)
		}
		answered := time.Since(start)
		embedAll(ctx, b, h, rec.take())
		ready := time.Since(start)
		var pending int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM knowledge WHERE org_id = $1 AND embedding_status <> 'ready'`, c.OrgID).Scan(&pending); err != nil {
			b.Fatal(err)
		}
		if pending != 0 {
			b.Fatalf("%d entries not ready", pending)
		}

		// Three sections' texts changed (a word added to each).
		changed := doc
		for _, i := range []int{10, 150, 290} {
			s := r.Sections[i]
			var body string
			if err := db.Pool.QueryRow(ctx, `SELECT body FROM knowledge WHERE id = $1`, s.ID).Scan(&body); err != nil {
				b.Fatal(err)
			}
			changed = strings.Replace(changed, body, strings.TrimRight(body, "\n")+" Revised.\n"+body[len(strings.TrimRight(body, "\n")):], 1)
		}
		in.Content = changed
		start = time.Now()
		r2, err := svc.StoreDocument(ctx, c, in)
		if err != nil {
			b.Fatal(err)
		}
		replaced := time.Since(start)
		reembed := rec.take()
		embedAll(ctx, b, h, reembed)
		if r2.Changed != 3 || len(reembed) != 3 {
			b.Fatalf("replacement changed %d sections, %d to embed; want 3 and 3", r2.Changed, len(reembed))
		}
		b.ReportMetric(float64(len(r.Sections)), "sections")
		b.ReportMetric(float64(len(doc))/(1<<20), "MiB")
		b.ReportMetric(float64(answered.Milliseconds()), "answer-ms")
		b.ReportMetric(float64(ready.Milliseconds()), "all-ready-ms")
		b.ReportMetric(float64(replaced.Milliseconds()), "replace-ms")
		b.ReportMetric(float64(len(reembed)), "re-embedded")
	}
}
