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

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// errCodeUnauthenticated is the JSON-RPC code of a request without a valid
// token in stdio mode (HTTP answers 401 before MCP sees the request).
const errCodeUnauthenticated = -32001

// httpPrincipal reads the principal the bearer middleware verified.
func httpPrincipal(_ context.Context, req mcp.Request) (*tenancy.Principal, error) {
	if extra := req.GetExtra(); extra != nil {
		if p := authn.FromTokenInfo(extra.TokenInfo); p != nil {
			return p, nil
		}
	}
	return nil, authn.ErrInvalidToken
}

// callMiddleware runs around every MCP method: it resolves the principal for
// the methods that touch data, filters the lists to what the token may use,
// refuses calls without the scope, and times, logs and counts tool calls and
// resource reads. Filtering here (one server, per-request lists) rather than
// one server per scope set keeps a single registry of tools and works the
// same over HTTP and stdio.
func (s *Server) callMiddleware(resolve principalFunc) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read", "completion/complete":
			case "prompts/list", "prompts/get":
				// The go-sdk answers these (an empty list) whether or not
				// the prompts capability is declared; this server has no
				// prompts and does not declare it, so it answers as for
				// any method it does not serve: -32601 (the SDK's JSON-RPC
				// layer words the message itself: method not found: "...").
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
			default:
				return next(ctx, method, req)
			}
			p, err := resolve(ctx, req)
			if errors.Is(err, authn.ErrInvalidToken) {
				return nil, &jsonrpc.Error{Code: errCodeUnauthenticated, Message: authn.ErrInvalidToken.Error()}
			}
			if err != nil {
				// authn.ErrUnavailable (stdio: the token store is down or
				// slow); its text already starts with the code.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: authn.ErrUnavailable.Error()}
			}
			ctx = authn.WithPrincipal(ctx, p)
			switch method {
			case "tools/list":
				res, err := next(ctx, method, req)
				if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
					kept := lr.Tools[:0:0]
					for _, t := range lr.Tools {
						if sc := kt.ScopeOf(t.Name); sc == "" || p.HasScope(sc) {
							kept = append(kept, t)
						}
					}
					lr.Tools = kept
				}
				return res, err
			case "resources/list", "resources/templates/list":
				res, err := next(ctx, method, req)
				if err == nil && !p.HasScope(kt.ResourceScope) {
					switch r := res.(type) {
					case *mcp.ListResourcesResult:
						r.Resources = []*mcp.Resource{}
					case *mcp.ListResourceTemplatesResult:
						r.ResourceTemplates = []*mcp.ResourceTemplate{}
					}
				}
				return res, err
			case "tools/call":
				return s.toolCall(ctx, p, method, req, next)
			case "completion/complete":
				return s.completion(ctx, p, method, req, next)
			default: // resources/read
				return s.resourceRead(ctx, p, method, req, next)
			}
		}
	}
}

// access is a call that touches data, as the scope check and the call's
// record see it: a tool call, a resource read or a completion.
type access struct {
	method string          // tools/call, resources/read or completion/complete
	name   string          // the tool, or the argument completed
	uri    string          // the resource read
	args   json.RawMessage // a tool's arguments, audited for the entry ids they name
}

// scope is the scope the call needs ("" for a tool this server does not
// define: the SDK answers it as unknown).
func (a access) scope() string {
	if a.method == "tools/call" {
		return kt.ScopeOf(a.name)
	}
	return kt.ResourceScope
}

// what names the call in a refusal.
func (a access) what() string {
	switch a.method {
	case "tools/call":
		return a.name
	case "resources/read":
		return "reading " + a.uri
	}
	return a.method
}

// label is the tool name or resource kind the call is counted, logged and
// audited under.
func (a access) label() string {
	switch a.method {
	case "tools/call":
		if kt.ScopeOf(a.name) == "" {
			return "unknown"
		}
		return a.name
	case "resources/read":
		if strings.HasPrefix(a.uri, "knowledge://") {
			return kt.KindOfURI(a.uri)
		}
		return "unknown"
	}
	return a.name
}

