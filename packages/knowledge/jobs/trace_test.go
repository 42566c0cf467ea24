package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// spanEmbedder records the span each Embed call runs in.
type spanEmbedder struct {
	embed.Embedder
	mu    sync.Mutex
	spans []trace.SpanContext
}

func (e *spanEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.spans = append(e.spans, trace.SpanContextFromContext(ctx))
	e.mu.Unlock()
	return e.Embedder.Embed(ctx, texts)
}

// TestWorkerSpansLinkToTheStoringCalls runs the real pipeline (asynq on
// Redis, the aggregator, the worker) with tracing on: each store's enqueue
// makes a send span in its call's trace, and the worker's process spans
// link to them and run the embedder.
func TestWorkerSpansLinkToTheStoringCalls(t *testing.T) {
	exp := jobs.TestSpans()
	b := setup(t)
	emb := &spanEmbedder{Embedder: embed.NewLocal()}
	calls := map[trace.TraceID]bool{}
	var js []knowledge.EmbeddingJob
	for i := range 3 {
		ctx, call := otel.Tracer("test").Start(context.Background(), "tools/call store_knowledge")
		j := b.insert(t, fmt.Sprintf("traced entry %d", i), "a body to embed")
		if err := b.enq.EnqueueEmbedding(ctx, j); err != nil {
			t.Fatal(err)
		}
		call.End()
		calls[call.SpanContext().TraceID()] = true
		js = append(js, j)
	}
	b.worker(t, emb, nil)
	b.waitStatus(t, "ready", 30*time.Second, ids(js...)...)

	sends := map[trace.SpanID]bool{}
	for _, s := range exp.GetSpans() {
		if s.Name == "send "+jobs.Queue && calls[s.SpanContext.TraceID()] {
			if s.SpanKind != trace.SpanKindProducer {
				t.Errorf("send span kind %v", s.SpanKind)
			}
			sends[s.SpanContext.SpanID()] = true
		}
	}
	if len(sends) != len(js) {
		t.Fatalf("%d send spans in the calls' traces, want %d", len(sends), len(js))
	}
	// The process spans that link to the sends, and the sends they link.
	scan := func() (linked, process map[trace.SpanID]bool, kinds []trace.SpanKind) {
		linked, process = map[trace.SpanID]bool{}, map[trace.SpanID]bool{}
		for _, s := range exp.GetSpans() {
			if s.Name != "process "+jobs.Queue {
				continue
			}
			ours := false
			for _, l := range s.Links {
				if sends[l.SpanContext.SpanID()] {
					linked[l.SpanContext.SpanID()], ours = true, true
				}
			}
			if ours {
				process[s.SpanContext.SpanID()] = true
				kinds = append(kinds, s.SpanKind)
			}
		}
		return linked, process, kinds
	}
	// An entry is ready once its batch's transaction commits; the batch's
	// process span ends (and reaches the exporter) just after.
	eventually(t, 10*time.Second, fmt.Sprintf("process spans linking each of the %d send spans", len(sends)), func() bool {
		linked, _, _ := scan()
		return len(linked) == len(sends)
	})
	_, process, kinds := scan()
	for _, k := range kinds {
		if k != trace.SpanKindConsumer {
			t.Errorf("process span kind %v", k)
		}
	}
	emb.mu.Lock()
	defer emb.mu.Unlock()
	in := 0
	for _, sc := range emb.spans {
		if process[sc.SpanID()] {
			in++
		}
	}
	if in == 0 {
		t.Errorf("the embedder ran in none of the process spans (%d calls)", len(emb.spans))
	}
}
