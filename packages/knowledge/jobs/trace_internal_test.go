package jobs

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// TestTraceCarriedThroughTheQueue follows two stores' traces through their
// entry tasks' headers, the aggregator and the worker's middleware: the
// batch's process span links to both send spans, and the handler runs
// inside it.
// TestSpans is the in-memory exporter of this test binary, installed once
// (OpenTelemetry's global provider is set once a process: tracers made
// before keep the first); tests pick their spans by trace id. Exported for
// the package's external tests.
var TestSpans = sync.OnceValue(func() *tracetest.InMemoryExporter {
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return exp
})

func TestTraceCarriedThroughTheQueue(t *testing.T) {
	exp := TestSpans()

	org := uuid.New()
	var sends []trace.SpanContext
	var tasks []*asynq.Task
	for range 2 {
		ctx, call := otel.Tracer("test").Start(context.Background(), "tools/call store_knowledge")
		_, send, h := startSend(ctx, Queue, TypeEmbedEntry)
		task, err := newEmbedEntryTask(knowledge.EmbeddingJob{OrgID: org, EntryID: uuid.New(), Generation: 1}, DefaultShards, h)
		if err != nil {
			t.Fatal(err)
		}
		endSpan(send, nil)
		call.End()
		if task.Headers()["traceparent"] == "" {
			t.Fatalf("entry task without traceparent: %v", task.Headers())
		}
		sends = append(sends, send.SpanContext())
		tasks = append(tasks, task)
	}
	batch := NewAggregator(BatchOptions{}).Aggregate(org.String()+":0", tasks)
	if got := strings.Fields(batch.Headers()[headerLinks]); len(got) != 2 {
		t.Fatalf("batch links %v, want the two entries' trace contexts", batch.Headers())
	}

	var inside trace.SpanContext
	err := traced(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		inside = trace.SpanContextFromContext(ctx)
		return nil
	})).ProcessTask(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	var process *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, "process") && s.SpanContext.SpanID() == inside.SpanID() {
			s := s
			process = &s
		}
	}
	if process == nil {
		t.Fatal("no process span")
	}
	if process.SpanKind != trace.SpanKindConsumer || process.Parent.IsValid() || process.SpanContext.SpanID() != inside.SpanID() {
		t.Errorf("process span: kind %v parent %v, handler's span %v; want a consumer root span the handler runs in", process.SpanKind, process.Parent, inside)
	}
	linked := map[trace.SpanID]bool{}
	for _, l := range process.Links {
		linked[l.SpanContext.SpanID()] = l.SpanContext.TraceID() != (trace.TraceID{})
	}
	for _, s := range sends {
		if !linked[s.SpanID()] {
			t.Errorf("process span does not link to send span %s (links %v)", s.SpanID(), process.Links)
		}
	}

	// An entry task handled by itself continues its store's trace.
	err = traced(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		inside = trace.SpanContextFromContext(ctx)
		return nil
	})).ProcessTask(context.Background(), tasks[0])
	if err != nil {
		t.Fatal(err)
	}
	if inside.TraceID() != sends[0].TraceID() {
		t.Errorf("entry task handled alone: trace %s, want the store's %s", inside.TraceID(), sends[0].TraceID())
	}

	// Outside a traced call (a reconciler's re-enqueue) no span is made
	// and no header added.
	if _, _, h := startSend(context.Background(), Queue, TypeEmbedEntry); h != nil {
		t.Errorf("headers without a parent span: %v", h)
	}
}
