package knowledge

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// ListArgs are the arguments of list_knowledge.
type ListArgs struct {
	Tags              []string `json:"tags,omitempty" jsonschema:"Only entries holding all of these tags (normalised like stored tags)."`
	AuthorAgentID     string   `json:"authorAgentId,omitempty" jsonschema:"Only entries stored by this agent (its UUID)."`
	TaskID            string   `json:"taskId,omitempty" jsonschema:"Only entries linked to this task of your organisation (its UUID), either link kind."`
	DocumentID        string   `json:"documentId,omitempty" jsonschema:"Only the sections of this document (the id store_document answered), newest first like any listing."`
	CreatedAfter      string   `json:"createdAfter,omitempty" jsonschema:"Only entries created strictly after this RFC 3339 date-time."`
	CreatedBefore     string   `json:"createdBefore,omitempty" jsonschema:"Only entries created strictly before this RFC 3339 date-time."`
	IncludeSuperseded bool     `json:"includeSuperseded,omitempty" jsonschema:"Also list entries replaced by newer ones (they name their chain's head). Default false."`
	IncludeExpired    bool     `json:"includeExpired,omitempty" jsonschema:"Also list entries whose expiresAt has passed. Default false."`
	Limit             *int     `json:"limit,omitempty"`
	Cursor            string   `json:"cursor,omitempty" jsonschema:"nextCursor of the previous page, exactly as given; omit for the first page."`
	MaxTokens         *int     `json:"maxTokens,omitempty"`
	AsOf              string   `json:"asOf,omitempty" jsonschema:"List as the organisation knew it at this past RFC 3339 date-time: only entries created by then, superseded or expired only if they were by then (forgotten entries stay forgotten)."`
	FilterArgs
}

func listTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolList,
		Title: "List knowledge",
		Description: `Browse your organisation's knowledge without a query, newest first: what was stored recently, by an agent, for a task, with some tags, of a kind, from a source (exactly or by prefix), with some metadata, or in a time window. To find knowledge about something, use search_knowledge instead.

Returns hits (id, title, a snippet of the body's beginning, tags, confidence, kind, source, metadata, createdByAgentId, createdAt, expiresAt, superseded and headId, embeddingStatus; read a whole entry with get_knowledge) and nextCursor when there are more: pass it back as cursor, with the same filters, for the next page (a cursor with other filters is refused, naming cursor). Pages stay stable while other agents store: new entries appear only on a new first page, and nothing is repeated or skipped. A cursor only works for your organisation's listings.

Errors: invalid_argument (names the argument: a bad UUID, date-time, tag, limit, maxTokens or cursor), unavailable (retry later).`,
		InputSchema: inputSchema[ListArgs](func(p map[string]*jsonschema.Schema) {
			tagsSchema(p["tags"])
			uuidSchema(p["authorAgentId"])
			uuidSchema(p["taskId"])
			uuidSchema(p["documentId"])
			p["createdAfter"].Format = "date-time"
			p["createdBefore"].Format = "date-time"
			p["asOf"].Format = "date-time"
			p["includeSuperseded"].Default = []byte("false")
			p["includeExpired"].Default = []byte("false")
			intSchema(p["limit"], 1, domain.MaxListLimit, domain.DefaultListLimit)
			describe(p, "limit", "Entries per page, 1 to %d. Default %d.", domain.MaxListLimit, domain.DefaultListLimit)
			intSchema(p["maxTokens"], domain.MinMaxTokens, domain.MaxMaxTokens)
			filterSchema(p)
			describe(p, "maxTokens", "Approximate budget for the whole page, in tokens (estimated as %d bytes of its JSON a token), from %d to %d: snippets are shortened, then fewer hits given (at least one; nextCursor then continues right after the last one given), until it fits; the answer then says truncated: true. Omit for no budget.", domain.BytesPerToken, domain.MinMaxTokens, domain.MaxMaxTokens)
		}),
		// Read-only, so neither destructive nor with effects to repeat; every
		// hint is given explicitly (clients differ in their defaults).
		Annotations: &mcp.ToolAnnotations{
			Title:           "List knowledge",
			ReadOnlyHint:    true,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

// input decodes the arguments into the domain's input; the rules are the
// domain's (Service.List).
func (a *ListArgs) input() (domain.ListInput, error) {
	in := domain.ListInput{Tags: a.Tags, IncludeSuperseded: a.IncludeSuperseded, IncludeExpired: a.IncludeExpired, Cursor: a.Cursor,
		Limit: a.Limit, MaxTokens: a.MaxTokens, Filters: a.filters()}
	var err error
	if in.AuthorAgentID, err = parseUUID("authorAgentId", a.AuthorAgentID); err != nil {
		return in, err
	}
	if in.DocumentID, err = parseUUID("documentId", a.DocumentID); err != nil {
		return in, err
	}
	if in.TaskID, err = parseUUID("taskId", a.TaskID); err != nil {
		return in, err
	}
	if in.CreatedAfter, err = parseTime("createdAfter", a.CreatedAfter); err != nil {
		return in, err
	}
	if in.CreatedBefore, err = parseTime("createdBefore", a.CreatedBefore); err != nil {
		return in, err
	}
	if in.AsOf, err = parseTime("asOf", a.AsOf); err != nil {
		return in, err
	}
	return in, nil
}

func (t *toolset) list(ctx context.Context, c domain.Caller, a *ListArgs) (*domain.ListResult, error) {
	in, err := a.input()
	if err != nil {
		return nil, err
	}
	return t.svc.List(ctx, c, in)
}
