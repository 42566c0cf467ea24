package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
	"github.com/agentfleet/orchestrator/packages/errs"
	domain "github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Service is what the tools need from the knowledge domain.
type Service interface {
	Store(ctx context.Context, c domain.Caller, in domain.StoreInput) (*domain.StoreResult, error)
	Search(ctx context.Context, c domain.Caller, in domain.SearchInput) (*domain.SearchResult, error)
	Supersede(ctx context.Context, c domain.Caller, oldID, newID uuid.UUID) (*domain.SupersedeResult, error)
	Correct(ctx context.Context, c domain.Caller, oldID uuid.UUID, replacement domain.StoreInput) (*domain.CorrectResult, error)
	Get(ctx context.Context, c domain.Caller, id uuid.UUID) (*domain.Entry, error)
	GetBySource(ctx context.Context, c domain.Caller, source string) (*domain.Entry, error)
	List(ctx context.Context, c domain.Caller, in domain.ListInput) (*domain.ListResult, error)
	Forget(ctx context.Context, c domain.Caller, id uuid.UUID, reason string, othersAllowed bool) (*domain.ForgetResult, error)
	TaskKnowledge(ctx context.Context, c domain.Caller, taskID uuid.UUID, kind domain.LinkKind) ([]domain.TaskEntry, error)
	Complete(ctx context.Context, c domain.Caller, what, prefix string) ([]string, bool, error)
	Link(ctx context.Context, c domain.Caller, in domain.LinkInput) (*domain.RelationChange, error)
	Unlink(ctx context.Context, c domain.Caller, fromID, toID uuid.UUID, typ string) (*domain.RelationChange, error)
	Relations(ctx context.Context, c domain.Caller, in domain.RelationsInput) (*domain.RelationsResult, error)
	StoreDocument(ctx context.Context, c domain.Caller, in domain.DocumentInput) (*domain.DocumentResult, error)
	UploadStart(ctx context.Context, c domain.Caller, in domain.UploadStartInput) (*domain.UploadStartResult, error)
	UploadAppend(ctx context.Context, c domain.Caller, in domain.UploadAppendInput) (*domain.UploadAppendResult, error)
	UploadFinish(ctx context.Context, c domain.Caller, in domain.UploadFinishInput) (*domain.DocumentResult, error)
}

// Tool names.
const (
	ToolStore         = "store_knowledge"
	ToolSearch        = "search_knowledge"
	ToolSupersede     = "supersede_knowledge"
	ToolGet           = "get_knowledge"
	ToolList          = "list_knowledge"
	ToolForget        = "forget_knowledge"
	ToolLink          = "link_knowledge"
	ToolUnlink        = "unlink_knowledge"
	ToolRelations     = "list_relations"
	ToolStoreDocument = "store_document"

	ToolUploadStart  = "document_upload_start"
	ToolUploadAppend = "document_upload_append"
	ToolUploadFinish = "document_upload_finish"
)

// toolScopes maps every tool to the scope it needs. The server checks it,
// once, before a call reaches a handler (HTTP and stdio alike); handlers
// do not check it again.
var toolScopes = map[string]string{
	ToolStore:         tenancy.ScopeKnowledgeWrite,
	ToolSearch:        tenancy.ScopeKnowledgeRead,
	ToolSupersede:     tenancy.ScopeKnowledgeWrite,
	ToolGet:           tenancy.ScopeKnowledgeRead,
	ToolList:          tenancy.ScopeKnowledgeRead,
	ToolForget:        tenancy.ScopeKnowledgeDelete,
	ToolLink:          tenancy.ScopeKnowledgeWrite,
	ToolUnlink:        tenancy.ScopeKnowledgeWrite,
	ToolRelations:     tenancy.ScopeKnowledgeRead,
	ToolStoreDocument: tenancy.ScopeKnowledgeWrite,

	ToolUploadStart:  tenancy.ScopeKnowledgeWrite,
	ToolUploadAppend: tenancy.ScopeKnowledgeWrite,
	ToolUploadFinish: tenancy.ScopeKnowledgeWrite,
}

