package knowledge

import (
	"context"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/packages/errs"
	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// Limits of store_knowledge (SPEC.md), from the domain so the schema, the
// edge checks and the domain's own validation cannot drift apart.
const (
	maxTitle      = domain.MaxTitleChars
	maxBody       = domain.MaxBodyChars
	maxTags       = domain.MaxTags
	maxTagLength  = domain.MaxTagChars
	minConfidence = 0
	maxConfidence = 100
)

// StoreArgs are the arguments of store_knowledge.
type StoreArgs struct {
	Title       string       `json:"title" jsonschema:"A short, specific headline of what was learned (1 to 200 characters)."`
	Body        string       `json:"body" jsonschema:"The knowledge itself: facts, steps, caveats, links (1 to 32000 characters). Write it so another agent can act on it without this conversation."`
	Tags        []string     `json:"tags,omitempty" jsonschema:"Up to 16 kebab-case tags such as postgres or ci-flakes. They are normalised for you (lowercased; spaces and underscores become hyphens); a tag that is still not kebab-case after that (such as c++) is refused."`
	Confidence  *int         `json:"confidence,omitempty" jsonschema:"How sure you are, 0 to 100. Default 80."`
	ExpiresAt   string       `json:"expiresAt,omitempty" jsonschema:"When this stops being true, as an RFC 3339 date-time strictly in the future. Expired entries are left out of search by default. Omit for knowledge that does not expire."`
	TaskRef     *TaskRefArgs `json:"taskRef,omitempty" jsonschema:"Links the new entry to an orchestration task of your org."`
	ClientToken string       `json:"clientToken,omitempty" jsonschema:"A UUID you choose to make retries safe: a repeat with the same clientToken within 60 seconds returns the first answer (replayed: true) and stores nothing new."`
	IfSimilar   string       `json:"ifSimilar,omitempty" jsonschema:"What to do when an existing entry of your organisation already says this: store (default) stores yours and lists the look-alikes in similar; skip stores nothing when one scores at least 0.8 and answers that entry, with skipped: true."`
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

similar lists up to 3 existing current entries of your organisation that look like the same knowledge (id, title, score from 0.4 to 1: the larger of the share of words the two have in common and how close their meanings are; 1 is the same text). similarCheck says how that was checked: "words+meaning", or "words" when the meaning could not be compared in time (a paraphrase in other words may then be missing from similar), "meaning", or "none". Read them: if one says the same as yours, keep one of the two, by superseding the older with the newer or better one (supersede_knowledge), so the next agent finds one answer instead of several. With ifSimilar: "skip", nothing is stored when an entry scores at least 0.8: the answer is that entry (its id, title, ...) with skipped: true, and no quota is used; below 0.8, or when no check answered, yours is stored.

Errors come back as isError results starting with a code: invalid_argument (names the argument and the rule; fix and retry), not_found (taskRef.taskId is not a task of your org), quota_exceeded (your org stored as many entries as it may; do not retry), conflict (the same clientToken is still being processed; retry in a moment), unavailable (retry later).`,
		InputSchema: inputSchema[StoreArgs](func(p map[string]*jsonschema.Schema) {
			entrySchema(p)
			uuidSchema(p["clientToken"])
			// The values are the domain's rule (StoreInput.IfSimilar): the
			// edge passes the string on, the domain names it if it is bad.
			p["ifSimilar"].Enum = []any{domain.IfSimilarStore, domain.IfSimilarSkip}
			p["ifSimilar"].Default = []byte(`"` + domain.IfSimilarStore + `"`)
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

// entrySchema states the rules of an entry's fields (store_knowledge, and
// supersede_knowledge's replacement).
func entrySchema(p map[string]*jsonschema.Schema) {
	lengthSchema(p["title"], 1, maxTitle)
	lengthSchema(p["body"], 1, maxBody)
	tags := p["tags"]
	tags.MaxItems = iptr(maxTags)
	lengthSchema(tags.Items, 1, maxTagLength)
	c := p["confidence"]
	c.Minimum, c.Maximum, c.Default = fptr(minConfidence), fptr(maxConfidence), []byte("80")
	p["expiresAt"].Format = "date-time"
	tr := p["taskRef"]
	uuidSchema(tr.Properties["taskId"])
	tr.Properties["kind"].Enum = []any{string(domain.LinkReferences), string(domain.LinkProduced)}
}

// check enforces the rules of store_knowledge that the schema states.
func (a *StoreArgs) check() error {
	if err := checkText("title", a.Title, 1, maxTitle); err != nil {
		return err
	}
	if err := checkText("body", a.Body, 1, maxBody); err != nil {
		return err
	}
	if len(a.Tags) > maxTags {
		return errs.InvalidArgument("tags", "must have at most %d tags (got %d)", maxTags, len(a.Tags))
	}
	for i, tag := range a.Tags {
		field := fmt.Sprintf("tags[%d]", i)
		if err := checkText(field, tag, 1, maxTagLength); err != nil {
			return err
		}
		// Kebab-case after normalisation is the domain's rule
		// (packages/knowledge, normaliseTags); it answers with this
		// argument's name.
	}
	if err := checkIntRange("confidence", a.Confidence, minConfidence, maxConfidence); err != nil {
		return err
	}
	exp, err := parseTime("expiresAt", a.ExpiresAt)
	if err != nil {
		return err
	}
	if exp != nil && !exp.After(time.Now()) {
		return errs.InvalidArgument("expiresAt", "must be strictly in the future (got %s)", exp.UTC().Format(time.RFC3339))
	}
	if a.TaskRef != nil {
		if _, err := parseUUID("taskRef.taskId", a.TaskRef.TaskID, true); err != nil {
			return err
		}
		switch domain.LinkKind(a.TaskRef.Kind) {
		case domain.LinkReferences, domain.LinkProduced:
		case "":
			return errs.InvalidArgument("taskRef.kind", "is required: references or produced")
		default:
			return errs.InvalidArgument("taskRef.kind", "must be references or produced (got %s)", quoteShort(a.TaskRef.Kind))
		}
	}
	if _, err := parseUUID("clientToken", a.ClientToken, false); err != nil {
		return err
	}
	return nil
}

// input converts checked arguments to the domain's typed input. Whether
// expiresAt lies in the future is the domain's rule (it owns the clock).
func (a *StoreArgs) input() (domain.StoreInput, error) {
	in := domain.StoreInput{Title: a.Title, Body: a.Body, Tags: a.Tags, Confidence: a.Confidence, IfSimilar: a.IfSimilar}
	var err error
	if in.ExpiresAt, err = parseTime("expiresAt", a.ExpiresAt); err != nil {
		return in, err
	}
	if a.TaskRef != nil {
		id, err := parseUUID("taskRef.taskId", a.TaskRef.TaskID, true)
		if err != nil {
			return in, err
		}
		in.TaskRef = &domain.TaskRef{TaskID: *id, Kind: domain.LinkKind(a.TaskRef.Kind)}
	}
	if in.ClientToken, err = parseUUID("clientToken", a.ClientToken, false); err != nil {
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
