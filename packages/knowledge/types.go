package knowledge

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/snippet"
)

// Caller is who makes a call: always taken from a verified token (or, for
// task runners, from the orchestrator's own context), never from arguments.
type Caller struct {
	OrgID   uuid.UUID
	AgentID uuid.UUID
}

// Embedding statuses of an entry.
const (
	EmbeddingPending = "pending"
	EmbeddingReady   = "ready"
	EmbeddingFailed  = "failed"
)

// LinkKind is the kind of a task-knowledge edge.
type LinkKind string

const (
	LinkReferences LinkKind = "references"
	LinkProduced   LinkKind = "produced"
)

// TaskRef asks Store to link the new entry to a task of the caller's org.
type TaskRef struct {
	TaskID uuid.UUID
	Kind   LinkKind
}

// StoreInput is the store_knowledge call. Zero values mean "not given".
type StoreInput struct {
	Title       string
	Body        string
	Tags        []string
	Confidence  *int       // MinConfidence..MaxConfidence; nil: DefaultConf
	ExpiresAt   *time.Time // must be strictly in the future
	TaskRef     *TaskRef
	ClientToken *uuid.UUID // idempotence key
	// IfSimilar says what to do when an existing entry looks like the
	// same knowledge: IfSimilarStore (the default, also ""), or
	// IfSimilarSkip: store nothing and answer that entry (similar.go,
	// SkipThreshold).
	IfSimilar string
	// Source says where the knowledge came from (a URL, a path, a ticket
	// id; at most MaxSourceChars); "" for none.
	Source string
	// Kind is one of Kinds; "": DefaultKind.
	Kind string
	// Metadata is a flat object of at most MaxMetadataKeys keys (lower
	// snake case) with string, number or boolean values, at most
	// MaxMetadataBytes as compact JSON (fields.go).
	Metadata map[string]any
}

// The values of StoreInput.IfSimilar.
const (
	IfSimilarStore = "store"
	IfSimilarSkip  = "skip"
)

