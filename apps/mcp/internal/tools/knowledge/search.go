package knowledge

import (
	"context"
	"fmt"
	"math"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// Limits of search_knowledge (SPEC.md).
const (
	maxQuery    = domain.MaxQueryChars
	minLimit    = 1
	maxLimit    = domain.MaxLimit
	minEfSearch = 1
	maxEfSearch = domain.MaxEfSearch
)

// SearchArgs are the arguments of search_knowledge.
type SearchArgs struct {
	Query             string   `json:"query" jsonschema:"What you want to know, in natural language or keywords (1 to 2000 characters)."`
	Limit             *int     `json:"limit,omitempty" jsonschema:"How many hits at most, 1 to 50. Default 10."`
	Tags              []string `json:"tags,omitempty" jsonschema:"Only hits that carry all of these tags (up to 16; compared lowercased)."`
	IncludeSuperseded bool     `json:"includeSuperseded,omitempty" jsonschema:"Also return entries that were replaced by newer ones; each such hit names the current replacement in headId. Default false."`
	IncludeExpired    bool     `json:"includeExpired,omitempty" jsonschema:"Also return entries whose expiresAt has passed. Default false."`
	MinScore          *float64 `json:"minScore,omitempty" jsonschema:"Drop hits whose score is below this, 0 to 1. Omit to keep every hit."`
	EfSearch          *int     `json:"efSearch,omitempty" jsonschema:"Advanced: the HNSW probe width of the vector search, 1 to 200, default 64. Raise it only when you expect relevant hits that are not returned."`
}

func searchTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolSearch,
		Title: "Search knowledge",
		Description: `Search what the agents of your organisation have learned. Use it before starting work on a topic, before storing something (to avoid duplicates), and whenever you need facts about systems, decisions or past fixes.

The search is hybrid: semantic similarity of embeddings, full-text match of words, and title substring match, fused by Reciprocal Rank Fusion. Returns hits, best first, each with id, title, a snippet (up to 240 characters of the body around the first match), tags, confidence (the author's 0-100 certainty), createdAt, expiresAt and score.

score is in (0, 1]: 1 means the hit ranked first in all three lists; about 0.33 means first in one list only; use it to compare hits of one query, not across queries. vectorRank, fullTextRank and titleRank say where the hit ranked in each list (absent: not in that list). embeddingStatus "pending" means the entry is not yet in the semantic list (new entries join it within seconds); "failed" means it never will be until re-embedded. vectorSearch: false with a notice means the query itself could not be embedded and only the word and title lists were used.

Superseded entries are hidden unless includeSuperseded is true; then superseded: true and headId names the entry that replaces them, which you should prefer. The snippet is not the whole body: read the full entry through the resource knowledge://{id}.`,
		InputSchema: inputSchema[SearchArgs](func(p map[string]*jsonschema.Schema) {
			lengthSchema(p["query"], 1, maxQuery)
			l := p["limit"]
			l.Minimum, l.Maximum, l.Default = fptr(minLimit), fptr(maxLimit), []byte("10")
			tags := p["tags"]
			tags.MaxItems = iptr(maxTags)
			lengthSchema(tags.Items, 1, maxTagLength)
			p["includeSuperseded"].Default = []byte("false")
			p["includeExpired"].Default = []byte("false")
			m := p["minScore"]
			m.Minimum, m.Maximum = fptr(0), fptr(1)
			e := p["efSearch"]
			e.Minimum, e.Maximum, e.Default = fptr(minEfSearch), fptr(maxEfSearch), []byte("64")
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:         "Search knowledge",
			ReadOnlyHint:  true,
			OpenWorldHint: new(false),
		},
	}
}

func (a *SearchArgs) check() error {
	if err := checkText("query", a.Query, 1, maxQuery); err != nil {
		return err
	}
	if err := checkIntRange("limit", a.Limit, minLimit, maxLimit); err != nil {
		return err
	}
	if len(a.Tags) > maxTags {
		return domain.InvalidArgument("tags", "must have at most %d tags (got %d)", maxTags, len(a.Tags))
	}
	for i, tag := range a.Tags {
		if err := checkText(fmt.Sprintf("tags[%d]", i), tag, 1, maxTagLength); err != nil {
			return err
		}
	}
	if a.MinScore != nil && (math.IsNaN(*a.MinScore) || *a.MinScore < 0 || *a.MinScore > 1) {
		return domain.InvalidArgument("minScore", "must be a number from 0 to 1 (got %v)", *a.MinScore)
	}
	return checkIntRange("efSearch", a.EfSearch, minEfSearch, maxEfSearch)
}

func (t *toolset) search(ctx context.Context, c domain.Caller, a *SearchArgs) (*domain.SearchResult, error) {
	in := domain.SearchInput{
		Query:             a.Query,
		Tags:              a.Tags,
		IncludeSuperseded: a.IncludeSuperseded,
		IncludeExpired:    a.IncludeExpired,
		MinScore:          a.MinScore,
	}
	if a.Limit != nil {
		in.Limit = *a.Limit
	}
	if a.EfSearch != nil {
		in.EfSearch = *a.EfSearch
	}
	res, err := t.svc.Search(ctx, c, in)
	if err == nil && res.Hits == nil {
		res.Hits = []domain.Hit{} // "hits": [] rather than null
	}
	return res, err
}
