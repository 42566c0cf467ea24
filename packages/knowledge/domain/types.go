package domain

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
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
	// same knowledge: IfSimilarStore (the default, also ""): store, with
	// the check by words and by a vector already at hand, the check by
	// meaning finished after the answer; IfSimilarReport: store, after the
	// whole check (waiting for the provider within the embed budget); or
	// IfSimilarSkip: the whole check first, and store nothing but answer
	// that entry when one scores SkipThreshold (entries/similar.go).
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
	IfSimilarStore  = "store"
	IfSimilarReport = "report"
	IfSimilarSkip   = "skip"
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
	// look like the same knowledge (entries/similar.go); empty when none, or when
	// the check could not run within its budget (the store is never held
	// up or failed by it).
	Similar []Similar `json:"similar"`
	// SimilarCheck says how the duplicate check was made (entries/similar.go):
	// SimilarCheckWordsMeaning, SimilarCheckWords (the new text had no
	// vector in time: past the embed budget, the embedder down, or an
	// unsupported width), SimilarCheckMeaning (the word check failed) or
	// SimilarCheckNone (no check answered in time; similar is then []).
	SimilarCheck string `json:"similarCheck"`
	// SimilarPending: the check by meaning was left to the embeddings
	// worker (the store did not wait for the provider: IfSimilarStore with
	// no vector at hand, or the provider past its budget); it runs once the
	// entry is embedded, and Entry.Similar (get_knowledge) shows it.
	SimilarPending bool `json:"similarPending,omitempty"`
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
	// hits over that many relations (search/hops.go); RelationTypes, names as
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
	// Rerank: false leaves the fused order as it is, even with a reranker
	// configured (nil: rerank when one is; every mode reranks).
	Rerank *bool
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
	// Score is the calibrated fused score in [0, 1] (search/rrf.go): about the
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
	// Ranks in each list (1-based; 0: not in that list), and the place
	// the reranker gave it (0: not reranked).
	VectorRank   int `json:"vectorRank,omitempty"`
	FullTextRank int `json:"fullTextRank,omitempty"`
	TitleRank    int `json:"titleRank,omitempty"`
	RerankRank   int `json:"rerankRank,omitempty"`
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
	// Document and the section's heading path in it.
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
	// Rerank is the reranker's relevance score (its scale is the model's).
	Rerank *float64 `json:"rerank,omitempty"`
}

// SearchResult is the answer of Search.
type SearchResult struct {
	Hits []Hit `json:"hits"`
	// VectorSearch is false when the query could not be embedded and the
	// answer comes from the two lexical lists only; Notice says why.
	VectorSearch bool   `json:"vectorSearch"`
	Notice       string `json:"notice,omitempty"`
	// Reranked says whether a reranker ordered the fused top hits; when
	// not, RerankReason says why (one of the RerankReason* values).
	Reranked     bool   `json:"reranked"`
	RerankReason string `json:"rerankReason,omitempty"`
	// Truncated: the answer was trimmed to the call's token budget
	// (maxTokens, budget.go): snippets shortened, and OmittedHits of the
	// lowest-ranked hits left out.
	Truncated   bool `json:"truncated,omitempty"`
	OmittedHits int  `json:"omittedHits,omitempty"`
}

// The values of SearchResult.RerankReason: why an answer was not reranked.
const (
	RerankNotConfigured = "not_configured" // the deployment has no reranker
	RerankNotRequested  = "not_requested"  // the call said rerank: false
	RerankNoHits        = "no_hits"        // nothing to rerank
	RerankTimeout       = "timeout"        // no answer within the rerank budget
	RerankError         = "error"          // the reranker failed (logged)
	RerankBreakerOpen   = "breaker_open"   // it failed repeatedly and is left alone for a while
)

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

	// Relations summarises the entry's open typed relations (package relations):
	// counts by type as read from this entry and the newest few;
	// list_relations pages through all of them.
	Relations *RelationSummary `json:"relations,omitempty"`

	// Document is set on a document entry (store_document): its source and
	// its current sections in order. Section is set on a section entry:
	// its document and its heading path there.
	Document *DocumentInfo `json:"document,omitempty"`
	Section  *DocumentRef  `json:"section,omitempty"`

	// Similar is the duplicate check the embeddings worker finishes after
	// the store's answer (StoreResult.SimilarPending): pending until the
	// entry is embedded, then what it found. Absent when the store's
	// answer held the whole check, or the entry had none.
	Similar *EntrySimilar `json:"similar,omitempty"`

	// Forgotten is set, and nothing else but ID and State, when the entry
	// was forgotten: it then reads as its tombstone.
	Forgotten *Tombstone `json:"-"`
}

