package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// path is one kind of call that touches data (a tool call, a resource
// read, a completion) as the gate needs to know it: what the call is, the
// scope it needs, how it answers and how it is recorded. It says nothing
// of the order a call goes through: that is the gate's alone, so a fourth
// kind of call is one more path, not one more copy of the order.
type path struct {
	method string
	// of reads the call out of the SDK's request.
	of func(req mcp.Request) call
	// scope is the scope a call needs ("" for a tool this server does not
	// define: the SDK answers it as unknown).
	scope func(c call) string
	// what names the call in a refusal; label is what it is counted,
	// logged, audited and traced under.
	what, label func(c call) string
	// stepUp: over HTTP a call refused for its scope is answered 403 with
	// the OAuth challenge, before the MCP layer (scopeGate), so that a
	// client can ask its provider for a token with more scopes.
	stepUp bool
	// spanAttrs are the attributes of the call's own span. A path without
	// them (a completion: typing, not a call an operator follows) has no
	// span and is not counted in mcp_inflight_calls.
	spanAttrs func(c call) []attribute.KeyValue
	// refused answers a call refused before it ran, code being the
	// JSON-RPC code for a path that answers refusals as errors.
	refused func(code int64, body kt.ErrorBody) (mcp.Result, error)
	// settle names the outcome of a call that ran, when its handler named
	// none or the SDK answered err, and returns the error to answer.
	settle func(o *kt.Outcome, c call, req mcp.Request, err error) error
	// record counts, logs and audits one answered call.
	record func(s *Server, ctx context.Context, p *tenancy.Principal, c call, res mcp.Result, o kt.Outcome, start time.Time, d time.Duration)
}

// call is one call that touches data, as the gate and its record see it.
type call struct {
	path *path
	name string          // the tool, or the argument completed
	uri  string          // the resource read
	args json.RawMessage // a tool's arguments, audited for the entry ids they name
}

func (c call) scope() string { return c.path.scope(c) }
func (c call) what() string  { return c.path.what(c) }
func (c call) label() string { return c.path.label(c) }

// paths are the calls that touch data, by method; every other method goes
// through the gate untouched.
var paths = map[string]*path{
	toolPath.method:       toolPath,
	resourcePath.method:   resourcePath,
	completionPath.method: completionPath,
}

// callOf is the call of a message with method and params as read from the
// wire (the HTTP scope gate's reading), or false for a method no path
// serves.
func callOf(method, name, uri string, args json.RawMessage) (call, bool) {
	pa := paths[method]
	if pa == nil {
		return call{}, false
	}
	return call{path: pa, name: name, uri: uri, args: args}, true
}

// toolPath: a tool call needs its tool's scope and answers every refusal
// as a tool error (isError), which clients show the model.
var toolPath = &path{
	method: "tools/call",
	of: func(req mcp.Request) call {
		p := req.(*mcp.CallToolRequest).Params
		return call{name: p.Name, args: p.Arguments}
	},
	scope: func(c call) string { return kt.ScopeOf(c.name) },
	what:  func(c call) string { return c.name },
	label: func(c call) string {
		if kt.ScopeOf(c.name) == "" {
			return "unknown"
		}
		return c.name
	},
	stepUp:    true,
	spanAttrs: func(c call) []attribute.KeyValue { return toolAttrs(c.label()) },
	refused: func(_ int64, body kt.ErrorBody) (mcp.Result, error) {
		b, _ := json.Marshal(kt.ErrorPayload{Error: body})
		return &mcp.CallToolResult{IsError: true, StructuredContent: json.RawMessage(b),
			Content: []mcp.Content{&mcp.TextContent{Text: body.Text()}}}, nil
	},
	settle: func(o *kt.Outcome, _ call, _ mcp.Request, err error) error {
		if err != nil {
			o.Code = "protocol_error"
		} else if o.Code == "" {
			o.Code = "ok"
		}
		return err
	},
	record: func(s *Server, ctx context.Context, p *tenancy.Principal, c call, res mcp.Result, o kt.Outcome, start time.Time, d time.Duration) {
		label := c.label()
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: c.name, Arguments: c.args}}
		s.auditTool(p, label, req, res, o.Code, start, d)
		s.metrics.toolCalls.WithLabelValues(label, o.Code).Inc()
		s.metrics.toolDuration.WithLabelValues(label, o.Code).Observe(d.Seconds())
		s.logCall(ctx, "tool call", p, slog.String("tool", label), o, d)
	},
}