// refuseScope is the one scope check of a call that touches data, over
// HTTP and stdio alike: when the token lacks the call's scope it records
// the refusal (metrics, log, audit) like any answered call and returns the
// body to answer. HTTP runs it in scopeGate, before the MCP layer, to
// answer 403 with the OAuth challenge; the MCP middleware runs it again
// for stdio, where nothing came before (over HTTP it then finds nothing
// to refuse).
func (s *Server) refuseScope(ctx context.Context, p *tenancy.Principal, a access, start time.Time) (kt.ErrorBody, bool) {
	scope := a.scope()
	if scope == "" || p.HasScope(scope) {
		return kt.ErrorBody{}, false
	}
	body := scopeError(a.what(), scope, p)
	s.record(ctx, p, a, nil, kt.Outcome{Code: body.Code}, start)
	return body, true
}

// record counts, logs and audits one call by its outcome.
func (s *Server) record(ctx context.Context, p *tenancy.Principal, a access, res mcp.Result, o kt.Outcome, start time.Time) {
	d := time.Since(start)
	label := a.label()
	switch a.method {
	case "tools/call":
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: a.name, Arguments: a.args}}
		s.auditTool(p, label, req, res, o.Code, start, d)
		s.metrics.toolCalls.WithLabelValues(label, o.Code).Inc()
		s.metrics.toolDuration.WithLabelValues(label, o.Code).Observe(d.Seconds())
		s.logCall(ctx, "tool call", p, slog.String("tool", label), o, d)
	case "resources/read":
		s.auditResource(p, label, a.uri, res, o.Code, start, d)
		s.metrics.resReads.WithLabelValues(label, o.Code).Inc()
		s.metrics.resDuration.WithLabelValues(label, o.Code).Observe(d.Seconds())
		s.logCall(ctx, "resource read", p, slog.String("resource", label), o, d)
	default:
		// Completion is typing, not a call an operator follows: DEBUG,
		// neither counted nor audited.
		s.logCallAt(ctx, slog.LevelDebug, "completion", p, slog.String("argument", label), o, d)
	}
}

func (s *Server) toolCall(ctx context.Context, p *tenancy.Principal, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	params := req.(*mcp.CallToolRequest).Params
	a := access{method: method, name: params.Name, args: params.Arguments}
	start := time.Now()
	var o kt.Outcome
	var res mcp.Result
	var err error
	ctx, span := startCall(ctx, req, method, a.label(), p, toolAttrs(a.label())...)
	defer func() { endCall(span, o.Code) }()
	refuse := func(body kt.ErrorBody) {
		o = kt.Outcome{Code: body.Code}
		b, _ := json.Marshal(kt.ErrorPayload{Error: body})
		res = &mcp.CallToolResult{IsError: true, StructuredContent: json.RawMessage(b),
			Content: []mcp.Content{&mcp.TextContent{Text: body.Text()}}}
	}
	if body, refused := s.refuseScope(ctx, p, a, start); refused {
		refuse(body)
		return res, nil
	}
	if release, _, body := s.admit(ctx, p, a.scope()); body != nil {
		refuse(*body)
	} else {
		s.metrics.inflightCalls.Inc()
		res, err = s.run(ctx, &o, method, req, next, release)
		s.metrics.inflightCalls.Dec()
		if err != nil {
			o.Code = "protocol_error"
		} else if o.Code == "" {
			o.Code = "ok"
		}
	}
	s.record(ctx, p, a, res, o, start)
	return res, err
}

func (s *Server) resourceRead(ctx context.Context, p *tenancy.Principal, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	a := access{method: method, uri: req.(*mcp.ReadResourceRequest).Params.URI}
	start := time.Now()
	var o kt.Outcome
	var res mcp.Result
	var err error
	ctx, span := startCall(ctx, req, method, a.label(), p, attrResourceURI.String(a.uri), attrOperation.String(memoryOperation(kt.ResourceScope)))
	defer func() { endCall(span, o.Code) }()
	if body, refused := s.refuseScope(ctx, p, a, start); refused {
		o.Code = body.Code
		return nil, rpcError(kt.ErrorCodeForbidden, body)
	}
	if release, code, body := s.admit(ctx, p, a.scope()); body != nil {
		o, err = kt.Outcome{Code: body.Code}, rpcError(code, *body)
	} else {
		s.metrics.inflightCalls.Inc()
		res, err = s.run(ctx, &o, method, req, next, release)
		s.metrics.inflightCalls.Dec()
		if o.Code == "" {
			if err != nil {
				// The SDK's answer for a URI no template matches: in the
				// code of the client's protocol, as for a missing entry.
				o.Code = "not_found"
				err = kt.ResourceNotFound(req.(*mcp.ReadResourceRequest), a.uri)
			} else {
				o.Code = "ok"
			}
		}
	}
	s.record(ctx, p, a, res, o, start)
	return res, err
}

