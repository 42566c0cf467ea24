package knowledge

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// SupersedeArgs are the arguments of supersede_knowledge.
type SupersedeArgs struct {
	OldID string `json:"oldId" jsonschema:"The id of the entry that is no longer current."`
	NewID string `json:"newId" jsonschema:"The id of the entry that replaces it (store it first with store_knowledge)."`
}

func supersedeTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolSupersede,
		Title: "Supersede knowledge",
		Description: `Mark an entry as replaced by a newer one, so search stops returning the old one by default and points to the new one when asked to include superseded entries. Use it when you stored a correction, an update or a better version of existing knowledge; nothing is deleted.

You must be the author of at least one of the two entries (superseding entries you did not write needs the future knowledge:write_others scope). Both entries must belong to your organisation.

Returns oldId, newId, headId (the entry now at the head of the chain: newId, or whatever already replaced newId), moved (how many entries now point to headId) and alreadySuperseded: true when oldId was already replaced by newId (nothing changed; safe to retry).

Errors: invalid_argument (not UUIDs, or oldId = newId), not_found (an id is not an entry of your org), forbidden (neither entry is yours), cycle (newId is already replaced, directly or through a chain, by oldId), conflict (oldId is already replaced by a different entry: supersede that entry instead), unavailable (retry later).`,
		InputSchema: inputSchema[SupersedeArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["oldId"])
			uuidSchema(p["newId"])
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Supersede knowledge",
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func (a *SupersedeArgs) check() error {
	oldID, err := parseUUID("oldId", a.OldID, true)
	if err != nil {
		return err
	}
	newID, err := parseUUID("newId", a.NewID, true)
	if err != nil {
		return err
	}
	if *oldID == *newID {
		return domain.InvalidArgument("newId", "must differ from oldId: an entry cannot supersede itself")
	}
	return nil
}

func (t *toolset) supersede(ctx context.Context, c domain.Caller, a *SupersedeArgs) (*domain.SupersedeResult, error) {
	oldID, _ := parseUUID("oldId", a.OldID, true)
	newID, _ := parseUUID("newId", a.NewID, true)
	return t.svc.Supersede(ctx, c, *oldID, *newID)
}