// resourcePath: a resource read needs knowledge:read and answers its
// refusals as JSON-RPC errors (a read has no isError result).
var resourcePath = &path{
	method: "resources/read",
	of:     func(req mcp.Request) call { return call{uri: req.(*mcp.ReadResourceRequest).Params.URI} },
	scope:  func(call) string { return kt.ResourceScope },
	what:   func(c call) string { return "reading " + c.uri },
	label: func(c call) string {
		if strings.HasPrefix(c.uri, "knowledge://") {
			return kt.KindOfURI(c.uri)
		}
		return "unknown"
	},
	stepUp: true,
	spanAttrs: func(c call) []attribute.KeyValue {
		return []attribute.KeyValue{attrResourceURI.String(c.uri), attrOperation.String(memoryOperation(kt.ResourceScope))}
	},
	refused: func(code int64, body kt.ErrorBody) (mcp.Result, error) { return nil, rpcError(code, body) },
	settle: func(o *kt.Outcome, c call, req mcp.Request, err error) error {
		if o.Code != "" {
			return err
		}
		if err != nil {
			// The SDK's answer for a URI no template matches: in the code
			// of the client's protocol, as for a missing entry.
			o.Code = "not_found"
			return kt.ResourceNotFound(req.(*mcp.ReadResourceRequest), c.uri)
		}
		o.Code = "ok"
		return nil
	},
	record: func(s *Server, ctx context.Context, p *tenancy.Principal, c call, res mcp.Result, o kt.Outcome, start time.Time, d time.Duration) {
		label := c.label()
		s.auditResource(p, label, c.uri, res, o.Code, start, d)
		s.metrics.resReads.WithLabelValues(label, o.Code).Inc()
		s.metrics.resDuration.WithLabelValues(label, o.Code).Observe(d.Seconds())
		s.logCall(ctx, "resource read", p, slog.String("resource", label), o, d)
	},
}

// completionPath: completion/complete answers ids, titles' ids and tags of
// the caller's org, so it needs knowledge:read like a resource read, and
// counts as a read for the rate limits (a client may ask on every
// keystroke). Its refusals are JSON-RPC errors, over HTTP too.
var completionPath = &path{
	method:  "completion/complete",
	of:      func(req mcp.Request) call { return call{name: req.(*mcp.CompleteRequest).Params.Argument.Name} },
	scope:   func(call) string { return kt.ResourceScope },
	what:    func(call) string { return "completion/complete" },
	label:   func(c call) string { return c.name },
	refused: func(code int64, body kt.ErrorBody) (mcp.Result, error) { return nil, rpcError(code, body) },
	settle: func(o *kt.Outcome, _ call, _ mcp.Request, err error) error {
		if o.Code == "" {
			o.Code = "ok"
			if err != nil {
				o.Code = "protocol_error"
			}
		}
		return err
	},
	record: func(s *Server, ctx context.Context, p *tenancy.Principal, c call, _ mcp.Result, o kt.Outcome, _ time.Time, d time.Duration) {
		// Completion is typing, not a call an operator follows: DEBUG,
		// neither counted nor audited.
		s.logCallAt(ctx, slog.LevelDebug, "completion", p, slog.String("argument", c.label()), o, d)
	},
}

// gateMiddleware is the one gate of every call that touches data, over
// HTTP and stdio alike; callMiddleware, before it, has put the caller's
// principal in the context.
func (s *Server) gateMiddleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			pa := paths[method]
			if pa == nil {
				return next(ctx, method, req)
			}
			return s.gate(ctx, authn.PrincipalFrom(ctx), pa, method, req, next)
		}
	}
}

