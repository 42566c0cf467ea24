package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

func complete(t *testing.T, cs *mcp.ClientSession, uri, arg, value string) *mcp.CompleteResult {
	t.Helper()
	res, err := cs.Complete(context.Background(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: uri},
		Argument: mcp.CompleteParamsArgument{Name: arg, Value: value},
	})
	if err != nil {
		t.Fatalf("complete %s %s=%q: %v", uri, arg, value, err)
	}
	return res
}

// TestCompletions: the capability is declared; entry ids complete by title
// or id prefix, task ids, tags and agents too, always within the caller's
// org and at most knowledge.MaxCompletions values; a prompt reference (the
// conformance scenario's) answers no values; without knowledge:read the
// request is refused naming the scope; prompts/list is not served.
func TestCompletions(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	org, other := b.org("acme"), b.org("globex")
	a := b.agent(org, "scout", allScopes, 0)
	o := b.agent(other, "spy", allScopes, 0)
	cs, ocs := b.session(a), b.session(o)
	if caps := cs.InitializeResult().Capabilities; caps.Completions == nil || caps.Prompts != nil {
		t.Errorf("capabilities: completions %v, prompts %v", caps.Completions, caps.Prompts)
	}

	vac := b.store(cs, map[string]any{"title": "Vacuum settings for hot tables", "body": "scale factor 0.02", "tags": []string{"postgres", "tuning"}})
	b.store(cs, map[string]any{"title": "Deploy checklist", "body": "run migrations first", "tags": []string{"deploy", "postgres"}})
	theirs := b.store(ocs, map[string]any{"title": "Vacuum at globex", "body": "secret", "tags": []string{"private-tag"}})
	for i := range knowledge.MaxCompletions + 2 {
		b.store(cs, map[string]any{"title": "Bulk note " + strings.Repeat("x", i+1), "body": "filler"})
	}
	task := b.task(org)

	got := complete(t, cs, kt.EntryTemplate, "id", "vacuum")
	if !slices.Equal(got.Completion.Values, []string{vac.ID.String()}) || got.Completion.HasMore {
		t.Errorf("title prefix: %+v, want only %s (never globex's %s)", got.Completion, vac.ID, theirs.ID)
	}
	got = complete(t, cs, kt.EntryTemplate, "id", vac.ID.String()[:6])
	if !slices.Contains(got.Completion.Values, vac.ID.String()) {
		t.Errorf("id prefix: %+v", got.Completion)
	}
	got = complete(t, cs, kt.EntryTemplate, "id", theirs.ID.String()[:13])
	if len(got.Completion.Values) != 0 {
		t.Errorf("another org's id completed: %+v", got.Completion)
	}
	got = complete(t, cs, kt.EntryTemplate, "id", "bulk")
	if len(got.Completion.Values) != knowledge.MaxCompletions || !got.Completion.HasMore {
		t.Errorf("bound: %d values, hasMore %v", len(got.Completion.Values), got.Completion.HasMore)
	}
	got = complete(t, cs, kt.EntryTemplate, "id", "%")
	if len(got.Completion.Values) != 0 {
		t.Errorf("%% matched literally? %+v", got.Completion)
	}
	got = complete(t, cs, kt.TaskTemplate, "taskId", task.String()[:4])
	if !slices.Equal(got.Completion.Values, []string{task.String()}) {
		t.Errorf("task: %+v", got.Completion)
	}
	got = complete(t, cs, kt.EntryTemplate, "tags", "P")
	if !slices.Equal(got.Completion.Values, []string{"postgres"}) {
		t.Errorf("tags: %+v", got.Completion)
	}
	got = complete(t, cs, kt.EntryTemplate, "tags", "")
	if !slices.Equal(got.Completion.Values[:1], []string{"postgres"}) || slices.Contains(got.Completion.Values, "private-tag") {
		t.Errorf("tags, most used first, own org only: %+v", got.Completion)
	}
	got = complete(t, cs, kt.EntryTemplate, "authorAgentId", "sco")
	if !slices.Equal(got.Completion.Values, []string{a.id.String()}) {
		t.Errorf("agent: %+v", got.Completion)
	}

	// The conformance scenario's request: a prompt this server does not have.
	res, err := cs.Complete(context.Background(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"},
	})
	if err != nil || res.Completion.Values == nil || len(res.Completion.Values) != 0 {
		t.Errorf("prompt reference: %+v, %v", res, err)
	}
	raw, _ := json.Marshal(res)
	if !strings.Contains(string(raw), `"values":[]`) {
		t.Errorf("values must be an array: %s", raw)
	}

	// Without knowledge:read: refused, naming the scope.
	w := b.agent(org, "writer", []string{tenancy.ScopeKnowledgeWrite}, 0)
	_, err = b.session(w).Complete(context.Background(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: kt.EntryTemplate},
		Argument: mcp.CompleteParamsArgument{Name: "id", Value: "v"},
	})
	if err == nil || !strings.Contains(err.Error(), "insufficient_scope") || !strings.Contains(err.Error(), tenancy.ScopeKnowledgeRead) {
		t.Errorf("without knowledge:read: %v, want an insufficient_scope error naming %s", err, tenancy.ScopeKnowledgeRead)
	}

	// No prompts capability, so no prompts/list.
	_, err = cs.ListPrompts(context.Background(), nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("prompts/list: %v, want method not found", err)
	}
}
