package server

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
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
// the methods that touch data and filters the lists to what the token may
// use; the calls themselves then pass the gate (gateMiddleware, gate.go).
// Filtering here (one server, per-request lists) rather than one server per
// scope set keeps a single registry of tools and works the same over HTTP
// and stdio.
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
			// The stage clock of the call (nil unless the benchmark
			// turned it on): the token's look-up is its first stage.
			clock := s.deps.Stages.Current()
			ctx = stages.With(ctx, clock)
			t := time.Now()
			p, err := resolve(ctx, req)
			clock.Since(stages.Auth, t)
			if errors.Is(err, authn.ErrInvalidToken) {
				msg := authn.ErrInvalidToken.Error()
				if authn.Reason(err) != nil {
					msg = err.Error() // a genuine token's reason: its holder may learn it
				}
				return nil, &jsonrpc.Error{Code: errCodeUnauthenticated, Message: msg}
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
			default: // tools/call, resources/read, completion/complete
				return next(ctx, method, req) // the gate (gateMiddleware)
			}
		}
	}
}