// StoreResult is the answer of Store; a replay returns the first answer with
// Replayed set.
type StoreResult struct {
	ID              uuid.UUID  `json:"id"`
	Title           string     `json:"title"`
	Tags            []string   `json:"tags"`
	Confidence      int        `json:"confidence"`
	ExpiresAt       *time.Time `json:"expiresAt,omitempty"`
	EmbeddingStatus string     `json:"embeddingStatus"`
	CreatedAt       time.Time  `json:"createdAt"`
	TaskLink        *TaskLink  `json:"taskLink,omitempty"`
	Replayed        bool       `json:"replayed,omitempty"`
	// The entry's fields as stored (fields.go).
	Source   string         `json:"source,omitempty"`
	Kind     string         `json:"kind"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// Similar lists up to MaxSimilar existing head entries of the org that
	// look like the same knowledge (similar.go); empty when none, or when
	// the check could not run within its budget (the store is never held
	// up or failed by it).
	Similar []Similar `json:"similar"`
	// SimilarCheck says how the duplicate check was made (similar.go):
	// SimilarCheckWordsMeaning, SimilarCheckWords (the new text had no
	// vector in time: past the embed budget, the embedder down, or an
	// unsupported width), SimilarCheckMeaning (the word check failed) or
	// SimilarCheckNone (no check answered in time; similar is then []).
	SimilarCheck string `json:"similarCheck"`
	// Skipped: ifSimilar was skip and an existing entry scored at least
	// SkipThreshold; nothing was stored, and the answer is that entry
	// (ID, Title, ...), also listed first in Similar.
	Skipped bool `json:"skipped,omitempty"`
}

// SearchInput is the search_knowledge call. A nil pointer is an argument
// not given (its default); a pointer to 0 is an explicit 0, refused where
// the range excludes it.
type SearchInput struct {
	Query             string
	Limit             *int // 1..MaxLimit; nil: DefaultLimit
	Tags              []string
	IncludeSuperseded bool
	IncludeExpired    bool
	MinScore          *float64 // 0..1; nil: DefaultMinScore
	EfSearch          *int     // 1..MaxEfSearch; nil: DefaultEfSearch
	// AsOf, when set, answers what the org knew then: entries created at
	// or before it, superseded or expired only if they were by then.
	// Forgotten entries stay forgotten. Must not be in the future.
	AsOf *time.Time
	// Hops (0..MaxHops, default 0) adds the entries reachable from the
	// hits over that many relations (hops.go); RelationTypes, names as
	// read from the hit, limits which (nil: every type). Relations are the
	// open ones, or with AsOf those valid then.
	Hops          int
	RelationTypes []string
	// MaxTokens, when given (MinMaxTokens..MaxMaxTokens), trims the answer
	// to about that many tokens (budget.go, FitSearch).
	MaxTokens *int
	// Filters on the entry fields (kind, source, source prefix, metadata).
	Filters
	// DocumentID: only the sections of this document (store_document),
	// as list_knowledge's DocumentID reads them; another org's document,
	// like a missing one, has no sections to find (no hits).
	DocumentID *uuid.UUID
	// Mode is which lists rank: ModeHybrid ("" too: all three, fused),
	// ModeLexical (full text and title; the query is not embedded) or
	// ModeSemantic (the vector list alone).
	Mode string
}

// The values of SearchInput.Mode.
const (
	ModeHybrid   = "hybrid"
	ModeLexical  = "lexical"
	ModeSemantic = "semantic"
)

// Modes lists the search modes, the default first.
var Modes = []string{ModeHybrid, ModeLexical, ModeSemantic}

// SnippetChars is the longest snippet of a hit, in characters (runes),
// ellipses included.
const SnippetChars = snippet.Chars

// Hit is one search result.
type Hit struct {
	ID      uuid.UUID `json:"id"`
	Title   string    `json:"title"`
	Snippet string    `json:"snippet"`
	// Score is the calibrated fused score in [0, 1] (rrf.go): about the
	// share of the query the entry answers, times how many of the three
	// lists agree (a hit found by one list scores at most 1/3).
	Score      float64    `json:"score"`
	Tags       []string   `json:"tags"`
	Confidence int        `json:"confidence"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// Superseded hits (only with IncludeSuperseded) name the head of their chain.
	Superseded      bool       `json:"superseded"`
	HeadID          *uuid.UUID `json:"headId,omitempty"`
	EmbeddingStatus string     `json:"embeddingStatus"`
	// Ranks in each list (1-based; 0: not in that list).
	VectorRank   int `json:"vectorRank,omitempty"`
	FullTextRank int `json:"fullTextRank,omitempty"`
	TitleRank    int `json:"titleRank,omitempty"`
	// Signals are the raw signals of the lists that found the hit.
	Signals Signals `json:"signals"`
	// Via is set on an entry the search added by following relations from
	// a hit (SearchInput.Hops): from which entry, over which relation, how
	// many relations away. Such an entry has no ranks and no signals, and
	// scores HopDecay times the entry it was reached from.
	Via *Via `json:"via,omitempty"`
	// The entry's fields (fields.go).
	Source   string         `json:"source,omitempty"`
	Kind     string         `json:"kind"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// Document is set on a section of a document (store_document): the
	// document and the section's heading path in it.
	Document *DocumentRef `json:"document,omitempty"`
}

// Signals are a hit's raw evidence, one per list that found it (nil: not
// found by that list). They are not comparable across lists; the fused
// Score is.
type Signals struct {
	// Cosine is the cosine similarity of the query's and the entry's
	// vectors (-1..1; its scale depends on the embedding model).
	Cosine *float64 `json:"cosine,omitempty"`
	// BM25 is the entry's BM25 score for the query over title and body,
	// with the org's statistics (0..; grows with the query's length).
	BM25 *float64 `json:"bm25,omitempty"`
	// TitleBM25 is the BM25 score over the title alone.
	TitleBM25 *float64 `json:"titleBm25,omitempty"`
	// TitleContains: the title holds the whole query (case-insensitive).
	TitleContains bool `json:"titleContains,omitempty"`
}

// SearchResult is the answer of Search.
type SearchResult struct {
	Hits []Hit `json:"hits"`
	// VectorSearch is false when the query could not be embedded and the
	// answer comes from the two lexical lists only; Notice says why.
	VectorSearch bool   `json:"vectorSearch"`
	Notice       string `json:"notice,omitempty"`
	// Truncated: the answer was trimmed to the call's token budget
	// (maxTokens, budget.go): snippets shortened, and OmittedHits of the
	// lowest-ranked hits left out.
	Truncated   bool `json:"truncated,omitempty"`
	OmittedHits int  `json:"omittedHits,omitempty"`
}

// SupersedeResult is the answer of Supersede.
type SupersedeResult struct {
	OldID  uuid.UUID `json:"oldId"`
	NewID  uuid.UUID `json:"newId"`
	HeadID uuid.UUID `json:"headId"` // the head of the chain now
	// Moved counts the entries whose cached head changed.
	Moved int `json:"moved"`
	// AlreadySuperseded: oldId was already superseded by newId; nothing changed.
	AlreadySuperseded bool `json:"alreadySuperseded,omitempty"`
}

// TaskLink is one task-knowledge edge.
type TaskLink struct {
	TaskID      uuid.UUID `json:"taskId"`
	KnowledgeID uuid.UUID `json:"knowledgeId"`
	Kind        LinkKind  `json:"kind"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Entry is one whole entry, as the knowledge://{id} resource shows it.
type Entry struct {
	ID uuid.UUID `json:"id"`
	// State is "head" (current knowledge), "superseded" (read headId
	// instead), "expired" (a head past its expiresAt) or, for a forgotten
	// entry read by its author or by the agent that forgot it, "forgotten":
	// then only the tombstone's fields are given (see Forgotten).
	State      string   `json:"state"`
	Title      string   `json:"title"`
	Body       string   `json:"body"`
	Tags       []string `json:"tags"`
	Confidence int      `json:"confidence"`
	// Origin is who made the entry: OriginAgent, OriginOperator or
	// OriginImport. Source, Kind and Metadata are the agent's (fields.go).
	Origin           string         `json:"origin"`
	Source           string         `json:"source,omitempty"`
	Kind             string         `json:"kind"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	CreatedByAgentID *uuid.UUID     `json:"createdByAgentId,omitempty"`
	ExpiresAt        *time.Time     `json:"expiresAt,omitempty"`
	CreatedAt        time.Time      `json:"createdAt"`
	UpdatedAt        time.Time      `json:"updatedAt"`

	EmbeddingStatus string     `json:"embeddingStatus"`
	EmbeddingModel  string     `json:"embeddingModel,omitempty"`
	EmbeddingError  string     `json:"embeddingError,omitempty"`
	EmbeddedAt      *time.Time `json:"embeddedAt,omitempty"`

	SupersededBy *uuid.UUID  `json:"supersededBy,omitempty"` // direct successor
	HeadID       *uuid.UUID  `json:"headId,omitempty"`       // head of the chain, when superseded
	SupersededAt *time.Time  `json:"supersededAt,omitempty"`
	Supersedes   []uuid.UUID `json:"supersedes,omitempty"` // entries this one directly replaced
	// Chain is the supersession history around the entry: every recorded
	// replacement that led to it (predecessors, transitively) and every one
	// from it to its chain's head (successors), with who and when.
	Chain []ChainLink `json:"chain"`

	TaskLinks []TaskLink `json:"taskLinks"`

	// Relations summarises the entry's open typed relations (relations.go):
	// counts by type as read from this entry and the newest few;
	// list_relations pages through all of them.
	Relations *RelationSummary `json:"relations,omitempty"`

	// Document is set on a document entry (store_document): its source and
	// its current sections in order. Section is set on a section entry:
	// its document and its heading path there.
	Document *DocumentInfo `json:"document,omitempty"`
	Section  *DocumentRef  `json:"section,omitempty"`

	// Forgotten is set, and nothing else but ID and State, when the entry
	// was forgotten: it then reads as its tombstone.
	Forgotten *Tombstone `json:"-"`
}

// MarshalJSON gives a forgotten entry as its tombstone, and every other
// entry field by field.
func (e *Entry) MarshalJSON() ([]byte, error) {
	if e.Forgotten != nil {
		return json.Marshal(e.Forgotten)
	}
	type plain Entry
	return json.Marshal((*plain)(e))
}

// Entry states.
const (
	StateHead       = "head"
	StateSuperseded = "superseded"
	StateExpired    = "expired"
)

func stateOf(supersededBy *uuid.UUID, expiresAt *time.Time, now time.Time) string {
	switch {
	case supersededBy != nil:
		return StateSuperseded
	case expiresAt != nil && !expiresAt.After(now):
		return StateExpired
	}
	return StateHead
}

// ChainLink is one recorded supersession: OldID was replaced by NewID.
type ChainLink struct {
	// Direction is "predecessor" (the link led to this entry) or
	// "successor" (it leads from this entry towards the head).
	Direction string    `json:"direction"`
	OldID     uuid.UUID `json:"oldId"`
	NewID     uuid.UUID `json:"newId"`
	ByAgentID uuid.UUID `json:"byAgentId"`
	At        time.Time `json:"at"`
}

// EmbeddingJob identifies the embedding work for one entry at one generation.
// A job of an older generation than the entry's is stale and does nothing.
type EmbeddingJob struct {
	OrgID      uuid.UUID `json:"orgId"`
	EntryID    uuid.UUID `json:"entryId"`
	Generation int32     `json:"generation"`
}

// Enqueuer hands committed entries to the embeddings pipeline. It is called
// after commit; a failure is logged, not returned to the caller, because the
// entry's pending status is the outbox and the reconciler re-enqueues it.
type Enqueuer interface {
	EnqueueEmbedding(ctx context.Context, job EmbeddingJob) error
}
