package knowledge

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// StoreArgs are the arguments of store_knowledge. Descriptions that state
// a limit are set in entrySchema, from the domain's constants.
type StoreArgs struct {
	Title       string         `json:"title"`
	Body        string         `json:"body"`
	Tags        []string       `json:"tags,omitempty"`
	Confidence  *int           `json:"confidence,omitempty"`
	ExpiresAt   string         `json:"expiresAt,omitempty" jsonschema:"When this stops being true, as an RFC 3339 date-time strictly in the future. Expired entries are left out of search by default. Omit for knowledge that does not expire."`
	TaskRef     *TaskRefArgs   `json:"taskRef,omitempty" jsonschema:"Links the new entry to an orchestration task of your org."`
	ClientToken string         `json:"clientToken,omitempty"`
	IfSimilar   string         `json:"ifSimilar,omitempty"`
	Source      string         `json:"source,omitempty"`
	Kind        string         `json:"kind,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// TaskRefArgs link a new entry to a task.
type TaskRefArgs struct {
	TaskID string `json:"taskId" jsonschema:"The task's UUID; the task must exist in your org."`
	Kind   string `json:"kind" jsonschema:"references: the entry informed the task; produced: the task produced the entry."`
}

func storeTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolStore,
		Title: "Store knowledge",
		Description: `Save something you learned so other agents of your organisation can find it later with search_knowledge.

Use it for durable, reusable facts: how a system behaves, a fix that worked, a decision and its reason, a pitfall. Do not store secrets or transient chatter. Search first: if an entry already says it, don't duplicate it; if yours replaces an older entry, store yours and then call supersede_knowledge(oldId, newId).

Returns the new entry: id (keep it to supersede or link later), title, normalised tags, confidence, expiresAt, createdAt, taskLink when taskRef was given, and embeddingStatus. embeddingStatus is "pending" right after storing: the entry is immediately findable by its words and title, and joins semantic (vector) search a few seconds later once its embedding is "ready" (it is "ready" at once when the store could reuse the vector of its duplicate check). replayed: true means this was a retry with the same clientToken and nothing new was stored.

similar lists up to ` + itoa(domain.MaxSimilar) + ` existing current entries of your organisation that look like the same knowledge (id, title, score from ` + ftoa(domain.SimilarThreshold) + ` to 1: the larger of the share of words the two have in common and how close their meanings are; 1 is the same text). similarCheck says how that was checked: "words+meaning", or "words" when the meaning was not compared before the answer (a paraphrase in other words may then be missing from similar), "meaning", or "none". The store does not wait for the embedding model by default: the meaning is compared before the answer only when a vector of your text is already at hand; otherwise similarPending: true says the comparison by meaning runs once the entry is embedded, a few seconds later, and get_knowledge then shows its result in similar (check: "pending", then "done" with entries). To have it in this answer, pass ifSimilar: "report" (the store then waits for the model, within the server's embedding budget, 1 s by default). Read them: if one says the same as yours, keep one of the two, by superseding the older with the newer or better one (supersede_knowledge), so the next agent finds one answer instead of several. With ifSimilar: "skip" the store also waits for the whole check, and nothing is stored when an entry scores at least ` + ftoa(domain.SkipThreshold) + `: the answer is that entry (its id, title, ...) with skipped: true, and no quota is used; below ` + ftoa(domain.SkipThreshold) + `, or when no check answered, yours is stored.

Errors come back as isError results starting with a code: invalid_argument (names the argument and the rule; fix and retry), not_found (taskRef.taskId is not a task of your org), quota_exceeded (your org stored as many entries as it may; do not retry), conflict (the same clientToken is still being processed; retry in a moment), unavailable (retry later).`,
		InputSchema: inputSchema[StoreArgs](func(p map[string]*jsonschema.Schema) {
			entrySchema(p)
			describe(p, "title", "A short, specific headline of what was learned (1 to %d characters).", domain.MaxTitleChars)
			describe(p, "body", "The knowledge itself: facts, steps, caveats, links (1 to %d characters). Write it so another agent can act on it without this conversation.", domain.MaxBodyChars)
			describe(p, "tags", "Up to %d kebab-case tags such as postgres or ci-flakes. They are normalised for you (lowercased; spaces and underscores become hyphens); a tag that is still not kebab-case after that (such as c++) is refused.", domain.MaxTags)
			describe(p, "confidence", "How sure you are, %d to %d. Default %d.", domain.MinConfidence, domain.MaxConfidence, domain.DefaultConf)
			uuidSchema(p["clientToken"])
			describe(p, "clientToken", "A UUID you choose to make retries safe: a repeat with the same clientToken within %d seconds returns the first answer (replayed: true) and stores nothing new.", int(domain.ReplayWindow.Seconds()))
			p["ifSimilar"].Enum = []any{domain.IfSimilarStore, domain.IfSimilarReport, domain.IfSimilarSkip}
			p["ifSimilar"].Default = []byte(`"` + domain.IfSimilarStore + `"`)
			describe(p, "ifSimilar", "What to do when an existing entry of your organisation already says this: %s (default) stores yours at once and lists the look-alikes found by words (and by meaning when possible without waiting) in similar, the comparison by meaning finishing after the answer (similarPending; get_knowledge shows it); %s stores yours after the whole check, waiting for the embedding model (within the server's embedding budget, 1 s by default), and lists every look-alike in this answer; %s waits likewise, then stores nothing when one scores at least %s and answers that entry, with skipped: true.",
				domain.IfSimilarStore, domain.IfSimilarReport, domain.IfSimilarSkip, ftoa(domain.SkipThreshold))
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Store knowledge",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  false,
			OpenWorldHint:   new(false),
		},
	}
}

// entrySchema states the limits of an entry's fields (store_knowledge, and
// supersede_knowledge's replacement, whose descriptions refer to
// store_knowledge's).
func entrySchema(p map[string]*jsonschema.Schema) {
	lengthSchema(p["title"], 1, domain.MaxTitleChars)
	lengthSchema(p["body"], 1, domain.MaxBodyChars)
	tagsSchema(p["tags"])
	intSchema(p["confidence"], domain.MinConfidence, domain.MaxConfidence, domain.DefaultConf)
	p["expiresAt"].Format = "date-time"
	tr := p["taskRef"]
	uuidSchema(tr.Properties["taskId"])
	tr.Properties["kind"].Enum = []any{string(domain.LinkReferences), string(domain.LinkProduced)}
	fieldsSchema(p)
}

// fieldsSchema states the entry fields' rules (store_knowledge and a
// replacement): source, kind, metadata.
func fieldsSchema(p map[string]*jsonschema.Schema) {
	lengthSchema(p["source"], 1, domain.MaxSourceChars)
	describe(p, "source", "Where this knowledge came from: a URL, a file path, a ticket id (1 to %d characters). get_knowledge can find the entry by it, and search_knowledge and list_knowledge filter on it (exactly, or by prefix).", domain.MaxSourceChars)
	kindSchema(p["kind"])
	p["kind"].Default = []byte(`"` + domain.DefaultKind + `"`)
	describe(p, "kind", "What kind of knowledge: %s (a fact; the default), %s (what happened: an incident, a run), %s (how to do something: steps, a runbook), %s (reference material: a document, a table).",
		domain.KindSemantic, domain.KindEpisodic, domain.KindProcedural, domain.KindReference)
	metadataSchema(p["metadata"])
	describe(p, "metadata", "Flat attributes to filter on later, such as {\"env\": \"prod\", \"service\": \"billing\"}: at most %d keys in lower snake case (%s, up to %d characters), values strings, numbers or booleans (no null, arrays or objects), at most %d bytes as compact JSON.",
		domain.MaxMetadataKeys, domain.MetadataKeyPattern, domain.MaxMetadataKeyChars, domain.MaxMetadataBytes)
}

// kindSchema lists the kinds of an entry (storing and filtering alike).
func kindSchema(s *jsonschema.Schema) {
	s.Enum = make([]any, len(domain.Kinds))
	for i, k := range domain.Kinds {
		s.Enum[i] = k
	}
}

// metadataSchema states the shape of metadata (storing and filtering
// alike): a flat object of scalar values.
func metadataSchema(s *jsonschema.Schema) {
	s.Type, s.Types = "object", nil
	s.MaxProperties = iptr(domain.MaxMetadataKeys)
	s.PropertyNames = &jsonschema.Schema{Type: "string", Pattern: domain.MetadataKeyPattern, MaxLength: iptr(domain.MaxMetadataKeyChars)}
	s.AdditionalProperties = &jsonschema.Schema{Types: []string{"string", "number", "boolean"}}
}

// input decodes the arguments into the domain's input; the rules are the
// domain's (Service.Store).
func (a *StoreArgs) input() (domain.StoreInput, error) {
	in := domain.StoreInput{Title: a.Title, Body: a.Body, Tags: a.Tags, Confidence: a.Confidence, IfSimilar: a.IfSimilar,
		Source: a.Source, Kind: a.Kind, Metadata: a.Metadata}
	var err error
	if in.ExpiresAt, err = parseTime("expiresAt", a.ExpiresAt); err != nil {
		return in, err
	}
	if a.TaskRef != nil {
		id, err := parseID("taskRef.taskId", a.TaskRef.TaskID)
		if err != nil {
			return in, err
		}
		in.TaskRef = &domain.TaskRef{TaskID: id, Kind: domain.LinkKind(a.TaskRef.Kind)}
	}
	if in.ClientToken, err = parseUUID("clientToken", a.ClientToken); err != nil {
		return in, err
	}
	return in, nil
}

func (t *toolset) store(ctx context.Context, c domain.Caller, a *StoreArgs) (*domain.StoreResult, error) {
	in, err := a.input()
	if err != nil {
		return nil, err
	}
	res, err := t.svc.Store(ctx, c, in)
	if err == nil && res.Skipped {
		// Audited, logged and counted as a call that stored nothing.
		setOutcome(ctx, OutcomeSkipped, "")
	}
	return res, err
}

// OutcomeSkipped is the outcome of a store_knowledge call that stored
// nothing because of ifSimilar: skip (audit trail, logs, metrics).
const OutcomeSkipped = "skipped"

// StoreRecordKey is the Redis key of the idempotence record a call of
// tool with args would read, when it is a store_knowledge with a
// clientToken, else "": the server's gate reads it in its rate limits'
// round trip (a pipeline) and hands what it read to the store
// (knowledge.WithStoreRecord), so that the store's idempotence costs no
// round trip of its own. A token the store will refuse reads nothing.
func StoreRecordKey(tool string, args json.RawMessage, org, agent uuid.UUID) string {
	if tool != ToolStore || !bytes.Contains(args, []byte(`"clientToken"`)) {
		return ""
	}
	var a struct {
		ClientToken string `json:"clientToken"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	tok, err := parseUUID("clientToken", a.ClientToken)
	if err != nil || tok == nil {
		return ""
	}
	return domain.IdempotenceKey(org, agent, *tok)
}
