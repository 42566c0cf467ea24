package knowledge

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/packages/errs"
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
	MinScore          *float64 `json:"minScore,omitempty"` // described in searchTool: minScoreDescription names the domain's default
	EfSearch          *int     `json:"efSearch,omitempty" jsonschema:"Advanced: the HNSW probe width of the vector search, 1 to 200, default 64. Raise it only when you expect relevant hits that are not returned."`
	MaxTokens         *int     `json:"maxTokens,omitempty" jsonschema:"Approximate budget for the whole answer, in tokens (estimated as 4 bytes of its JSON a token), from 100 to 1000000: snippets are shortened, then the lowest-ranked hits left out, until it fits; the answer then says truncated: true and omittedHits. Omit for no budget."`
	AsOf              string   `json:"asOf,omitempty" jsonschema:"Answer as the organisation knew it at this past RFC 3339 date-time: only entries created by then, superseded or expired only if they were by then (forgotten entries stay forgotten). superseded and headId still say what replaced a hit since."`
	Hops              *int     `json:"hops,omitempty" jsonschema:"Also return the entries related to the hits (link_knowledge) up to this many relations away, 0 to 2. Default 0."`
	RelationTypes     []string `json:"relationTypes,omitempty" jsonschema:"With hops: follow only these relation types, named as read from the hit (e.g. FIXED_BY: the entries that fix it). Default: every type."`
}

// The domain's gate and score bands as JSON, for the schema and the
// descriptions: the edge states them, the domain applies and measures them.
var (
	defaultMinScore = strconv.FormatFloat(domain.DefaultMinScore, 'f', -1, 64)
	scoreStrong     = strconv.FormatFloat(domain.ScoreStrong, 'f', -1, 64)
	scoreWeak       = strconv.FormatFloat(domain.ScoreWeak, 'f', -1, 64)
)

// searchDescription tells agents how to read a score (the calibrated
// evidence of packages/knowledge/rrf.go) and what an empty answer means, so
// they neither trust a lone weak hit nor give up on a topic too early. It is
// sent with every tools/list: every sentence costs every agent tokens.
var searchDescription = `Search what the agents of your organisation have learned. Use it before starting work on a topic, before storing something (to avoid duplicates), and whenever you need facts about systems, decisions or past fixes.

Three ranked lists (meaning: embeddings, which with the server's default local embedder compare shared words, not paraphrases; words: full text; title) are fused. Hits come best first: id, title, snippet (up to 240 characters of the body around the first match; the whole entry is at knowledge://{id}), tags, confidence (the author's 0-100 certainty), createdAt, expiresAt, score, signals.

score (0-1) is calibrated evidence, comparable across queries, org sizes and embedding models: ` + scoreStrong + ` or more: the hit answers the query (it holds the query's informative words, or means the same); ` + scoreWeak + ` to ` + scoreStrong + `: a partial match, read it; under ` + scoreWeak + `: weak, it shares some words or a vague likeness. One list at full evidence gives 0.63, lists agreeing add up to 1. Hits with almost no evidence are dropped (minScore, default ` + defaultMinScore + `), so no hits means nothing relevant is stored: try other words before concluding. signals are the raw evidence: cosine (meaning), bm25 (words), titleBm25, titleContains (title holds the whole query); vectorRank, fullTextRank, titleRank: place in each list (absent: not in it).

embeddingStatus "pending": not yet in the meaning list (joins within seconds); "failed": not until re-embedded. vectorSearch false (with a notice): the query could not be embedded; only words and titles were searched.

Superseded entries are hidden unless includeSuperseded; then superseded: true and headId names the replacement, which you should prefer.

hops 1 or 2 adds entries related to the hits (a runbook that FIXES a hit, the benchmark a hit DEPENDS_ON), even ones sharing no word with the query, within the same filters: each has via (fromId: the entry it was reached from, type: the relation as read from it, hops) and scores half of that entry's score per hop; at most limit are added.`

// minScoreDescription: see searchDescription.
var minScoreDescription = "Drop hits scoring below this, 0 to 1. The default (" + defaultMinScore +
	") drops hits with almost no evidence; " + scoreWeak + " drops weak hits; " + scoreStrong + " keeps only hits that answer the query; 0 keeps every hit with any evidence."

func searchTool() *mcp.Tool {
	return &mcp.Tool{
		Name:        ToolSearch,
		Title:       "Search knowledge",
		Description: searchDescription,
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
			m.Description, m.Default = minScoreDescription, []byte(defaultMinScore)
			e := p["efSearch"]
			e.Minimum, e.Maximum, e.Default = fptr(minEfSearch), fptr(maxEfSearch), []byte("64")
			p["asOf"].Format = "date-time"
			mt := p["maxTokens"]
			mt.Minimum, mt.Maximum = fptr(domain.MinMaxTokens), fptr(domain.MaxMaxTokens)
			h := p["hops"]
			h.Minimum, h.Maximum, h.Default = fptr(0), fptr(domain.MaxHops), []byte("0")
			rt := p["relationTypes"]
			rt.MaxItems = iptr(16)
			relationTypeSchema(rt.Items)
		}),
		// Read-only, so neither destructive nor with effects to repeat; every
		// hint is given explicitly (clients differ in their defaults).
		Annotations: &mcp.ToolAnnotations{
			Title:           "Search knowledge",
			ReadOnlyHint:    true,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
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
		return errs.InvalidArgument("tags", "must have at most %d tags (got %d)", maxTags, len(a.Tags))
	}
	for i, tag := range a.Tags {
		if err := checkText(fmt.Sprintf("tags[%d]", i), tag, 1, maxTagLength); err != nil {
			return err
		}
	}
	if a.MinScore != nil && (math.IsNaN(*a.MinScore) || *a.MinScore < 0 || *a.MinScore > 1) {
		return errs.InvalidArgument("minScore", "must be a number from 0 to 1 (got %v)", *a.MinScore)
	}
	if _, err := parseTime("asOf", a.AsOf); err != nil {
		return err
	}
	if err := checkIntRange("maxTokens", a.MaxTokens, domain.MinMaxTokens, domain.MaxMaxTokens); err != nil {
		return err
	}
	if err := checkIntRange("hops", a.Hops, 0, domain.MaxHops); err != nil {
		return err
	}
	if len(a.RelationTypes) > 16 {
		return errs.InvalidArgument("relationTypes", "must have at most 16 types (got %d)", len(a.RelationTypes))
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
		RelationTypes:     a.RelationTypes,
	}
	if a.Hops != nil {
		in.Hops = *a.Hops
	}
	if a.Limit != nil {
		in.Limit = *a.Limit
	}
	if a.EfSearch != nil {
		in.EfSearch = *a.EfSearch
	}
	in.AsOf, _ = parseTime("asOf", a.AsOf) // checked
	res, err := t.svc.Search(ctx, c, in)
	if err == nil && res.Hits == nil {
		res.Hits = []domain.Hit{} // "hits": [] rather than null
	}
	if err == nil && a.MaxTokens != nil {
		domain.FitSearch(res, *a.MaxTokens)
	}
	return res, err
}
