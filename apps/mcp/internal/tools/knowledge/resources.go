package knowledge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/packages/errs"
	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// Resource URIs.
const (
	uriScheme        = "knowledge://"
	EntryTemplate    = "knowledge://{id}"
	TaskTemplate     = "knowledge://tasks/{taskId}"
	resourceMIMEType = "application/json"
)

// Resource kinds, as logged and counted.
const (
	ResourceEntry = "knowledge_entry"
	ResourceTask  = "task_knowledge"
)

// ErrorCodeForbidden is the JSON-RPC error code of a request refused for a
// missing scope (a server-defined code; MCP defines none for it).
const ErrorCodeForbidden = -32003

// ErrorCodeRateLimited is the JSON-RPC error code of a resource read refused
// by a rate limit (data.error carries code rate_limited and retryAfterMs).
const ErrorCodeRateLimited = -32029

// TaskKnowledgeResult is the content of knowledge://tasks/{taskId}.
type TaskKnowledgeResult struct {
	TaskID  uuid.UUID       `json:"taskId"`
	Entries []TaskEntryLink `json:"entries"`
}

// TaskEntryLink is one entry linked to a task, with the URI to read it.
type TaskEntryLink struct {
	URI string `json:"uri"`
	domain.TaskEntry
}

func (t *toolset) registerResources(srv *mcp.Server) {
	h := t.readResource
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: EntryTemplate,
		Name:        "knowledge-entry",
		Title:       "Knowledge entry",
		Description: "One whole knowledge entry of your organisation as JSON: title, full body, tags, confidence, expiresAt, author agent, timestamps, embeddingStatus, supersession (supersededBy: the direct successor; headId: the current head of its chain, which you should prefer) and task links. Use it to read the full body of a search hit. Needs knowledge:read.",
		MIMEType:    resourceMIMEType,
	}, h)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: TaskTemplate,
		Name:        "task-knowledge",
		Title:       "Knowledge linked to a task",
		Description: "The entries linked to an orchestration task of your organisation as JSON, each with its link kind (references: it informed the task; produced: the task produced it), title, tags, confidence, embeddingStatus, supersession and its knowledge:// URI. Needs knowledge:read.",
		MIMEType:    resourceMIMEType,
	}, h)
	t.registerStats(srv) // knowledge://stats (stats.go)
}

// KindOfURI says which resource a URI names (for logs and metrics).
func KindOfURI(uri string) string {
	if uri == StatsURI {
		return ResourceStats
	}
	if strings.HasPrefix(uri, uriScheme+"tasks/") {
		return ResourceTask
	}
	return ResourceEntry
}

// readResource serves both templates: which one matched does not matter,
// the URI's shape decides, so template matching order cannot route a task
// URI to the entry reader.
func (t *toolset) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	out, err := t.read(ctx, uri)
	if err != nil {
		return nil, t.resourceError(ctx, req, uri, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	setOutcome(ctx, "ok", "")
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: resourceMIMEType, Text: string(b)}}}, nil
}

// read answers a resource read; the server's middleware has checked the
// token's scope (ResourceScope), as for every call.
func (t *toolset) read(ctx context.Context, uri string) (any, error) {
	c, err := callerFrom(ctx)
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(uri, uriScheme)
	if !ok {
		return nil, errs.InvalidArgument("uri", "must start with %s", uriScheme)
	}
	if taskID, ok := strings.CutPrefix(rest, "tasks/"); ok {
		id, err := parseID("taskId", taskID)
		if err != nil {
			return nil, err
		}
		entries, err := t.svc.TaskKnowledge(ctx, c, id, "")
		if err != nil {
			return nil, err
		}
		res := TaskKnowledgeResult{TaskID: id, Entries: make([]TaskEntryLink, 0, len(entries))}
		for _, e := range entries {
			res.Entries = append(res.Entries, TaskEntryLink{URI: uriScheme + e.ID.String(), TaskEntry: e})
		}
		return res, nil
	}
	return t.get(ctx, c, &GetArgs{ID: rest}) // get_knowledge answers the same
}

// resourceError maps an error to the JSON-RPC error of resources/read: not
// found is the MCP resource-not-found error (the same for another org's
// ids), the rest carry our code in the message and data.
func (t *toolset) resourceError(ctx context.Context, req *mcp.ReadResourceRequest, uri string, err error) error {
	body, known := Describe(err)
	if !known {
		logFailure(ctx, t.logger, "resource read failed", err, "resource", KindOfURI(uri))
	}
	setOutcome(ctx, body.Code, body.Field)
	if body.Code == string(errs.CodeNotFound) {
		return ResourceNotFound(req, uri)
	}
	data, _ := json.Marshal(ErrorPayload{Error: body})
	code := int64(jsonrpc.CodeInternalError)
	switch {
	case errors.Is(err, errs.ErrInvalidArgument):
		code = jsonrpc.CodeInvalidParams
	case errors.Is(err, errs.ErrForbidden):
		code = ErrorCodeForbidden
	}
	return &jsonrpc.Error{Code: code, Message: body.Text(), Data: data}
}

// The resource-not-found codes of MCP: -32002 up to protocol 2025-11-25
// (its spec: "Resource not found: -32002"), -32602 (invalid params) from
// 2026-07-28 on (SEP-2164, which asks clients to accept -32002 too).
const (
	codeResourceNotFoundLegacy    = -32002
	protocolInvalidParamsNotFound = "2026-07-28"
)

// ResourceNotFound is MCP's resource-not-found error in the code of the
// protocol version the client negotiated, with the URI in data as both
// versions ask. The go-sdk answers -32602 whatever the version.
func ResourceNotFound(req *mcp.ReadResourceRequest, uri string) error {
	code := int64(jsonrpc.CodeInvalidParams)
	if req != nil && req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion != "" && ip.ProtocolVersion < protocolInvalidParamsNotFound {
			code = codeResourceNotFoundLegacy
		}
	}
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &jsonrpc.Error{Code: code, Message: "Resource not found: no resource of your organisation has this URI", Data: data}
}
