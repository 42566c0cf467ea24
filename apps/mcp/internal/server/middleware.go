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
	domain "github.com/agentfleet/orchestrator/packages/knowledge"
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

func (s *Server) toolCall(ctx context.Context, p *tenancy.Principal, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	name := req.(*mcp.CallToolRequest).Params.Name
	scope := kt.ScopeOf(name)
	label := name
	if scope == "" {
		label = "unknown"
	}
	start := time.Now()
	var o kt.Outcome
	var res mcp.Result
	var err error
	ctx, span := startCall(ctx, req, method, label, p, toolAttrs(label)...)
	defer func() { endCall(span, o.Code) }()
	refuse := func(body kt.ErrorBody) {
		o = kt.Outcome{Code: body.Code}
		b, _ := json.Marshal(kt.ErrorPayload{Error: body})
		res = &mcp.CallToolResult{IsError: true, StructuredContent: json.RawMessage(b),
			Content: []mcp.Content{&mcp.TextContent{Text: body.Text()}}}
	}
	if scope != "" && !p.HasScope(scope) {
		refuse(scopeError(name, scope, p))
	} else if body, limited := s.rateLimit(ctx, p, scope); limited {
		refuse(body)
	} else if release, ok := s.dbSlot(ctx); !ok {
		refuse(busyError())
	} else {
		s.metrics.inflightCalls.Inc()
		cctx, cancel := context.WithTimeout(kt.WithOutcome(ctx, &o), s.cfg.CallTimeout)
		res, err = next(cctx, method, req)
		cancel()
		release()
		s.metrics.inflightCalls.Dec()
		if err != nil {
			o.Code = "protocol_error"
		} else if o.Code == "" {
			o.Code = "ok"
		}
	}
	d := time.Since(start)
	s.auditTool(p, label, req, res, o.Code, start, d)
	s.metrics.toolCalls.WithLabelValues(label, o.Code).Inc()
	s.metrics.toolDuration.WithLabelValues(label, o.Code).Observe(d.Seconds())
	s.logCall(ctx, "tool call", p, slog.String("tool", label), o, d)
	return res, err
}

func (s *Server) resourceRead(ctx context.Context, p *tenancy.Principal, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	uri := req.(*mcp.ReadResourceRequest).Params.URI
	kind := "unknown"
	if strings.HasPrefix(uri, "knowledge://") {
		kind = kt.KindOfURI(uri)
	}
	start := time.Now()
	var o kt.Outcome
	var res mcp.Result
	var err error
	ctx, span := startCall(ctx, req, method, kind, p, attrResourceURI.String(uri), attrOperation.String(memoryOperation(kt.ResourceScope)))
	defer func() { endCall(span, o.Code) }()
	if !p.HasScope(kt.ResourceScope) {
		body := scopeError("reading "+uri, kt.ResourceScope, p)
		o = kt.Outcome{Code: body.Code}
		data, _ := json.Marshal(kt.ErrorPayload{Error: body})
		err = &jsonrpc.Error{Code: kt.ErrorCodeForbidden, Message: body.Text(), Data: data}
	} else if body, limited := s.rateLimit(ctx, p, kt.ResourceScope); limited {
		o = kt.Outcome{Code: body.Code}
		data, _ := json.Marshal(kt.ErrorPayload{Error: body})
		err = &jsonrpc.Error{Code: kt.ErrorCodeRateLimited, Message: body.Text(), Data: data}
	} else if release, ok := s.dbSlot(ctx); !ok {
		body := busyError()
		o = kt.Outcome{Code: body.Code}
		data, _ := json.Marshal(kt.ErrorPayload{Error: body})
		err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: body.Text(), Data: data}
	} else {
		s.metrics.inflightCalls.Inc()
		cctx, cancel := context.WithTimeout(kt.WithOutcome(ctx, &o), s.cfg.CallTimeout)
		res, err = next(cctx, method, req)
		cancel()
		release()
		s.metrics.inflightCalls.Dec()
		if o.Code == "" {
			if err != nil {
				// The SDK's answer for a URI no template matches: in the
				// code of the client's protocol, as for a missing entry.
				o.Code = "not_found"
				err = kt.ResourceNotFound(req.(*mcp.ReadResourceRequest), uri)
			} else {
				o.Code = "ok"
			}
		}
	}
	d := time.Since(start)
	s.auditResource(p, kind, uri, res, o.Code, start, d)
	s.metrics.resReads.WithLabelValues(kind, o.Code).Inc()
	s.metrics.resDuration.WithLabelValues(kind, o.Code).Observe(d.Seconds())
	s.logCall(ctx, "resource read", p, slog.String("resource", kind), o, d)
	return res, err
}

// completion answers completion/complete: the values are ids, titles' ids
// and tags of the caller's org, so it needs knowledge:read like a resource
// read, and counts as a read for the rate limits (a client may ask on
// every keystroke). It is logged at DEBUG, not INFO: it is typing, not a
// call an operator follows.
func (s *Server) completion(ctx context.Context, p *tenancy.Principal, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	start := time.Now()
	var o kt.Outcome
	var res mcp.Result
	var err error
	refuse := func(code int64, body kt.ErrorBody) {
		o = kt.Outcome{Code: body.Code}
		data, _ := json.Marshal(kt.ErrorPayload{Error: body})
		err = &jsonrpc.Error{Code: code, Message: body.Text(), Data: data}
	}
	if !p.HasScope(kt.ResourceScope) {
		refuse(kt.ErrorCodeForbidden, scopeError("completion/complete", kt.ResourceScope, p))
	} else if body, limited := s.rateLimit(ctx, p, kt.ResourceScope); limited {
		refuse(kt.ErrorCodeRateLimited, body)
	} else if release, ok := s.dbSlot(ctx); !ok {
		refuse(jsonrpc.CodeInternalError, busyError())
	} else {
		cctx, cancel := context.WithTimeout(kt.WithOutcome(ctx, &o), s.cfg.CallTimeout)
		res, err = next(cctx, method, req)
		cancel()
		release()
		if o.Code == "" {
			o.Code = "ok"
			if err != nil {
				o.Code = "protocol_error"
			}
		}
	}
	s.logCallAt(ctx, slog.LevelDebug, "completion", p, slog.String("argument", req.(*mcp.CompleteRequest).Params.Argument.Name), o, time.Since(start))
	return res, err
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
		Code:         string(domain.CodeRateLimited),
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
		Code:         string(domain.CodeUnavailable),
		Message:      "every database connection of this server is busy; retry later",
		Retryable:    true,
		RetryAfterMs: 1000,
	}
}

// scopeError is the answer to a call the token lacks the scope for.
func scopeError(what, scope string, p *tenancy.Principal) kt.ErrorBody {
	return kt.ErrorBody{
		Code:          string(domain.CodeForbidden),
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
	if o.Code == string(domain.CodeUnavailable) || o.Code == "protocol_error" {
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

func slogTool(name string) slog.Attr     { return slog.String("tool", name) }
func slogResource(kind string) slog.Attr { return slog.String("resource", kind) }
