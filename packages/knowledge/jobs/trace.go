package jobs

import (
	"context"
	"strings"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The trace of a call that enqueues an embedding reaches the worker through
// the asynq task's headers: an entry task carries the W3C trace context of
// its "send" span (traceparent, tracestate); the aggregator folds the
// entry tasks of many calls into one batch, whose headers list their trace
// contexts (headerLinks), and the batch's "process" span links to each
// (the messaging semantic conventions' way for a batch). Without tracing
// configured the headers are empty and every span is OpenTelemetry's no-op.

var tracer = otel.Tracer("github.com/agentfleet/orchestrator/packages/knowledge/jobs")

// headerLinks is the batch header with the traceparents of its entries'
// producers, space-separated.
const headerLinks = "trace-links"

// maxLinks bounds the links of one batch (a batch holds at most
// WorkerOptions.BatchSize entries, 32 by default).
const maxLinks = 128

const messagingSystem = "asynq"

// startSend starts the producer span of one enqueue and returns the
// headers that carry it (nil when nothing is traced).
func startSend(ctx context.Context, queue, taskType string) (context.Context, trace.Span, map[string]string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// Not within a traced call (a reconciler's re-enqueue, or
		// tracing off): no trace of its own.
		return ctx, trace.SpanFromContext(ctx), nil
	}
	ctx, span := tracer.Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return ctx, span, nil
	}
	span.SetAttributes(
		attribute.String("messaging.system", messagingSystem),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.destination.name", queue),
		attribute.String("knowledge.task.type", taskType),
	)
	h := map[string]string{}
	otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(h))
	if len(h) == 0 {
		return ctx, span, nil
	}
	return ctx, span, h
}

func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// batchHeaders collects the trace contexts of the tasks folded into one
// batch.
func batchHeaders(tasks []*asynq.Task) map[string]string {
	var links []string
	for _, t := range tasks {
		if tp := t.Headers()["traceparent"]; tp != "" && len(links) < maxLinks && !strings.ContainsAny(tp, " ") {
			links = append(links, tp)
		}
	}
	if len(links) == 0 {
		return nil
	}
	return map[string]string{headerLinks: strings.Join(links, " ")}
}

// traced is the worker's middleware: a consumer span per task, a child of
// the enqueuing call's trace for a task handled by itself, and linked to
// every enqueuing call for a batch.
func traced(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		queue, _ := asynq.GetQueueName(ctx)
		h := t.Headers()
		prop := otel.GetTextMapPropagator()
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
		if len(h) > 0 {
			ctx = prop.Extract(ctx, propagation.MapCarrier(h))
		}
		if v := h[headerLinks]; v != "" {
			var links []trace.Link
			for tp := range strings.FieldsSeq(v) {
				sc := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
				if sc.IsValid() {
					links = append(links, trace.Link{SpanContext: sc})
				}
			}
			opts = append(opts, trace.WithLinks(links...), trace.WithNewRoot())
		}
		ctx, span := tracer.Start(ctx, "process "+queue, opts...)
		if span.IsRecording() {
			id, _ := asynq.GetTaskID(ctx)
			retry, _ := asynq.GetRetryCount(ctx)
			span.SetAttributes(
				attribute.String("messaging.system", messagingSystem),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.destination.name", queue),
				attribute.String("messaging.message.id", id),
				attribute.String("knowledge.task.type", t.Type()),
				attribute.Int("knowledge.task.retry", retry),
			)
			if jobs, err := decodeJobs(t); err == nil {
				span.SetAttributes(attribute.Int("messaging.batch.message_count", len(jobs)))
			}
		}
		err := next.ProcessTask(ctx, t)
		endSpan(span, err)
		return err
	})
}