// completion answers completion/complete: the values are ids, titles' ids
// and tags of the caller's org, so it needs knowledge:read like a resource
// read, and counts as a read for the rate limits (a client may ask on
// every keystroke).
func (s *Server) completion(ctx context.Context, p *tenancy.Principal, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	a := access{method: method, name: req.(*mcp.CompleteRequest).Params.Argument.Name}
	start := time.Now()
	var o kt.Outcome
	var res mcp.Result
	var err error
	if body, refused := s.refuseScope(ctx, p, a, start); refused {
		o.Code = body.Code
		return nil, rpcError(kt.ErrorCodeForbidden, body)
	}
	if release, code, body := s.admit(ctx, p, a.scope()); body != nil {
		o, err = kt.Outcome{Code: body.Code}, rpcError(code, *body)
	} else {
		res, err = s.run(ctx, &o, method, req, next, release)
		if o.Code == "" {
			o.Code = "ok"
			if err != nil {
				o.Code = "protocol_error"
			}
		}
	}
	s.record(ctx, p, a, res, o, start)
	return res, err
}

// admit passes a call whose scope was checked through the caller's rate
// limit and the wait for a database connection: it returns release, or
// the refusal's body and its JSON-RPC code (for the methods that answer
// errors; a tool answers an isError result).
func (s *Server) admit(ctx context.Context, p *tenancy.Principal, scope string) (release func(), code int64, refusal *kt.ErrorBody) {
	if body, limited := s.rateLimit(ctx, p, scope); limited {
		return nil, kt.ErrorCodeRateLimited, &body
	}
	release, ok := s.dbSlot(ctx)
	if !ok {
		body := busyError()
		return nil, jsonrpc.CodeInternalError, &body
	}
	return release, 0, nil
}

// run runs an admitted call within Config.CallTimeout, its handler filling
// o, and then gives its database connection back.
func (s *Server) run(ctx context.Context, o *kt.Outcome, method string, req mcp.Request, next mcp.MethodHandler, release func()) (mcp.Result, error) {
	defer release()
	cctx, cancel := context.WithTimeout(kt.WithOutcome(ctx, o), s.cfg.CallTimeout)
	defer cancel()
	return next(cctx, method, req)
}

// rpcError is a refusal as the JSON-RPC error of a method that has no
// isError result, the body in its data.
func rpcError(code int64, body kt.ErrorBody) error {
	data, _ := json.Marshal(kt.ErrorPayload{Error: body})
	return &jsonrpc.Error{Code: code, Message: body.Text(), Data: data}
}

// rateLimit takes one call needing scope from the caller's rate limits
// (reads for knowledge:read, writes otherwise) and, when a limit is used
// up, returns the retryable rate_limited error to answer instead.
func (s *Server) rateLimit(ctx context.Context, p *tenancy.Principal, scope string) (kt.ErrorBody, bool) {
	if s.limiter == nil || scope == "" {
		return kt.ErrorBody{}, false
	}
	kind, noun := tenancy.RateWrite, "writes"
	if scope == tenancy.ScopeKnowledgeRead {
		kind, noun = tenancy.RateRead, "reads"
	}
	d := s.limiter.Allow(ctx, p.OrgID, p.AgentID, kind)
	if d.Allowed {
		return kt.ErrorBody{}, false
	}
	ms := max(d.RetryAfter.Milliseconds(), 1)
	whose := "this agent's"
	if d.Level == "org" {
		whose = "this org's (all its agents together)"
	}
	return kt.ErrorBody{
		Code:         string(errs.CodeRateLimited),
		Message:      fmt.Sprintf("%s limit of %d %s a minute is used up; retry in %d ms", whose, d.PerMinute, noun, ms),
		Retryable:    true,
		RetryAfterMs: ms,
	}, true
}

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