// gate takes one call through the one order: refuse it without its scope,
// admit it (rate limit, then a database connection), run it within
// Config.CallTimeout, record it (metrics, log line, audit record), in its
// span. A refusal at any step is recorded like an answered call.
func (s *Server) gate(ctx context.Context, p *tenancy.Principal, pa *path, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	c := pa.of(req)
	c.path = pa
	start := time.Now()
	clock := stages.From(ctx) // nil unless the benchmark's stage clock is on
	clock.Name(c.label())
	// What the answer need not wait for (the record of a store's answer,
	// the embeddings queue's hand-over) runs after it, on Server.later.
	ctx = knowledge.WithAfter(ctx, func(ctx context.Context, f func(context.Context)) {
		s.later.Run(func() { f(stages.With(ctx, clock.After())) })
	})
	clock.GateIn()
	defer clock.GateOut()
	var o kt.Outcome
	if pa.spanAttrs != nil {
		var span trace.Span
		ctx, span = startCall(ctx, req, method, c.label(), p, pa.spanAttrs(c)...)
		defer func() { endCall(span, o.Code) }()
	}
	if !scopeCheckedAtEdge(req, c) {
		if body, refused := s.refuseScope(ctx, p, c, start); refused {
			o.Code = body.Code
			return pa.refused(kt.ErrorCodeForbidden, body)
		}
	}
	var res mcp.Result
	var err error
	ctx, release, code, body := s.admit(ctx, p, c)
	if body != nil {
		o.Code = body.Code
		res, err = pa.refused(code, *body)
	} else {
		if pa.spanAttrs != nil {
			s.metrics.inflightCalls.Inc()
		}
		res, err = s.run(ctx, &o, method, req, next, release)
		if pa.spanAttrs != nil {
			s.metrics.inflightCalls.Dec()
		}
		err = pa.settle(&o, c, req, err)
	}
	t := time.Now()
	s.record(ctx, p, c, res, o, start)
	clock.Since(stages.Bookkeeping, t)
	if pa == toolPath {
		t = time.Now()
		res = encodeOnce(res)
		clock.Since(stages.Encode, t)
	}
	return res, err
}

// refuseScope is the one scope check of a call: when the token lacks the
// call's scope it records the refusal (metrics, log, audit) like any
// answered call and returns the body to answer. The gate runs it, but for
// the calls the HTTP scope gate has already run it on (stepUp paths, to
// answer 403 before the MCP layer), which the gate finds marked in the
// request's token info (scopeCheckedAtEdge).
func (s *Server) refuseScope(ctx context.Context, p *tenancy.Principal, c call, start time.Time) (kt.ErrorBody, bool) {
	scope := c.scope()
	if scope == "" || p.HasScope(scope) {
		return kt.ErrorBody{}, false
	}
	body := scopeError(c.what(), scope, p)
	s.record(ctx, p, c, nil, kt.Outcome{Code: body.Code}, start)
	return body, true
}

// record counts, logs and audits one call by its outcome, after its
// answer (Server.later): nothing of it is on the call's path but the
// hand-over. Its duration is taken now.
func (s *Server) record(ctx context.Context, p *tenancy.Principal, c call, res mcp.Result, o kt.Outcome, start time.Time) {
	d := time.Since(start)
	s.later.Run(func() { c.path.record(s, ctx, p, c, res, o, start, d) })
}

// admit passes a call whose scope was checked through the caller's rate
// limit and the wait for a database connection: it returns the call's
// context and release, or the refusal's body and its JSON-RPC code (for
// the paths that answer errors; a tool answers an isError result).
func (s *Server) admit(ctx context.Context, p *tenancy.Principal, c call) (_ context.Context, release func(), code int64, refusal *kt.ErrorBody) {
	clock, t := stages.From(ctx), time.Now()
	ctx, body, limited := s.rateLimit(ctx, p, c)
	clock.Since(stages.RateLimit, t)
	if limited {
		return ctx, nil, kt.ErrorCodeRateLimited, &body
	}
	t = time.Now()
	release, ok := s.dbSlot(ctx)
	clock.Since(stages.Admit, t)
	if !ok {
		body := busyError()
		return ctx, nil, jsonrpc.CodeInternalError, &body
	}
	return ctx, release, 0, nil
}

// run runs an admitted call within Config.CallTimeout, its handler filling
// o, and then gives its database connection back.
func (s *Server) run(ctx context.Context, o *kt.Outcome, method string, req mcp.Request, next mcp.MethodHandler, release func()) (mcp.Result, error) {
	defer release()
	cctx, cancel := context.WithTimeout(kt.WithOutcome(ctx, o), s.cfg.CallTimeout)
	defer cancel()
	clock := stages.From(ctx)
	clock.RunStart()
	defer clock.RunEnd()
	return next(cctx, method, req)
}

// rpcError is a refusal as the JSON-RPC error of a method that has no
// isError result, the body in its data.
func rpcError(code int64, body kt.ErrorBody) error {
	data, _ := json.Marshal(kt.ErrorPayload{Error: body})
	return &jsonrpc.Error{Code: code, Message: body.Text(), Data: data}
}

