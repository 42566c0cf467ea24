package knowledge

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// StoreDocumentArgs are the arguments of store_document. Descriptions that
// state a limit are set in documentTool, from the domain's constants.
type StoreDocumentArgs struct {
	Title       string         `json:"title"`
	Content     string         `json:"content"`
	Source      string         `json:"source,omitempty"`
	Tags        []string       `json:"tags,omitempty"`
	Kind        string         `json:"kind,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Format      string         `json:"format,omitempty"`
	ClientToken string         `json:"clientToken,omitempty"`
}

func documentTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolStoreDocument,
		Title: "Store a document",
		Description: `Hand your organisation a whole document (a handbook, a runbook collection, a post-mortem, a design doc): it is split into sections at its Markdown headings (then at paragraphs, each section at most ` + itoa(domain.MaxSectionChars) + ` characters), and each section becomes an entry of its own, embedded and searchable like any entry, PART_OF a document entry whose body is the table of contents. A search hit of a section names its document (document: id, title, source, headingPath); get_knowledge of the document lists its sections in order.

Give source (a URL, a path, a ticket id) to keep the document up to date: storing a document with the source of a live document of your organisation replaces it in one step. Unchanged sections keep their ids and vectors (nothing re-embedded), changed ones are superseded by their new versions (history kept), removed ones are retired (they expire now; still readable by id and with asOf). Storing the same content again changes nothing (unchanged: true).

Returns id (the document entry; a new one, superseding the previous, only when its title, table of contents, tags, kind or metadata changed: previousId), sections in order (id, headingPath, chars, status new | kept | changed, supersedes, embeddingStatus), retired (ids), replaced, new, kept, changed, and quotaUnits: one unit of your organisation's quota per entry written (the document entry and each new or changed section), all checked before anything is written.

Up to ` + itoa(domain.MaxDocumentBytes) + ` bytes of content in one call; larger documents (up to ` + itoa(domain.MaxUploadBytes) + ` bytes) go in parts. Errors: invalid_argument (names the argument and the rule), quota_exceeded (the whole document does not fit in your organisation's quota; nothing was stored), conflict (a call with the same clientToken is running; retry), unavailable (retry later).`,
		InputSchema: inputSchema[StoreDocumentArgs](func(p map[string]*jsonschema.Schema) {
			lengthSchema(p["title"], 1, domain.MaxTitleChars)
			describe(p, "title", "The document's title (1 to %d characters); each section's title is the document's and its heading path, joined by ' › '.", domain.MaxTitleChars)
			p["content"].MinLength = iptr(1)
			describe(p, "content", "The whole document: Markdown (default), plain text or HTML (see format), at most %d bytes as UTF-8.", domain.MaxDocumentBytes)
			documentFieldsSchema(p)
			uuidSchema(p["clientToken"])
			describe(p, "clientToken", "A UUID you choose to make retries safe: a repeat with the same clientToken and arguments answers the document it stored (replayed: true) and stores nothing new.")
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Store a document",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

// documentFieldsSchema states the rules of what a document is stored with
// besides its title and content (store_document, document_upload_start).
func documentFieldsSchema(p map[string]*jsonschema.Schema) {
	describe(p, "source", "Where the document comes from: a URL, a path, a ticket id (at most %d characters). A later store with the same source replaces this document.", domain.MaxSourceChars)
	lengthSchema(p["source"], 1, domain.MaxSourceChars)
	tagsSchema(p["tags"])
	describe(p, "tags", "Up to %d kebab-case tags, given to the document and every section.", domain.MaxTags)
	kindSchema(p["kind"])
	p["kind"].Default = []byte(`"` + domain.DefaultDocumentKind + `"`)
	describe(p, "kind", "What kind of knowledge the document is, for filters (default %s).", domain.DefaultDocumentKind)
	metadataSchema(p["metadata"])
	describe(p, "metadata", "A flat object of your own fields (string, number or boolean values; at most %d keys in lower snake case), given to the document and every section.", domain.MaxMetadataKeys)
	p["format"].Enum = []any{domain.FormatMarkdown, domain.FormatText, domain.FormatHTML}
	p["format"].Default = []byte(`"` + domain.FormatMarkdown + `"`)
	describe(p, "format", "How content is written: markdown (sections at its # headings), text (no headings: cut at paragraphs where a section would pass the limit), html (turned into Markdown, sections at its headings).")
}

func (t *toolset) storeDocument(ctx context.Context, c domain.Caller, a *StoreDocumentArgs) (*domain.DocumentResult, error) {
	in := domain.DocumentInput{Title: a.Title, Content: a.Content, Source: a.Source, Tags: a.Tags, Kind: a.Kind,
		Metadata: a.Metadata, Format: a.Format}
	var err error
	if in.ClientToken, err = parseUUID("clientToken", a.ClientToken); err != nil {
		return nil, err
	}
	return t.svc.StoreDocument(ctx, c, in)
}
