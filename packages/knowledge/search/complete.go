package search

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// What Complete completes.
const (
	CompleteEntry = "entry" // an entry id: by id prefix or title prefix
	CompleteTask  = "task"  // a task id: by id prefix or title prefix
	CompleteAgent = "agent" // an agent id: by id prefix or name prefix
	CompleteTag   = "tag"   // a tag the org's entries carry: by prefix
)

// MaxCompletions bounds the values one completion answers: a client shows
// them as a drop-down while the agent or its user types, and MCP allows at
// most 100.
const MaxCompletions = 20

// maxCompletionPrefix bounds the typed value a completion matches (longer
// is no prefix of a title or tag worth completing).
const maxCompletionPrefix = 200

// Complete returns up to MaxCompletions values of what (CompleteEntry,
// CompleteTask, CompleteAgent, CompleteTag) in the caller's org that
// complete prefix, best first (current entries before superseded ones,
// then newest; tags most used first). Ids match by the start of their text
// form (hyphens optional) or by the start of their title (an agent: its
// name), case-insensitively, so an agent can type a few words of a title
// and pick the id. Nothing of another org is ever offered. hasMore says
// more values match than were answered.
func (s *Searcher) Complete(ctx context.Context, c domain.Caller, what, prefix string) (values []string, hasMore bool, err error) {
	defer data.WrapOp(&err, "knowledge.Complete")
	if err := domain.CheckCaller(c, false); err != nil {
		return nil, false, err
	}
	if len([]rune(prefix)) > maxCompletionPrefix {
		return []string{}, false, nil
	}
	low, high := idRange(prefix)
	title := likePrefix(prefix)
	lim := int32(MaxCompletions + 1)
	var ids []uuid.UUID
	switch what {
	case CompleteEntry:
		ids, err = s.q.CompleteEntryIDs(ctx, sqlc.CompleteEntryIDsParams{OrgID: c.OrgID, Low: low, High: high, TitlePattern: title, MaxValues: lim})
	case CompleteTask:
		ids, err = s.q.CompleteTaskIDs(ctx, sqlc.CompleteTaskIDsParams{OrgID: c.OrgID, Low: low, High: high, TitlePattern: title, MaxValues: lim})
	case CompleteAgent:
		ids, err = s.q.CompleteAgentIDs(ctx, sqlc.CompleteAgentIDsParams{OrgID: c.OrgID, Low: low, High: high, TitlePattern: title, MaxValues: lim})
	case CompleteTag:
		// Tags are stored normalised (lowercase kebab-case).
		values, err = s.q.CompleteTags(ctx, sqlc.CompleteTagsParams{OrgID: c.OrgID, TagPattern: likePrefix(strings.ToLower(strings.TrimSpace(prefix))), MaxValues: lim})
	default:
		return nil, false, errs.InvalidArgument("argument", "cannot be completed (known: %s, %s, %s, %s)", CompleteEntry, CompleteTask, CompleteAgent, CompleteTag)
	}
	if err != nil {
		return nil, false, data.MapErr(err, "")
	}
	for _, id := range ids {
		values = append(values, id.String())
	}
	if values == nil {
		values = []string{}
	}
	if len(values) > MaxCompletions {
		return values[:MaxCompletions], true, nil
	}
	return values, false, nil
}

// idRange is the range of UUIDs whose text form starts with prefix
// (hyphens ignored): prefix padded with 0s and with fs. A prefix that is
// not hex gives an empty range.
func idRange(prefix string) (low, high uuid.UUID) {
	hex := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	if len(hex) > 32 || strings.Trim(hex, "0123456789abcdef") != "" {
		return maxUUID, uuid.Nil // BETWEEN max AND nil: nothing
	}
	l, err1 := uuid.Parse(hex + strings.Repeat("0", 32-len(hex)))
	h, err2 := uuid.Parse(hex + strings.Repeat("f", 32-len(hex)))
	if err1 != nil || err2 != nil {
		return maxUUID, uuid.Nil
	}
	return l, h
}

// likePrefix is the ILIKE pattern of the texts starting with prefix, its
// own %, _ and \ matching literally.
func likePrefix(prefix string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(prefix) + "%"
}
