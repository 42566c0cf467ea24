package knowledge

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// UploadStartArgs are the arguments of document_upload_start: those of
// store_document without the content, and the content's size.
type UploadStartArgs struct {
	Title      string         `json:"title"`
	Source     string         `json:"source,omitempty"`
	TotalBytes int64          `json:"totalBytes"`
	Tags       []string       `json:"tags,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	Format     string         `json:"format,omitempty"`
}

// UploadAppendArgs are the arguments of document_upload_append.
type UploadAppendArgs struct {
	UploadID string `json:"uploadId" jsonschema:"The uploadId document_upload_start answered."`
	Index    *int   `json:"index"`
	Content  string `json:"content"`
}

// UploadFinishArgs are the arguments of document_upload_finish.
type UploadFinishArgs struct {
	UploadID    string `json:"uploadId" jsonschema:"The uploadId document_upload_start answered."`
	ClientToken string `json:"clientToken,omitempty"`
}

const uploadErrors = `Errors: invalid_argument (names the argument and the rule; fix and retry), not_found (uploadId is not an upload you started, or it expired: start again), conflict (see above), unavailable (retry later).`

func uploadStartTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolUploadStart,
		Title: "Start a document upload",
		Description: `Start storing a document too large for one store_document call (up to ` + itoa(domain.MaxUploadBytes) + ` bytes of UTF-8 text), in parts: document_upload_start, then document_upload_append for each part in order, then document_upload_finish, which stores it as store_document does and answers as it does. Give everything the document is stored with now (title, source, tags, kind, metadata, format, as for store_document) and its whole size in bytes (totalBytes).

Returns uploadId (for the two other calls), maxPartBytes (the most bytes one part may hold) and expiresAt. The upload is yours alone (other agents get not_found), and it expires ` + domain.UploadTTL.String() + ` after its start or its last append: appending again keeps it alive.

Your organisation's open uploads reserve their totalBytes: when they would pass its staging limit, the start is refused with quota_exceeded (retryable: finish your uploads, or wait for abandoned ones to expire).

` + uploadErrors,
		InputSchema: inputSchema[UploadStartArgs](func(p map[string]*jsonschema.Schema) {
			lengthSchema(p["title"], 1, domain.MaxTitleChars)
			describe(p, "title", "The document's title (1 to %d characters).", domain.MaxTitleChars)
			p["totalBytes"].Type = "integer"
			intSchema(p["totalBytes"], 1, domain.MaxUploadBytes)
			describe(p, "totalBytes", "The whole content's size in bytes of UTF-8 (1 to %d): the parts' sizes must add up to it.", domain.MaxUploadBytes)
			documentFieldsSchema(p)
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Start a document upload",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  false,
			OpenWorldHint:   new(false),
		},
	}
}

func uploadAppendTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolUploadAppend,
		Title: "Append to a document upload",
		Description: `Append the next part of a document upload (document_upload_start). Send the parts in order, index 0, 1, 2, ..., each at most maxPartBytes bytes; cut anywhere, even inside a word or a line: the parts are joined exactly as sent.

Returns receivedBytes, totalBytes, nextIndex (the index the next part must have) and expiresAt (` + domain.UploadTTL.String() + ` from now). Safe to retry: sending a part already received again, with the same content, changes nothing and answers repeated: true; with other content it is a conflict (a part cannot be replaced). An index past nextIndex is refused naming the index expected, and a part that would bring the upload past its totalBytes is refused.

` + uploadErrors,
		InputSchema: inputSchema[UploadAppendArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["uploadId"])
			p["index"].Type = "integer"
			p["index"].Minimum = fptr(0)
			describe(p, "index", "The part's position: 0 for the first part, then 1, 2, ... without gaps.")
			p["content"].MinLength = iptr(1)
			describe(p, "content", "The part's text: at most %d bytes of UTF-8.", domain.MaxUploadPartBytes)
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Append to a document upload",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func uploadFinishTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolUploadFinish,
		Title: "Finish a document upload",
		Description: `Store a document upload whose parts have all been appended (receivedBytes equal to totalBytes) as one document, exactly as store_document stores its content, and answer as store_document does.

Safe to retry: finishing it again answers the same document (replayed: true), until the upload expires (` + domain.UploadTTL.String() + ` after the finish) or the document is erased. An upload still missing bytes is refused naming the next index expected.

` + uploadErrors,
		InputSchema: inputSchema[UploadFinishArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["uploadId"])
			uuidSchema(p["clientToken"])
			describe(p, "clientToken", "A UUID you choose as the stored document's clientToken (as for store_document); the uploadId when omitted.")
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Finish a document upload",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func (t *toolset) uploadStart(ctx context.Context, c domain.Caller, a *UploadStartArgs) (*domain.UploadStartResult, error) {
	return t.svc.UploadStart(ctx, c, domain.UploadStartInput{
		Title: a.Title, Source: a.Source, Tags: a.Tags, Kind: a.Kind, Metadata: a.Metadata, Format: a.Format, TotalBytes: a.TotalBytes,
	})
}

func (t *toolset) uploadAppend(ctx context.Context, c domain.Caller, a *UploadAppendArgs) (*domain.UploadAppendResult, error) {
	id, err := parseID("uploadId", a.UploadID)
	if err != nil {
		return nil, err
	}
	return t.svc.UploadAppend(ctx, c, domain.UploadAppendInput{UploadID: id, Index: a.Index, Content: a.Content})
}

func (t *toolset) uploadFinish(ctx context.Context, c domain.Caller, a *UploadFinishArgs) (*domain.DocumentResult, error) {
	id, err := parseID("uploadId", a.UploadID)
	if err != nil {
		return nil, err
	}
	token, err := parseUUID("clientToken", a.ClientToken)
	if err != nil {
		return nil, err
	}
	return t.svc.UploadFinish(ctx, c, domain.UploadFinishInput{UploadID: id, ClientToken: token})
}