// largeBodyTools are the tools whose calls may carry a request body up to
// the server's larger limit for documents (MCP_MAX_DOCUMENT_BODY_BYTES)
// instead of MCP_MAX_BODY_BYTES.
var largeBodyTools = map[string]bool{
	ToolStoreDocument: true,
	// A part of an upload is as large as a document of store_document.
	ToolUploadAppend: true,
}

// LargeBody says whether a call of tool may carry a document-sized body.
func LargeBody(tool string) bool { return largeBodyTools[tool] }

// ResourceScope is the scope every resource read needs.
const ResourceScope = tenancy.ScopeKnowledgeRead

// ScopeOf returns the scope a tool needs, or "" for a tool this package does
// not define.
func ScopeOf(tool string) string { return toolScopes[tool] }

// Options configure Register.
type Options struct {
	Logger *slog.Logger
}

// Register adds the tools and resources to srv.
func Register(srv *mcp.Server, svc Service, opts Options) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	t := &toolset{svc: svc, logger: opts.Logger}
	addTool(srv, t, storeTool(), t.store)
	addTool(srv, t, searchTool(), t.search)
	addTool(srv, t, supersedeTool(), t.supersede)
	addTool(srv, t, getTool(), t.get)
	addTool(srv, t, listTool(), t.list)
	addTool(srv, t, forgetTool(), t.forget)
	addTool(srv, t, linkTool(), t.link)
	addTool(srv, t, unlinkTool(), t.unlink)
	addTool(srv, t, relationsTool(), t.relations)
	addTool(srv, t, documentTool(), t.storeDocument)
	addTool(srv, t, uploadStartTool(), t.uploadStart)
	addTool(srv, t, uploadAppendTool(), t.uploadAppend)
	addTool(srv, t, uploadFinishTool(), t.uploadFinish)
	t.registerResources(srv)
}

type toolset struct {
	svc    Service
	logger *slog.Logger
}

// Outcome is filled in by a tool or resource handler so the server's
// middleware can log and count the call by its result.
type Outcome struct {
	Code  string // "ok", "skipped" (store_knowledge with ifSimilar: skip stored nothing) or an error code
	Field string // the argument at fault, if any
}

type outcomeKey struct{}

// WithOutcome returns ctx with o to be filled in by the handler.
func WithOutcome(ctx context.Context, o *Outcome) context.Context {
	return context.WithValue(ctx, outcomeKey{}, o)
}

func setOutcome(ctx context.Context, code, field string) {
	if o, ok := ctx.Value(outcomeKey{}).(*Outcome); ok {
		o.Code, o.Field = code, field
	}
}

// callerFrom returns the caller of the verified token in ctx.
func callerFrom(ctx context.Context) (domain.Caller, error) {
	p := authn.PrincipalFrom(ctx)
	if p == nil {
		// The server always sets a principal; reaching this is a wiring bug.
		return domain.Caller{}, &errs.Error{Code: errs.CodeForbidden, Message: "no verified token for this call"}
	}
	return domain.Caller{OrgID: p.OrgID, AgentID: p.AgentID}, nil
}

// handler is a typed tool handler: it gets the caller and the decoded
// arguments, turns them into the domain's input (parsing UUIDs and
// date-times) and returns the structured result.
type handler[In, Out any] func(ctx context.Context, c domain.Caller, in *In) (Out, error)

