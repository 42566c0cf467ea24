package knowledge

import (
	"context"
	"github.com/agentfleet/orchestrator/packages/errs"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// SupersedeArgs are the arguments of supersede_knowledge: oldId and exactly
// one of newId (an entry stored before) and replacement (stored now, in the
// same transaction).
type SupersedeArgs struct {
	OldID       string           `json:"oldId" jsonschema:"The id of the entry that is no longer current."`
	NewID       string           `json:"newId,omitempty" jsonschema:"The id of the entry that replaces it, stored before with store_knowledge. Give newId or replacement, not both."`
	Replacement *ReplacementArgs `json:"replacement,omitempty" jsonschema:"The corrected entry, stored and made to supersede oldId in one step (one quota unit; nothing is stored if the supersession cannot be made). Give newId or replacement, not both."`
	ClientToken string           `json:"clientToken,omitempty" jsonschema:"With replacement: a UUID you choose to make retries safe; a repeat with the same clientToken answers the first result (stored.replayed: true) and stores nothing new."`
}

// ReplacementArgs are store_knowledge's arguments inside a correction.
type ReplacementArgs struct {
	Title      string         `json:"title" jsonschema:"As in store_knowledge."`
	Body       string         `json:"body" jsonschema:"As in store_knowledge."`
	Tags       []string       `json:"tags,omitempty" jsonschema:"As in store_knowledge."`
	Confidence *int           `json:"confidence,omitempty"`
	ExpiresAt  string         `json:"expiresAt,omitempty" jsonschema:"As in store_knowledge."`
	TaskRef    *TaskRefArgs   `json:"taskRef,omitempty" jsonschema:"As in store_knowledge."`
	Source     string         `json:"source,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// store is the replacement as store_knowledge's arguments.
func (r *ReplacementArgs) store(token string) *StoreArgs {
	return &StoreArgs{Title: r.Title, Body: r.Body, Tags: r.Tags, Confidence: r.Confidence,
		ExpiresAt: r.ExpiresAt, TaskRef: r.TaskRef, ClientToken: token, Source: r.Source, Kind: r.Kind, Metadata: r.Metadata}
}

func supersedeTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolSupersede,
		Title: "Supersede knowledge",
		Description: `Mark an entry as replaced by a newer one, so search stops returning the old one by default and points to the new one when asked to include superseded entries. Use it when you stored a correction, an update or a better version of existing knowledge; nothing is deleted.

To correct in one call, give replacement (title, body and the other store_knowledge arguments) instead of newId: the replacement is stored and supersedes oldId in one step, or nothing happens at all; add clientToken to make a retry safe. The answer then also has stored (as store_knowledge answers).

You must be the author of at least one of the two entries (superseding entries you did not write needs the future knowledge:write_others scope). Both entries must belong to your organisation.

Returns oldId, newId, headId (the entry now at the head of the chain: newId, or whatever already replaced newId), moved (how many entries now point to headId) and alreadySuperseded: true when oldId was already replaced by newId (nothing changed; safe to retry).

Errors: invalid_argument (not UUIDs, oldId = newId, both or neither of newId and replacement, or a replacement argument, named replacement.title and so on), quota_exceeded (with replacement), not_found (an id is not an entry of your org), forbidden (neither entry is yours), cycle (newId is already replaced, directly or through a chain, by oldId), conflict (oldId is already replaced by a different entry: supersede that entry instead), unavailable (retry later).`,
		InputSchema: oneOfRequired(inputSchema[SupersedeArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["oldId"])
			uuidSchema(p["newId"])
			uuidSchema(p["clientToken"])
			r := p["replacement"].Properties
			entrySchema(r)
			describe(r, "confidence", "As in store_knowledge. Default %d.", domain.DefaultConf)
		}), "newId", "replacement"),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Supersede knowledge",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

// supersede calls Correct (with replacement) or Supersede (with newId):
// exactly one of the two is this tool's own rule; every other is the
// domain's.
func (t *toolset) supersede(ctx context.Context, c domain.Caller, a *SupersedeArgs) (*domain.CorrectResult, error) {
	oldID, err := parseID("oldId", a.OldID)
	if err != nil {
		return nil, err
	}
	switch {
	case a.Replacement != nil && a.NewID != "":
		return nil, errs.InvalidArgument("replacement", "give newId or replacement, not both")
	case a.Replacement != nil:
		in, err := a.Replacement.store(a.ClientToken).input()
		if err != nil {
			return nil, domain.InReplacement(err)
		}
		return t.svc.Correct(ctx, c, oldID, in)
	case a.ClientToken != "":
		return nil, errs.InvalidArgument("clientToken", "only goes with replacement (superseding with newId is idempotent by itself)")
	case a.NewID == "":
		return nil, errs.InvalidArgument("newId", "is required unless replacement is given: a UUID such as 0b7e4c3a-5f1d-4c8e-9a2b-1d3e5f7a9c0b")
	}
	newID, err := parseID("newId", a.NewID)
	if err != nil {
		return nil, err
	}
	r, err := t.svc.Supersede(ctx, c, oldID, newID)
	if err != nil {
		return nil, err
	}
	return &domain.CorrectResult{SupersedeResult: *r}, nil
}

// oneOfRequired makes s require exactly one of the named properties.
func oneOfRequired(s *jsonschema.Schema, names ...string) *jsonschema.Schema {
	for _, n := range names {
		s.OneOf = append(s.OneOf, &jsonschema.Schema{Required: []string{n}})
	}
	return s
}
