package knowledge

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// GetArgs are the arguments of get_knowledge.
type GetArgs struct {
	ID     string `json:"id,omitempty" jsonschema:"The id of the entry, as search_knowledge, store_knowledge or a task link gave it. Give id or source, not both."`
	Source string `json:"source,omitempty"`
}

// getTool is knowledge://{id} as a tool: many MCP clients do not surface
// resource templates to their models, and an agent that found a hit by its
// snippet needs the whole body.
func getTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolGet,
		Title: "Get knowledge",
		Description: `Read one whole knowledge entry of your organisation: title, the full body (search hits carry only a snippet), tags, confidence, expiresAt, the author agent, timestamps and embeddingStatus; its supersession state (supersededBy: its direct successor; headId: the current head of its chain, which you should read and cite instead when set) and chain (every recorded replacement leading to it, "predecessor", and from it to the head, "successor", each with oldId, newId, byAgentId and at); its task links; and relations: a summary of its typed relations (open: how many, byType: counts by type as read from this entry, first: the newest ` + itoa(domain.RelationSummaryFirst) + ` with the other entry's id, title and state; list_relations pages through all); and similar, when store_knowledge answered before comparing the entry by meaning (similarPending): check "pending" until the entry is embedded, then "done" with checkedAt and entries, the entries of your organisation that look like the same knowledge (id, title, score, as store_knowledge's similar). The same as reading the resource knowledge://{id}.

Give source instead of id to read the entry that came from a URL, a path or a ticket (the source it was stored with, exactly): the newest current one (not superseded, not expired) when several have it.

Errors: invalid_argument (id is not a UUID, or both or neither of id and source), not_found (no entry of your organisation has this id, or no current one has this source), unavailable (retry later).`,
		InputSchema: oneOfRequired(inputSchema[GetArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["id"])
			lengthSchema(p["source"], 1, domain.MaxSourceChars)
			describe(p, "source", "The source the entry was stored with (1 to %d characters, compared exactly). Give id or source, not both.", domain.MaxSourceChars)
		}), "id", "source"),
		// A forgotten entry answers its tombstone (domain.Entry.MarshalJSON).
		OutputSchema: outputSchema[*domain.Entry](domain.Tombstone{}),
		// Read-only, so neither destructive nor with effects to repeat; every
		// hint is given explicitly (clients differ in their defaults).
		Annotations: &mcp.ToolAnnotations{
			Title:           "Get knowledge",
			ReadOnlyHint:    true,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func (t *toolset) get(ctx context.Context, c domain.Caller, a *GetArgs) (*domain.Entry, error) {
	var (
		e   *domain.Entry
		err error
	)
	switch {
	case a.ID != "" && a.Source != "":
		return nil, errs.InvalidArgument("source", "give id or source, not both")
	case a.Source != "":
		e, err = t.svc.GetBySource(ctx, c, a.Source)
	default:
		var id uuid.UUID
		if id, err = parseID("id", a.ID); err != nil {
			return nil, err
		}
		e, err = t.svc.Get(ctx, c, id)
	}
	if err == nil && e.TaskLinks == nil {
		e.TaskLinks = []domain.TaskLink{}
	}
	return e, err
}