// EntrySimilar is the duplicate check of an entry finished after its
// store answered (entries/finish.go).
type EntrySimilar struct {
	// Check is SimilarPending or SimilarDone.
	Check     string     `json:"check"`
	CheckedAt *time.Time `json:"checkedAt,omitempty"`
	// Entries are the org's entries the check found (by words and by
	// meaning, as a store's similar list), best first, still existing, with
	// their titles as they are now; empty while pending or when it found
	// none.
	Entries []Similar `json:"entries"`
}

// The states of EntrySimilar.Check.
const (
	SimilarPending = "pending"
	SimilarDone    = "done"
)

// SimilarCheckJob is a duplicate check the embeddings worker finishes: an
// entry whose vector (Vector: its first chunk's, of the worker's model) is
// written, with its text (the check by words).
type SimilarCheckJob struct {
	OrgID, EntryID uuid.UUID
	Title, Body    string
	Vector         []float32
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

func StateOf(supersededBy *uuid.UUID, expiresAt *time.Time, now time.Time) string {
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

// ListInput are the arguments of list_knowledge: browse an org's entries
// without a query, newest first, one page at a time. Filters are optional
// and combine (AND).
type ListInput struct {
	Tags          []string   // entries holding all of them
	AuthorAgentID *uuid.UUID // entries stored by this agent
	TaskID        *uuid.UUID // entries linked to this task (either kind)
	// DocumentID: the sections of this document (store_document), ended
	// ones too (shown with IncludeSuperseded / IncludeExpired like any).
	DocumentID    *uuid.UUID
	CreatedAfter  *time.Time // strictly after
	CreatedBefore *time.Time // strictly before
	// IncludeSuperseded and IncludeExpired as in search.
	IncludeSuperseded bool
	IncludeExpired    bool
	Limit             *int   // 1..MaxListLimit; nil: DefaultListLimit
	Cursor            string // NextCursor of the previous page; "" for the first
	// AsOf as in search: what the org knew then.
	AsOf *time.Time
	// MaxTokens, when given (MinMaxTokens..MaxMaxTokens), trims the page
	// to about that many tokens (budget.go): shorter snippets, then fewer
	// hits (at least one), the next cursor after the last hit given.
	MaxTokens *int
	// Filters on the entry fields (kind, source, source prefix, metadata).
	Filters
}

// ListResult is one page. NextCursor is empty on the last page.
type ListResult struct {
	Hits       []ListedEntry `json:"hits"`
	NextCursor string        `json:"nextCursor,omitempty"`
	// Truncated: the page was trimmed to ListInput.MaxTokens (shorter
	// snippets, or fewer hits: the next page starts after the last one
	// given, so nothing is skipped).
	Truncated bool `json:"truncated,omitempty"`
}

// ListedEntry is an entry as a listing shows it: like a search hit (a
// snippet of the body's beginning, no body), without score or signals, with
// its author.
type ListedEntry struct {
	ID               uuid.UUID  `json:"id"`
	Title            string     `json:"title"`
	Snippet          string     `json:"snippet"`
	Tags             []string   `json:"tags"`
	Confidence       int        `json:"confidence"`
	CreatedByAgentID *uuid.UUID `json:"createdByAgentId,omitempty"`
	CreatedAt        time.Time  `json:"createdAt"`
	ExpiresAt        *time.Time `json:"expiresAt,omitempty"`
	Superseded       bool       `json:"superseded"`
	HeadID           *uuid.UUID `json:"headId,omitempty"`
	EmbeddingStatus  string     `json:"embeddingStatus"`
	// The entry's fields (fields.go).
	Source   string         `json:"source,omitempty"`
	Kind     string         `json:"kind"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// CorrectResult is the answer of a correction: the supersession, as
// Supersede answers it, and the replacement stored (Stored.Replayed on a
// retry with the same client token).
type CorrectResult struct {
	SupersedeResult
	Stored *StoreResult `json:"stored,omitempty"`
}

// DocumentRef names the document a section belongs to, as a search hit
// and a read of the section show it.
type DocumentRef struct {
	ID          uuid.UUID `json:"id"`
	Title       string    `json:"title"`
	Source      string    `json:"source,omitempty"`
	HeadingPath []string  `json:"headingPath"`
	// Position is the section's place in the document (0-based).
	Position int `json:"position"`
	// Ended says how a section left its document when a replacement
	// changed it ("changed": superseded by its new version) or removed it
	// ("retired": expired); empty while it is part of it.
	Ended string `json:"ended,omitempty"`
}

// DocumentInfo is what get_knowledge shows of a document entry: where it
// came from and its sections in order.
type DocumentInfo struct {
	Source string `json:"source,omitempty"`
	Format string `json:"format"`
	// Live: the current version of its source (false once a replacement
	// superseded this document entry).
	Live     bool              `json:"live"`
	Chars    int64             `json:"chars"`
	Sections []DocumentSection `json:"sections"`
}

// DocumentSection is one section in a document's listing.
type DocumentSection struct {
	ID              uuid.UUID `json:"id"`
	Title           string    `json:"title"`
	HeadingPath     []string  `json:"headingPath"`
	Chars           int       `json:"chars"`
	EmbeddingStatus string    `json:"embeddingStatus"`
}

// DocumentInput is the store_document call. Zero values mean "not given".
type DocumentInput struct {
	Title   string
	Content string
	// Source says where the document comes from (a URL, a path, a ticket
	// id). A store with the source of a live document of the org replaces
	// that document.
	Source   string
	Tags     []string
	Kind     string // DefaultDocumentKind when empty
	Metadata map[string]any
	// Format is FormatMarkdown (the default), FormatText or FormatHTML.
	Format      string
	ClientToken *uuid.UUID
}

// SectionRef is one section of a stored document, in order.
type SectionRef struct {
	ID          uuid.UUID `json:"id"`
	HeadingPath []string  `json:"headingPath"`
	Chars       int       `json:"chars"`
	// Status is SectionNew, SectionKept or SectionChanged.
	Status string `json:"status"`
	// Supersedes is the section a changed one replaced.
	Supersedes      *uuid.UUID `json:"supersedes,omitempty"`
	EmbeddingStatus string     `json:"embeddingStatus"`
}

// DocumentResult answers StoreDocument.
type DocumentResult struct {
	// ID is the document's entry: a new one when its title, table of
	// contents, tags, kind or metadata changed (the previous one is then
	// superseded by it: PreviousID), else the same as before.
	ID       uuid.UUID    `json:"id"`
	Title    string       `json:"title"`
	Source   string       `json:"source,omitempty"`
	Kind     string       `json:"kind"`
	Sections []SectionRef `json:"sections"`
	// Retired are the sections of the replaced document that are no
	// longer in it: they expired now (still readable by id and with asOf).
	Retired []uuid.UUID `json:"retired"`
	// Replaced: the source named a live document of the org, which this
	// store replaced (Unchanged: with the same content, nothing written).
	Replaced   bool       `json:"replaced"`
	Unchanged  bool       `json:"unchanged,omitempty"`
	PreviousID *uuid.UUID `json:"previousId,omitempty"`
	// New, Kept and Changed count the sections by status.
	New     int `json:"new"`
	Kept    int `json:"kept"`
	Changed int `json:"changed"`
	// QuotaUnits is how many units of the org's knowledge_stored quota the
	// store took: one per entry written.
	QuotaUnits int  `json:"quotaUnits"`
	Replayed   bool `json:"replayed,omitempty"`
}

// Tombstone is what is left of a forgotten entry: who wrote it and when,
// who forgot it, when and why. It holds no content.
type Tombstone struct {
	ID                 uuid.UUID  `json:"id"`
	State              string     `json:"state"` // always "forgotten"
	CreatedByAgentID   *uuid.UUID `json:"createdByAgentId,omitempty"`
	CreatedAt          time.Time  `json:"createdAt"`
	ForgottenByAgentID uuid.UUID  `json:"forgottenByAgentId"`
	ForgottenAt        time.Time  `json:"forgottenAt"`
	Reason             string     `json:"reason"`
	// Relations is how many open relations the entry had when it was
	// forgotten (they were erased with it; only the count is kept).
	Relations int `json:"relations"`
}

// ForgetResult answers Forget.
type ForgetResult struct {
	Tombstone
	// AlreadyForgotten: an earlier call forgot the entry; nothing changed.
	AlreadyForgotten bool `json:"alreadyForgotten"`
	// Relinked and HeadsAgain say how the entry's chain was repaired: the
	// entries that now point past it, and those that are heads again
	// because it was the head they pointed at.
	Relinked   int64 `json:"relinked"`
	HeadsAgain int64 `json:"headsAgain"`
	TaskLinks  int64 `json:"taskLinks"` // task links removed
	// Sections is how many section entries of a forgotten document were
	// forgotten with it (each leaves its own tombstone).
	Sections int64 `json:"sections,omitempty"`
}

// StateForgotten is the state of a forgotten entry's tombstone.
const StateForgotten = "forgotten"

// Via says how a hit added by hops was reached: from FromID (a direct hit,
// or an entry added by the hop before), over a relation of Type as read
// from FromID, Hops relations away from the direct hits.
type Via struct {
	FromID uuid.UUID `json:"fromId"`
	Type   string    `json:"type"`
	Hops   int       `json:"hops"`
}

// PurgeScope says what a purge erases: exactly one of Entry, Agent, All.
type PurgeScope struct {
	Entry uuid.UUID // one entry
	Agent uuid.UUID // every entry the agent created
	All   bool      // every entry of the org
}

// Validate checks that the scope names exactly one of Entry, Agent, All.
// PurgeWith checks it too; a caller that builds a scope from its own input
// (ctl purge's flags) calls it first to refuse before doing anything.
func (p PurgeScope) Validate() error {
	n := 0
	if p.Entry != uuid.Nil {
		n++
	}
	if p.Agent != uuid.Nil {
		n++
	}
	if p.All {
		n++
	}
	if n != 1 {
		return errs.InvalidArgument("scope", "give exactly one of entry, agent, all")
	}
	return nil
}

// PurgeReport is what a purge removed (or, in a dry run, would remove).
type PurgeReport struct {
	DryRun            bool  `json:"dryRun"`
	Entries           int64 `json:"entries"`
	TaskLinks         int64 `json:"taskLinks"`
	SupersessionEdges int64 `json:"supersessionEdges"` // recorded direct edges removed
	Relinked          int64 `json:"relinked"`          // surviving chain entries pointed past the erased ones
	HeadsAgain        int64 `json:"headsAgain"`        // surviving entries whose every successor was erased
	Relations         int64 `json:"relations"`         // relations (open or closed) the erased entries were an end of
	OpenRelations     int64 `json:"-"`                 // of which open (a tombstone keeps the count)
	Postings          int64 `json:"postings"`          // lexical index rows
	IdempotenceKeys   int64 `json:"idempotenceKeys"`   // Redis keys of recent stores
	// Uploads are the documents uploaded in parts (documents/uploads.go) the purge
	// deleted with their staged parts: the agent's (scope Agent) or the
	// org's (All); a purge of one entry leaves them.
	Uploads int64 `json:"uploads"`
	// IDs are the erased entries, for the caller's other clean-ups (queued
	// embedding jobs). Left empty for a purge of a whole org, whose clean-ups
	// match on the org.
	IDs []uuid.UUID `json:"-"`
}

// PurgeOptions are the optional settings of PurgeWith.
type PurgeOptions struct {
	DryRun bool
	// Progress, when set, is called after every batch with the report so
	// far (ctl purge shows it on large orgs).
	Progress func(PurgeReport)
}

// Add adds a batch's counts to r.
func (r *PurgeReport) Add(b *PurgeReport) {
	r.Entries += b.Entries
	r.TaskLinks += b.TaskLinks
	r.SupersessionEdges += b.SupersessionEdges
	r.Relinked += b.Relinked
	r.HeadsAgain += b.HeadsAgain
	r.Postings += b.Postings
	r.Relations += b.Relations
	r.OpenRelations += b.OpenRelations
	r.IDs = append(r.IDs, b.IDs...)
}

// RelationType is one type of the catalogue: its name, the name read from
// the other end (Inverse; the same for a symmetric type), and whether it is
// read only (derived from supersession).
type RelationType struct {
	Name      string `json:"name"`
	Inverse   string `json:"inverse"`
	Symmetric bool   `json:"symmetric"`
	// ReadOnly: derived from supersession (SUPERSEDES); link_knowledge
	// refuses it.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Builtin: shipped with the product; otherwise the org's own.
	Builtin bool `json:"builtin"`
}

// LinkInput is the link_knowledge call.
type LinkInput struct {
	FromID uuid.UUID
	ToID   uuid.UUID
	Type   string // a catalogue name or an inverse name
	Note   string // optional
}

// RelationChange answers Link and Unlink: the relation as the caller named
// it (fromId, type, toId), with the name it reads as from toId.
type RelationChange struct {
	ID               uuid.UUID  `json:"relationId"`
	FromID           uuid.UUID  `json:"fromId"`
	ToID             uuid.UUID  `json:"toId"`
	Type             string     `json:"type"`
	Inverse          string     `json:"inverse"`
	Note             string     `json:"note,omitempty"`
	CreatedByAgentID *uuid.UUID `json:"createdByAgentId,omitempty"`
	ValidFrom        time.Time  `json:"validFrom"`
	ValidTo          *time.Time `json:"validTo,omitempty"`
	// Existed (link): the same relation was already open; nothing changed.
	Existed bool `json:"existed,omitempty"`
	// AlreadyClosed (unlink): it had been closed before; nothing changed.
	AlreadyClosed bool `json:"alreadyClosed,omitempty"`
}

// RelationsInput is the list_relations call. Zero values mean defaults.
type RelationsInput struct {
	ID            uuid.UUID
	Direction     string   // "", out, in, both
	Types         []string // names as read from ID (an inverse name filters inbound relations)
	AsOf          *time.Time
	IncludeClosed bool
	Limit         *int // 1..MaxRelationsLimit; nil: DefaultRelationsLimit
	Cursor        string
}

// Relation is one relation of an entry, as read from it.
type Relation struct {
	// ID is the relation's id (nil for a relation derived from supersession).
	ID *uuid.UUID `json:"relationId,omitempty"`
	// Type is the name read from the entry: the inverse name for an
	// inbound relation of an asymmetric type.
	Type string `json:"type"`
	// Direction is "out" (the entry is the relation's from end), "in" or,
	// for a symmetric type, "both".
	Direction  string    `json:"direction"`
	OtherID    uuid.UUID `json:"otherId"`
	OtherTitle string    `json:"otherTitle"`
	// OtherState is the other entry's state: head, superseded or expired.
	OtherState       string     `json:"otherState"`
	Note             string     `json:"note,omitempty"`
	CreatedByAgentID *uuid.UUID `json:"createdByAgentId,omitempty"`
	ValidFrom        time.Time  `json:"validFrom"`
	// ValidTo is set once the relation was closed (unlink_knowledge).
	ValidTo *time.Time `json:"validTo,omitempty"`
	// Derived: from supersession (SUPERSEDES, SUPERSEDED_BY), read only.
	Derived bool `json:"derived,omitempty"`
}

// RelationsResult answers Relations.
type RelationsResult struct {
	Relations  []Relation `json:"relations"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// RelationCount is how many open relations of one type (as read from the
// entry) an entry has.
type RelationCount struct {
	Type  string `json:"type"`
	Count int64  `json:"count"`
}

// RelationSummary is the bounded summary of an entry's relations in
// get_knowledge and knowledge://{id}: the open relations (supersession's
// included) counted by type as read from the entry, and the newest
// RelationSummaryFirst of them; list_relations pages through the rest.
type RelationSummary struct {
	Open   int64           `json:"open"`
	ByType []RelationCount `json:"byType"`
	First  []Relation      `json:"first"`
}

// Similar is an existing head entry that looks like the same knowledge as
// a new one (store_knowledge's answer): the agent should read it and, if it
// says the same, supersede or forget instead of piling up duplicates.
type Similar struct {
	ID    uuid.UUID `json:"id"`
	Title string    `json:"title"`
	// Score is the larger of the two entries' word score (the Jaccard
	// similarity of their word sets: title and body, lower-cased, English
	// stop words left out) and their meaning score (MeaningScore: the
	// cosine of their vectors on the embedding model's calibration), on
	// one scale: SimilarThreshold is the least reported, SkipThreshold
	// what ifSimilar: skip takes for the same knowledge, 1 the same text.
	Score float64 `json:"score"`
}

// TaskEntry is one entry linked to a task, with the link.
type TaskEntry struct {
	Link            TaskLink   `json:"link"`
	ID              uuid.UUID  `json:"id"`
	Title           string     `json:"title"`
	Tags            []string   `json:"tags"`
	Confidence      int        `json:"confidence"`
	EmbeddingStatus string     `json:"embeddingStatus"`
	Superseded      bool       `json:"superseded"`
	HeadID          *uuid.UUID `json:"headId,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
}

// UploadStartInput is document_upload_start: what the document will be
// stored with (as DocumentInput, without its content) and its size.
type UploadStartInput struct {
	Title      string
	Source     string
	Tags       []string
	Kind       string
	Metadata   map[string]any
	Format     string
	TotalBytes int64 // UTF-8 bytes of the whole content, 1..MaxUploadBytes
}

// UploadStartResult is the answer of UploadStart.
type UploadStartResult struct {
	UploadID     uuid.UUID `json:"uploadId"`
	TotalBytes   int64     `json:"totalBytes"`
	MaxPartBytes int       `json:"maxPartBytes"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// UploadAppendInput is document_upload_append: the part at Index (0, 1,
// 2, ... in order) of the upload.
type UploadAppendInput struct {
	UploadID uuid.UUID
	Index    *int // required
	Content  string
}

// UploadAppendResult is the state of the upload after an append.
type UploadAppendResult struct {
	UploadID      uuid.UUID `json:"uploadId"`
	Index         int       `json:"index"`
	ReceivedBytes int64     `json:"receivedBytes"`
	TotalBytes    int64     `json:"totalBytes"`
	NextIndex     int       `json:"nextIndex"`
	ExpiresAt     time.Time `json:"expiresAt"`
	// Repeated: this part had been received already (a retry); nothing
	// changed.
	Repeated bool `json:"repeated,omitempty"`
}

// UploadFinishInput is document_upload_finish.
type UploadFinishInput struct {
	UploadID uuid.UUID
	// ClientToken is the stored document's client token; without one the
	// upload's id is, so a retried finish never stores it twice.
	ClientToken *uuid.UUID
}
