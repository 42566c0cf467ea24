package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// tracer starts the span of every tool call and resource read. Without
// tracing configured (packages/tracing) it is OpenTelemetry's no-op.
var tracer = otel.Tracer("github.com/agentfleet/orchestrator/apps/mcp")

// Span attributes: the MCP semantic conventions (mcp.method.name,
// gen_ai.tool.name, mcp.resource.uri, error.type) and the GenAI memory
// ones (gen_ai.operation.name, gen_ai.memory.store.id, gen_ai.agent.id);
// knowledge.outcome is ours: the call's outcome code, "ok" included.
// Never an argument, a query, a body or a token.
const (
	attrMethod      = attribute.Key("mcp.method.name")
	attrTool        = attribute.Key("gen_ai.tool.name")
	attrResourceURI = attribute.Key("mcp.resource.uri")
	attrOperation   = attribute.Key("gen_ai.operation.name")
	attrStore       = attribute.Key("gen_ai.memory.store.id")
	attrAgent       = attribute.Key("gen_ai.agent.id")
	attrErrorType   = attribute.Key("error.type")
	attrOutcome     = attribute.Key("knowledge.outcome")
)

// memoryOperation is the GenAI memory operation a call needing scope is:
// reads search the store, writes update it, deletions delete from it.
func memoryOperation(scope string) string {
	switch scope {
	case tenancy.ScopeKnowledgeRead:
		return "search_memory"
	case tenancy.ScopeKnowledgeDelete, tenancy.ScopeKnowledgeDeleteOthers:
		return "delete_memory"
	case "":
		return ""
	}
	return "update_memory"
}

// startCall starts the server span of one call: a child of the caller's
// trace when the HTTP request carries a W3C traceparent.
func startCall(ctx context.Context, req mcp.Request, method, target string, p *tenancy.Principal, extra ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(ex.Header))
		}
	}
	ctx, span := tracer.Start(ctx, method+" "+target, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(attrMethod.String(method),
			attrStore.String(p.OrgID.String()), attrAgent.String(p.AgentID.String()))
		span.SetAttributes(extra...)
	}
	return ctx, span
}

// toolAttrs are a tool call's own attributes.
func toolAttrs(name string) []attribute.KeyValue {
	a := []attribute.KeyValue{attrTool.String(name)}
	if op := memoryOperation(kt.ScopeOf(name)); op != "" {
		a = append(a, attrOperation.String(op))
	}
	return a
}

// endCall records the outcome and ends the span. Refusals the caller can
// fix (invalid_argument, not_found, forbidden, ...) are not the server's
// errors and leave the status unset, as HTTP 4xx do; unavailable, internal
// and protocol errors set it to Error.
func endCall(span trace.Span, code string) {
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(code))
		if code != "ok" {
			span.SetAttributes(attrErrorType.String(code))
		}
		if code == "unavailable" || code == "internal" || code == "protocol_error" {
			span.SetStatus(codes.Error, code)
		}
	}
	span.End()
}