// rateLimit takes one call from the caller's rate limits (reads for a
// call needing knowledge:read, writes otherwise) and, when a limit is used
// up, returns the retryable rate_limited error to answer instead. A store
// with a client token has its idempotence record read in the same round
// trip (kt.StoreRecordKey), and what was read goes to the store in the
// returned context (knowledge.WithStoreRecord): one Redis round trip
// admits the call and answers the store's first question.
func (s *Server) rateLimit(ctx context.Context, p *tenancy.Principal, c call) (context.Context, kt.ErrorBody, bool) {
	scope := c.scope()
	if s.limiter == nil || scope == "" {
		return ctx, kt.ErrorBody{}, false
	}
	kind, noun := tenancy.RateWrite, "writes"
	if scope == tenancy.ScopeKnowledgeRead {
		kind, noun = tenancy.RateRead, "reads"
	}
	var read []string
	if key := kt.StoreRecordKey(c.name, c.args, p.OrgID, p.AgentID); key != "" {
		read = []string{key}
	}
	d := s.limiter.Allow(ctx, p.OrgID, p.AgentID, kind, read...)
	if d.Allowed {
		if len(read) > 0 {
			v, err := []byte(nil), errRecordUnread
			if d.Read != nil {
				v, err = d.Read[0], nil
			}
			ctx = knowledge.WithStoreRecord(ctx, read[0], v, err)
		}
		return ctx, kt.ErrorBody{}, false
	}
	ms := max(d.RetryAfter.Milliseconds(), 1)
	whose := "this agent's"
	if d.Level == "org" {
		whose = "this org's (all its agents together)"
	}
	return ctx, kt.ErrorBody{
		Code:         string(errs.CodeRateLimited),
		Message:      fmt.Sprintf("%s limit of %d %s a minute is used up; retry in %d ms", whose, d.PerMinute, noun, ms),
		Retryable:    true,
		RetryAfterMs: ms,
	}, true
}

// errRecordUnread: Redis did not answer the admission's round trip (the
// limiter let the call through unchecked), so the store goes on without
// its idempotence record, on Postgres' guard, rather than wait for Redis
// a second time.
var errRecordUnread = errors.New("redis did not answer the rate limits' round trip")

// dbSlot waits at most Config.DBWait for one of Deps.DBSlots (the size of
// the database pool): every call needs a connection, and without this a
// call beyond the pool would queue inside pgxpool for as long as the call's
// whole deadline. Past the wait the call is answered "unavailable" at
// once, so the wait for a database connection is bounded by DBWait, not
// MCP_CALL_TIMEOUT. With DBSlots 0 there is no bound (release is a no-op).
func (s *Server) dbSlot(ctx context.Context) (release func(), ok bool) {
	if s.dbSlots == nil {
		return func() {}, true
	}
	t := time.NewTimer(s.cfg.DBWait)
	defer t.Stop()
	select {
	case s.dbSlots <- struct{}{}:
		return func() { <-s.dbSlots }, true
	case <-t.C:
		s.metrics.unavailable.WithLabelValues("db_pool").Inc()
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

// busyError answers a call that found no database connection in time.
func busyError() kt.ErrorBody {
	return kt.ErrorBody{
		Code:         string(errs.CodeUnavailable),
		Message:      "every database connection of this server is busy; retry later",
		Retryable:    true,
		RetryAfterMs: 1000,
	}
}

// scopeError is the answer to a call the token lacks the scope for.
func scopeError(what, scope string, p *tenancy.Principal) kt.ErrorBody {
	return kt.ErrorBody{
		Code:          string(errs.CodeForbidden),
		Message:       "insufficient_scope: " + what + " needs the " + scope + " scope; this token has " + strings.Join(p.Scopes, ", ") + " (ask an operator for a token with " + scope + ")",
		RequiredScope: scope,
	}
}

// logCall logs one call: who, what, outcome, how long. Never a token, an
// argument or a body.
func (s *Server) logCall(ctx context.Context, msg string, p *tenancy.Principal, what slog.Attr, o kt.Outcome, d time.Duration) {
	s.logCallAt(ctx, slog.LevelInfo, msg, p, what, o, d)
}

// logCallAt is logCall at level, raised to WARN when the call failed on
// the server's side.
func (s *Server) logCallAt(ctx context.Context, level slog.Level, msg string, p *tenancy.Principal, what slog.Attr, o kt.Outcome, d time.Duration) {
	if o.Code == string(errs.CodeUnavailable) || o.Code == string(errs.CodeInternal) || o.Code == "protocol_error" {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("org", p.OrgID.String()),
		slog.String("agent", p.AgentID.String()),
		what,
		slog.String("outcome", o.Code),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	}
	if o.Field != "" {
		attrs = append(attrs, slog.String("field", o.Field))
	}
	s.logger.LogAttrs(ctx, level, msg, attrs...)
}
