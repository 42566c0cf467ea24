package knowledge

import (
	"context"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// SearchArgs are the arguments of search_knowledge. Descriptions that
// state a limit are set in searchTool, from the domain's constants.
type SearchArgs struct {
	Query             string   `json:"query"`
	Limit             *int     `json:"limit,omitempty"`
	Tags              []string `json:"tags,omitempty"`
	IncludeSuperseded bool     `json:"includeSuperseded,omitempty" jsonschema:"Also return entries that were replaced by newer ones; each such hit names the current replacement in headId. Default false."`
	IncludeExpired    bool     `json:"includeExpired,omitempty" jsonschema:"Also return entries whose expiresAt has passed. Default false."`
	MinScore          *float64 `json:"minScore,omitempty"`
	EfSearch          *int     `json:"efSearch,omitempty"`
	MaxTokens         *int     `json:"maxTokens,omitempty"`
	AsOf              string   `json:"asOf,omitempty" jsonschema:"Answer as the organisation knew it at this past RFC 3339 date-time: only entries created by then, superseded or expired only if they were by then (forgotten entries stay forgotten). superseded and headId still say what replaced a hit since."`
	Hops              *int     `json:"hops,omitempty"`
	RelationTypes     []string `json:"relationTypes,omitempty"`
	DocumentID        string   `json:"documentId,omitempty" jsonschema:"Only the sections of this document (the id store_document answered), with the other filters; hops stay within them too."`
	FilterArgs
	Mode   string `json:"mode,omitempty"`
	Rerank *bool  `json:"rerank,omitempty"`
}

// FilterArgs are the entry-field filters of search_knowledge and
// list_knowledge.
type FilterArgs struct {
	Kind         string         `json:"kind,omitempty"`
	Source       string         `json:"source,omitempty"`
	SourcePrefix string         `json:"sourcePrefix,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

func (f FilterArgs) filters() domain.Filters {
	return domain.Filters{Kind: f.Kind, Source: f.Source, SourcePrefix: f.SourcePrefix, Metadata: f.Metadata}
}

// filterSchema states the filters' rules, the stored fields' own.
func filterSchema(p map[string]*jsonschema.Schema) {
	kindSchema(p["kind"])
	describe(p, "kind", "Only entries of this kind: %s.", strings.Join(domain.Kinds, ", "))
	lengthSchema(p["source"], 1, domain.MaxSourceChars)
	describe(p, "source", "Only entries stored with exactly this source (1 to %d characters).", domain.MaxSourceChars)
	lengthSchema(p["sourcePrefix"], 1, domain.MaxSourceChars)
	describe(p, "sourcePrefix", "Only entries whose source starts with this, such as https://wiki.example.com/billing/ (1 to %d characters; not with source).", domain.MaxSourceChars)
	metadataSchema(p["metadata"])
	describe(p, "metadata", "Only entries whose metadata has every one of these keys with an equal value, such as {\"env\": \"prod\"} (the rules of stored metadata: at most %d keys, strings, numbers or booleans).", domain.MaxMetadataKeys)
}

// The domain's gate and score bands as JSON, for the schema and the
// descriptions: the edge states them, the domain applies and measures them.
var (
	defaultMinScore = ftoa(domain.DefaultMinScore)
	scoreStrong     = ftoa(domain.ScoreStrong)
	scoreWeak       = ftoa(domain.ScoreWeak)
)

// searchDescription tells agents how to read a score (the calibrated
// evidence of packages/knowledge/search/rrf.go) and what an empty answer means, so
// they neither trust a lone weak hit nor give up on a topic too early. It is
// sent with every tools/list: every sentence costs every agent tokens.
var searchDescription = `Search what the agents of your organisation have learned. Use it before starting work on a topic, before storing something (to avoid duplicates), and whenever you need facts about systems, decisions or past fixes.

Three ranked lists (meaning: embeddings, which with the server's default local embedder compare shared words, not paraphrases; words: full text; title) are fused. Hits come best first: id, title, snippet (up to ` + itoa(domain.SnippetChars) + ` characters of the body around the first match; the whole entry is at knowledge://{id}), tags, confidence (the author's ` + itoa(domain.MinConfidence) + `-` + itoa(domain.MaxConfidence) + ` certainty), kind, source, metadata, createdAt, expiresAt, score, signals. kind, source, sourcePrefix and metadata filter on those fields, documentId on a document's sections; mode lexical or semantic ranks by words and titles only or by meaning only.

score (0-1) is calibrated evidence, comparable across queries, org sizes and embedding models: ` + scoreStrong + ` or more: the hit answers the query (it holds the query's informative words, or means the same); ` + scoreWeak + ` to ` + scoreStrong + `: a partial match, read it; under ` + scoreWeak + `: weak, it shares some words or a vague likeness. One list at full evidence gives 0.63, lists agreeing add up to 1. Hits with almost no evidence are dropped (minScore, default ` + defaultMinScore + `), so no hits means nothing relevant is stored: try other words before concluding. signals are the raw evidence: cosine (meaning), bm25 (words), titleBm25, titleContains (title holds the whole query); vectorRank, fullTextRank, titleRank: place in each list (absent: not in it).

embeddingStatus "pending": not yet in the meaning list (joins within seconds); "failed": not until re-embedded. vectorSearch false (with a notice): the query could not be embedded; only words and titles were searched. reranked: whether a reranking model ordered the top hits (then each has rerankRank and signals.rerank); when false, rerankReason says why (not_configured, not_requested, no_hits, timeout, error, breaker_open) and the lists' order stands.

Superseded entries are hidden unless includeSuperseded; then superseded: true and headId names the replacement, which you should prefer.

hops 1 or ` + itoa(domain.MaxHops) + ` adds entries related to the hits (a runbook that FIXES a hit, the benchmark a hit DEPENDS_ON), even ones sharing no word with the query, within the same filters: each has via (fromId: the entry it was reached from, type: the relation as read from it, hops) and scores half of that entry's score per hop; at most limit are added.`

// minScoreDescription: see searchDescription.
var minScoreDescription = "Drop hits scoring below this, 0 to 1. The default (" + defaultMinScore +
	") drops hits with almost no evidence; " + scoreWeak + " drops weak hits; " + scoreStrong + " keeps only hits that answer the query; 0 keeps every hit with any evidence."

func searchTool() *mcp.Tool {
	return &mcp.Tool{
		Name:        ToolSearch,
		Title:       "Search knowledge",
		Description: searchDescription,
		InputSchema: inputSchema[SearchArgs](func(p map[string]*jsonschema.Schema) {
			lengthSchema(p["query"], 1, domain.MaxQueryChars)
			describe(p, "query", "What you want to know, in natural language or keywords (1 to %d characters).", domain.MaxQueryChars)
			intSchema(p["limit"], 1, domain.MaxLimit, domain.DefaultLimit)
			describe(p, "limit", "How many hits at most, 1 to %d. Default %d.", domain.MaxLimit, domain.DefaultLimit)
			tagsSchema(p["tags"])
			describe(p, "tags", "Only hits that carry all of these tags (up to %d; compared lowercased).", domain.MaxTags)
			p["includeSuperseded"].Default = []byte("false")
			p["includeExpired"].Default = []byte("false")
			m := p["minScore"]
			m.Minimum, m.Maximum = fptr(0), fptr(1)
			m.Description, m.Default = minScoreDescription, []byte(defaultMinScore)
			intSchema(p["efSearch"], 1, domain.MaxEfSearch, domain.DefaultEfSearch)
			describe(p, "efSearch", "Advanced: the HNSW probe width of the vector search, 1 to %d, default %d. Raise it only when you expect relevant hits that are not returned.", domain.MaxEfSearch, domain.DefaultEfSearch)
			p["asOf"].Format = "date-time"
			intSchema(p["maxTokens"], domain.MinMaxTokens, domain.MaxMaxTokens)
			describe(p, "maxTokens", "Approximate budget for the whole answer, in tokens (estimated as %d bytes of its JSON a token), from %d to %d: snippets are shortened, then the lowest-ranked hits left out, until it fits; the answer then says truncated: true and omittedHits. Omit for no budget.", domain.BytesPerToken, domain.MinMaxTokens, domain.MaxMaxTokens)
			intSchema(p["hops"], 0, domain.MaxHops, 0)
			describe(p, "hops", "Also return the entries related to the hits (link_knowledge) up to this many relations away, 0 to %d. Default 0.", domain.MaxHops)
			relationTypesSchema(p["relationTypes"])
			describe(p, "relationTypes", "With hops: follow only these relation types, named as read from the hit (e.g. FIXED_BY: the entries that fix it); %s. Default: every type.", typeRule)
			uuidSchema(p["documentId"])
			filterSchema(p)
			p["mode"].Enum = []any{domain.ModeHybrid, domain.ModeLexical, domain.ModeSemantic}
			p["mode"].Default = []byte(`"` + domain.ModeHybrid + `"`)
			describe(p, "mode", "Which lists rank: %s (default: meaning, words and title, fused), %s (words and title only: for an identifier, an error code, a name; the query is not embedded), %s (meaning only: for a paraphrase).",
				domain.ModeHybrid, domain.ModeLexical, domain.ModeSemantic)
			p["rerank"].Default = []byte("true")
			p["rerank"].Description = "Let the server's reranking model, when it has one, order the best hits (in every mode). false keeps the lists' order and saves its time. Default true."
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

func (t *toolset) search(ctx context.Context, c domain.Caller, a *SearchArgs) (*domain.SearchResult, error) {
	in := domain.SearchInput{
		Query:             a.Query,
		Tags:              a.Tags,
		IncludeSuperseded: a.IncludeSuperseded,
		IncludeExpired:    a.IncludeExpired,
		MinScore:          a.MinScore,
		RelationTypes:     a.RelationTypes,
		Limit:             a.Limit,
		EfSearch:          a.EfSearch,
		MaxTokens:         a.MaxTokens,
		Filters:           a.filters(),
		Mode:              a.Mode,
		Rerank:            a.Rerank,
	}
	if a.Hops != nil {
		in.Hops = *a.Hops
	}
	var err error
	if in.AsOf, err = parseTime("asOf", a.AsOf); err != nil {
		return nil, err
	}
	if in.DocumentID, err = parseUUID("documentId", a.DocumentID); err != nil {
		return nil, err
	}
	res, err := t.svc.Search(ctx, c, in)
	if err == nil && res.Hits == nil {
		res.Hits = []domain.Hit{} // "hits": [] rather than null
	}
	return res, err
}