// addTool registers a tool whose arguments decode into In. The go-sdk's own
// schema validation is not used (mcp.Server.AddTool, not mcp.AddTool): the
// edge decodes strictly (JSON types, unknown properties, UUIDs, date-times)
// and the domain rules on the values, so every refusal has our code and
// names the argument. The schema is what clients see; its limits and the
// descriptions that state them are built from the domain's constants.
//
// The schema is handed to the go-sdk already marshaled: on every tools/call
// of a client speaking a protocol version with standard headers, the go-sdk
// marshals the tool's input schema again to look for x-mcp-header
// annotations, and marshaling a *jsonschema.Schema by reflection was 0.17 s
// of the 0.67 s the MCP layer itself spent in BenchmarkMCPEndToEnd (pprof).
func addTool[In, Out any](srv *mcp.Server, t *toolset, tool *mcp.Tool, h handler[In, Out]) {
	schema := tool.InputSchema.(*jsonschema.Schema)
	tool.InputSchema = rawSchema(tool.Name, schema)
	out, ok := tool.OutputSchema.(*jsonschema.Schema)
	if !ok {
		out = outputSchema[Out]()
	}
	tool.OutputSchema = rawSchema(tool.Name, out)
	srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		clock, at := stages.From(ctx), time.Now()
		in, err := decodeArgs[In](req.Params.Arguments, schema)
		clock.Since(stages.Decode, at)
		var out Out
		if err == nil {
			var c domain.Caller
			if c, err = callerFrom(ctx); err == nil {
				out, err = h(ctx, c, in)
			}
		}
		if err != nil {
			return t.errorResult(ctx, tool.Name, err), nil
		}
		if o, ok := ctx.Value(outcomeKey{}).(*Outcome); ok && o.Code == "" {
			o.Code = "ok" // unless the handler said more (store_knowledge: "skipped")
		}
		at = time.Now()
		b, err := json.Marshal(out)
		clock.Since(stages.Encode, at)
		if err != nil {
			return nil, fmt.Errorf("marshal result: %w", err)
		}
		return &mcp.CallToolResult{
			StructuredContent: json.RawMessage(b),
			Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		}, nil
	})
}

// decodeArgs decodes raw strictly into a new In.
func decodeArgs[In any](raw json.RawMessage, s *jsonschema.Schema) (*In, error) {
	in := new(In)
	if len(raw) == 0 || string(raw) == "null" {
		return in, nil
	}
	if err := checkRawText("", raw); err != nil {
		return nil, err
	}
	// UseNumber: a number too large for float64 (1e400) is valid JSON; the
	// typed decode below names the argument it does not fit.
	var generic any
	gdec := json.NewDecoder(bytes.NewReader(raw))
	gdec.UseNumber()
	if err := gdec.Decode(&generic); err != nil {
		return nil, errs.InvalidArgument("arguments", "are not valid JSON")
	}
	if _, ok := generic.(map[string]any); !ok {
		return nil, errs.InvalidArgument("arguments", "must be a JSON object")
	}
	if err := unknownProperty("", generic, s); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return nil, decodeError(err, s)
	}
	if dec.More() {
		return nil, errs.InvalidArgument("arguments", "must be one JSON object")
	}
	return in, nil
}

// unknownProperty finds the first property the schema does not define
// (additionalProperties: false), at any depth, and names it by its path.
func unknownProperty(path string, v any, s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		if s.Properties == nil {
			return nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ps, ok := s.Properties[k]
			if !ok {
				return errs.InvalidArgument(p, "is not an argument of this tool (known here: %s)", strings.Join(propertyNames(s), ", "))
			}
			if err := unknownProperty(p, v[k], ps); err != nil {
				return err
			}
		}
	case []any:
		for i, item := range v {
			if err := unknownProperty(fmt.Sprintf("%s[%d]", path, i), item, s.Items); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeError turns an encoding/json error into an invalid_argument naming
// the argument.
func decodeError(err error, s *jsonschema.Schema) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return errs.InvalidArgument("arguments", "must be a JSON object (got %s)", te.Value)
		}
		return errs.InvalidArgument(field, "must be %s (got %s)", describeType(s, field), strings.TrimPrefix(te.Value, "number "))
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return errs.InvalidArgument(name, "is not an argument of this tool (known: %s)", strings.Join(propertyNames(s), ", "))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errs.InvalidArgument("arguments", "are not valid JSON")
	}
	return errs.InvalidArgument("arguments", "cannot be decoded: %s", msg)
}

