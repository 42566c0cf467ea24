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
	// An entry is ready once its batch's transaction commits; the batch's
	// process span ends (and reaches the exporter) just after: wait for
	// every send to be linked, within a deadline.
	var linked, process map[trace.SpanID]bool
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
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
				if s.SpanKind != trace.SpanKindConsumer {
					t.Errorf("process span kind %v", s.SpanKind)
				}
			}
		}
		if len(linked) == len(sends) || time.Now().After(deadline) {
			break
		}
	}
	if len(linked) != len(sends) {
		t.Errorf("process spans link to %d of the %d send spans", len(linked), len(sends))
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
