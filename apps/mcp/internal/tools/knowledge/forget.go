package knowledge

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/authn"
	domain "github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// ForgetArgs are the arguments of forget_knowledge.
type ForgetArgs struct {
	ID     string `json:"id" jsonschema:"The id of the entry to erase."`
	Reason string `json:"reason" jsonschema:"Why it is forgotten (kept in the tombstone; never put the secret itself here)."`
}

func forgetTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolForget,
		Title: "Forget knowledge",
		Description: `Erase an entry of your organisation for good: its title, body, tags and vector are deleted at once (not hidden), its task links and relations removed, and it never appears in search, list_knowledge or list_relations again. Use it for a leaked secret, personal data, or knowledge that is wrong and must not be read at all; for knowledge that is merely outdated, use supersede_knowledge instead, which keeps the history.

You may forget entries you wrote; forgetting other agents' entries needs the knowledge:delete_others scope. A tombstone stays: id, the author, who forgot it, when and reason. Only the author and the agent that forgot it can read it (get_knowledge answers state "forgotten"); to everyone else the id no longer exists. Chains stay true: an entry that was replaced by the forgotten one now points past it, and if the forgotten entry was the head of its chain, the entry it replaced is current again (supersede or forget that one too if it is also wrong). The entry's quota unit is given back. Forgetting a document (store_document) forgets its sections with it, each leaving its own tombstone (sections counts them).

Returns the tombstone (id, state "forgotten", createdByAgentId, createdAt, forgottenByAgentId, forgottenAt, reason, relations: how many open relations it had), alreadyForgotten: true when it was forgotten before (nothing changed; safe to retry), and relinked, headsAgain and taskLinks: how its chain and task links were repaired.

Errors: invalid_argument (id not a UUID, reason missing or over ` + itoa(domain.MaxForgetReason) + ` characters), not_found (no entry of your org has this id), forbidden (not your entry and no knowledge:delete_others scope), unavailable (retry later).`,
		InputSchema: inputSchema[ForgetArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["id"])
			lengthSchema(p["reason"], 1, domain.MaxForgetReason)
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Forget knowledge",
			ReadOnlyHint:    false,
			DestructiveHint: new(true),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func (t *toolset) forget(ctx context.Context, c domain.Caller, a *ForgetArgs) (*domain.ForgetResult, error) {
	id, err := parseID("id", a.ID)
	if err != nil {
		return nil, err
	}
	p := authn.PrincipalFrom(ctx)
	return t.svc.Forget(ctx, c, id, a.Reason, p != nil && p.HasScope(tenancy.ScopeKnowledgeDeleteOthers))
}