// describeType names the JSON type the schema wants at a dotted path.
func describeType(s *jsonschema.Schema, path string) string {
	cur := s
	for _, part := range strings.Split(path, ".") {
		if cur == nil {
			break
		}
		if cur.Items != nil && cur.Properties == nil {
			cur = cur.Items
		}
		cur = cur.Properties[part]
	}
	if cur == nil {
		return "of another type"
	}
	switch cur.Type {
	case "integer":
		if cur.Minimum != nil && cur.Maximum != nil {
			return fmt.Sprintf("an integer from %v to %v", *cur.Minimum, *cur.Maximum)
		}
		return "an integer"
	case "number":
		if cur.Minimum != nil && cur.Maximum != nil {
			return fmt.Sprintf("a number from %v to %v", *cur.Minimum, *cur.Maximum)
		}
		return "a number"
	case "string":
		return "a string"
	case "boolean":
		return "true or false"
	case "array":
		if cur.Items != nil && cur.Items.Type == "string" {
			return "an array of strings"
		}
		return "an array"
	case "object":
		return "an object"
	}
	return "of another type"
}

func propertyNames(s *jsonschema.Schema) []string {
	if s == nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ErrorPayload is the structured content of a tool error.
type ErrorPayload struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is a tool error: a stable code, the argument at fault and the
// rule it broke.
type ErrorBody struct {
	Code      string `json:"code"`
	Field     string `json:"field,omitempty"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
	// RetryAfterMs says when a retryable call may succeed (rate_limited,
	// unavailable): a hint, in milliseconds.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
	// RequiredScope names the scope a forbidden call lacked.
	RequiredScope string `json:"requiredScope,omitempty"`
}

// unavailableRetryAfterMs is the hint sent with "unavailable": the HTTP
// edge's Retry-After for an outage, in milliseconds.
const unavailableRetryAfterMs = 5000

// internalMessage answers an error the vocabulary does not know: what went
// wrong is logged with the operation that failed, never sent.
const internalMessage = "the knowledge service failed on this call because of a fault on its side; it is logged for the operators, and the same call will fail again"

// Describe maps any error of a call to the body agents see; it is where the
// vocabulary's codes become MCP answers. An errs.Error keeps its code, field
// and message. A call cut short by its deadline or cancelled is unavailable
// (retryable). Anything else is internal: a bug or an unexpected failure,
// not retryable, answered without its detail. known is false for the last
// two: the caller logs them (logFailure).
func Describe(err error) (body ErrorBody, known bool) {
	var de *errs.Error
	if errors.As(err, &de) && de.Code != "" && de.Code != errs.CodeInternal {
		b := ErrorBody{Code: string(de.Code), Field: de.Field, Message: de.Message, Retryable: de.Retryable}
		if de.Code == errs.CodeUnavailable {
			b.RetryAfterMs = unavailableRetryAfterMs
		}
		return b, true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrorBody{Code: string(errs.CodeUnavailable), Message: "the call did not finish in time; retry later", Retryable: true, RetryAfterMs: unavailableRetryAfterMs}, false
	}
	if errors.Is(err, context.Canceled) {
		return ErrorBody{Code: string(errs.CodeUnavailable), Message: "the call was cancelled", Retryable: true}, false
	}
	return ErrorBody{Code: string(errs.CodeInternal), Message: internalMessage}, false
}

// logFailure logs an error Describe did not know, with the operation that
// failed (errs.Wrap recorded it at the service boundary) and the cause.
func logFailure(ctx context.Context, logger *slog.Logger, msg string, err error, args ...any) {
	logger.ErrorContext(ctx, msg, append(args, "op", errs.OpOf(err), "err", err)...)
}

// Text renders an error body for the text content: "code: field: message".
func (b ErrorBody) Text() string {
	var sb strings.Builder
	sb.WriteString(b.Code)
	sb.WriteString(": ")
	if b.Field != "" {
		sb.WriteString(b.Field)
		sb.WriteString(": ")
	}
	sb.WriteString(b.Message)
	if b.Retryable {
		sb.WriteString(" (retryable)")
	}
	return sb.String()
}

func (t *toolset) errorResult(ctx context.Context, tool string, err error) *mcp.CallToolResult {
	body, known := Describe(err)
	if !known {
		logFailure(ctx, t.logger, "tool failed", err, "tool", tool)
	}
	setOutcome(ctx, body.Code, body.Field)
	b, _ := json.Marshal(ErrorPayload{Error: body})
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(b),
		Content:           []mcp.Content{&mcp.TextContent{Text: body.Text()}},
	}
}
