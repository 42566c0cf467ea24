package knowledge

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// completable maps the argument names this server completes to what they
// name. MCP's completion/complete refers to a prompt or a resource
// template, never to a tool (the go-sdk refuses any other reference), so the
// template variables are completed as such (id of knowledge://{id},
// taskId of knowledge://tasks/{taskId}), and a client completing a tool's
// argument sends the argument's name with the reference of any
// knowledge:// template: list_knowledge's tags and authorAgentId, and the
// id arguments of get_knowledge, supersede_knowledge and forget_knowledge.
var completable = map[string]string{
	"id":            domain.CompleteEntry,
	"oldId":         domain.CompleteEntry,
	"newId":         domain.CompleteEntry,
	"taskId":        domain.CompleteTask,
	"authorAgentId": domain.CompleteAgent,
	"tags":          domain.CompleteTag,
	"tag":           domain.CompleteTag,
}

// Completion is the server's completion/complete handler (set it as
// mcp.ServerOptions.CompletionHandler, which also declares the
// completions capability). The caller's org comes from the verified token
// in ctx, as for every call; the server's middleware has checked its
// knowledge:read scope. A reference this server has no values for (a
// prompt: it has none; another scheme; an argument it does not complete)
// answers no values, as MCP asks, rather than an error.
func Completion(svc Service, opts Options) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		empty := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
		p := req.Params
		if p == nil || p.Ref == nil || p.Ref.Type != "ref/resource" || !strings.HasPrefix(p.Ref.URI, uriScheme) {
			return empty, nil
		}
		what, ok := completable[p.Argument.Name]
		if !ok {
			return empty, nil
		}
		c, err := callerFrom(ctx)
		if err != nil {
			return nil, err
		}
		values, more, err := svc.Complete(ctx, c, what, p.Argument.Value)
		if err != nil {
			body, known := Describe(err)
			if !known {
				logFailure(ctx, opts.Logger, "completion failed", err, "completing", what)
			}
			setOutcome(ctx, body.Code, body.Field)
			data, _ := json.Marshal(ErrorPayload{Error: body})
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: body.Text(), Data: data}
		}
		setOutcome(ctx, "ok", "")
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, HasMore: more}}, nil
	}
}
