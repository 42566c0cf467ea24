package domain

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentfleet/orchestrator/packages/errs"

	"github.com/google/uuid"
)

// Limits of the SPEC, in Unicode characters (runes) where they are lengths.
// The MCP tools' schemas and descriptions are built from them.
const (
	MaxTitleChars   = 200
	MaxBodyChars    = 32000
	MaxTags         = 16
	MaxTagChars     = 64
	MinConfidence   = 0
	MaxConfidence   = 100
	DefaultConf     = 80
	MaxQueryChars   = 2000
	DefaultLimit    = 10
	MaxLimit        = 50
	DefaultEfSearch = 64
	MaxEfSearch     = 200
	// MaxRelationTypes bounds a filter of relation types (search's
	// relationTypes, list_relations' types).
	MaxRelationTypes = 16
)

var Kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// StoreArgs is StoreInput after defaults and tag normalisation; it is also
// what the idempotence fingerprint is computed from (its JSON).
type StoreArgs struct {
	Title       string       `json:"title"`
	Body        string       `json:"body"`
	Tags        []string     `json:"tags"`
	Confidence  int          `json:"confidence"`
	ExpiresAt   *time.Time   `json:"expiresAt,omitempty"`
	TaskRef     *TaskRefArgs `json:"taskRef,omitempty"`
	ClientToken *uuid.UUID   `json:"clientToken,omitempty"`
	// IfSimilar is IfSimilarSkip or "" (store or report): the default
	// leaves the idempotence fingerprint as it was before the argument
	// existed, and report stores what store stores (a retry may change
	// its mind about waiting).
	IfSimilar string `json:"ifSimilar,omitempty"`
	// WaitSimilar: the store waits for the whole duplicate check,
	// meaning included, before it answers (IfSimilarReport and
	// IfSimilarSkip).
	WaitSimilar bool `json:"-"`
	// The entry fields (fields.go); empty ones are left out of the
	// fingerprint, which stays as it was before they existed. Kind ""
	// is DefaultKind; Metadata is compact JSON with sorted keys.
	Source   string          `json:"source,omitempty"`
	Kind     string          `json:"kind,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// EntryKind is the entry's kind: the one given, or DefaultKind.
func (a *StoreArgs) EntryKind() string {
	if a.Kind == "" {
		return DefaultKind
	}
	return a.Kind
}

// MetadataJSON is the metadata to store ('{}' when none was given).
func (a *StoreArgs) MetadataJSON() []byte {
	if len(a.Metadata) == 0 {
		return []byte("{}")
	}
	return a.Metadata
}

type TaskRefArgs struct {
	TaskID uuid.UUID `json:"taskId"`
	Kind   string    `json:"kind"`
}

// SearchArgs is SearchInput after defaults and tag normalisation.
type SearchArgs struct {
	Query             string
	Limit             int
	Tags              []string
	IncludeSuperseded bool
	IncludeExpired    bool
	MinScore          *float64
	EfSearch          int
	AsOf              *time.Time
	Hops              int
	RelationTypes     []string
	MaxTokens         int // 0: no budget
	Filters           FilterArgs
	DocumentID        *uuid.UUID
	// Within: the entries the filters were read first as (search/filtersearch.go,
	// set by searchMatches); the lists rank those only.
	Within MatchSet
	// Lists: the lists the mode ranks by (listVector, listFullText,
	// listTitle bits).
	Lists int
	// Rerank: the call lets a configured reranker order the fused hits.
	Rerank bool
}

// ValidateStore checks and normalises a store call. It does no I/O.
func ValidateStore(c Caller, in StoreInput, now time.Time) (*StoreArgs, error) {
	if err := CheckCaller(c, true); err != nil {
		return nil, err
	}
	a := &StoreArgs{Title: in.Title, Body: in.Body, Confidence: ValueOr(in.Confidence, DefaultConf), ClientToken: in.ClientToken}
	if err := CheckText("title", in.Title, MaxTitleChars); err != nil {
		return nil, err
	}
	if err := CheckText("body", in.Body, MaxBodyChars); err != nil {
		return nil, err
	}
	tags, err := NormaliseTags(in.Tags)
	if err != nil {
		return nil, err
	}
	a.Tags = tags
	if err := CheckRange("confidence", a.Confidence, MinConfidence, MaxConfidence); err != nil {
		return nil, err
	}
	if in.ExpiresAt != nil {
		if !in.ExpiresAt.After(now) {
			return nil, errs.InvalidArgument("expiresAt", "must be strictly in the future (got %s, now is %s)",
				in.ExpiresAt.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		}
		// Postgres keeps microseconds: round now so a replay compares equal.
		e := in.ExpiresAt.UTC().Round(time.Microsecond)
		a.ExpiresAt = &e
	}
	if in.TaskRef != nil {
		if err := in.TaskRef.Check(); err != nil {
			return nil, err
		}
		a.TaskRef = &TaskRefArgs{TaskID: in.TaskRef.TaskID, Kind: string(in.TaskRef.Kind)}
	}
	if in.ClientToken != nil && *in.ClientToken == uuid.Nil {
		return nil, errs.InvalidArgument("clientToken", "must be a non-nil UUID")
	}
	if err := CheckSource("source", in.Source); err != nil {
		return nil, err
	}
	if err := CheckKind("kind", in.Kind); err != nil {
		return nil, err
	}
	meta, err := NormaliseMetadata("metadata", in.Metadata)
	if err != nil {
		return nil, err
	}
	a.Source, a.Metadata = in.Source, meta
	if in.Kind != DefaultKind {
		a.Kind = in.Kind
	}
	switch in.IfSimilar {
	case "", IfSimilarStore:
	case IfSimilarReport:
		a.WaitSimilar = true
	case IfSimilarSkip:
		a.IfSimilar, a.WaitSimilar = IfSimilarSkip, true
	default:
		return nil, errs.InvalidArgument("ifSimilar", "must be %s, %s or %s (got %q)", IfSimilarStore, IfSimilarReport, IfSimilarSkip, ClipRunes(in.IfSimilar, 40))
	}
	return a, nil
}

// Check is the rule of a task link asked for with a new entry (its errors
// name the taskRef argument's fields).
func (r *TaskRef) Check() error {
	if r.TaskID == uuid.Nil {
		return errs.InvalidArgument("taskRef.taskId", "is required")
	}
	switch r.Kind {
	case LinkReferences, LinkProduced:
	case "":
		return errs.InvalidArgument("taskRef.kind", "is required: %s or %s", LinkReferences, LinkProduced)
	default:
		return errs.InvalidArgument("taskRef.kind", "must be one of: %s, %s (got %q)", LinkReferences, LinkProduced, ClipRunes(string(r.Kind), 40))
	}
	return nil
}

// ValidateSearch checks a search call and applies its defaults.
func ValidateSearch(c Caller, in SearchInput, now time.Time) (*SearchArgs, error) {
	if err := CheckCaller(c, false); err != nil {
		return nil, err
	}
	a := &SearchArgs{
		Query: in.Query, Limit: ValueOr(in.Limit, DefaultLimit), IncludeSuperseded: in.IncludeSuperseded,
		IncludeExpired: in.IncludeExpired, MinScore: in.MinScore, EfSearch: ValueOr(in.EfSearch, DefaultEfSearch),
		Hops: in.Hops, RelationTypes: in.RelationTypes, MaxTokens: ValueOr(in.MaxTokens, 0),
		DocumentID: in.DocumentID, Rerank: ValueOr(in.Rerank, true),
	}
	if err := CheckText("query", in.Query, MaxQueryChars); err != nil {
		return nil, err
	}
	if err := CheckRange("limit", a.Limit, 1, MaxLimit); err != nil {
		return nil, err
	}
	// The same normalisation as Store, so a search for "Go_Lang" finds what
	// was stored as "go-lang"; a tag that can never match is refused.
	tags, err := NormaliseTags(in.Tags)
	if err != nil {
		return nil, err
	}
	a.Tags = tags
	if m := a.MinScore; m != nil && !(*m >= 0 && *m <= 1) { // NaN too
		return nil, errs.InvalidArgument("minScore", "must be from 0 to 1 (got %v)", *m)
	}
	if err := CheckMaxTokens(in.MaxTokens); err != nil {
		return nil, err
	}
	if err := CheckRange("hops", a.Hops, 0, MaxHops); err != nil {
		return nil, err
	}
	if a.RelationTypes != nil && a.Hops == 0 {
		return nil, errs.InvalidArgument("relationTypes", "only applies with hops 1 to %d (the relations followed from the hits)", MaxHops)
	}
	if a.RelationTypes, err = TypeNames("relationTypes", a.RelationTypes); err != nil {
		return nil, err
	}
	if err := CheckRange("efSearch", a.EfSearch, 1, MaxEfSearch); err != nil {
		return nil, err
	}
	if a.AsOf, err = CheckAsOf(in.AsOf, now); err != nil {
		return nil, err
	}
	if a.Filters, err = CheckFilters(in.Filters); err != nil {
		return nil, err
	}
	if a.Lists, err = ListsOf(in.Mode); err != nil {
		return nil, err
	}
	return a, nil
}

// ListsOf is the lists a search mode ranks by.
func ListsOf(mode string) (int, error) {
	switch mode {
	case "", ModeHybrid:
		return ListVector | ListsLexical, nil
	case ModeLexical:
		return ListsLexical, nil
	case ModeSemantic:
		return ListVector, nil
	}
	return 0, errs.InvalidArgument("mode", "must be one of: %s (got %q)", strings.Join(Modes, ", "), ClipRunes(mode, 40))
}

// CheckText is the rule of a required text argument: valid UTF-8 without
// NUL (PostgreSQL refuses NUL in text, and invalid UTF-8 would be cut in
// two by any snippet), not blank, at most max characters.
func CheckText(field, v string, max int) error {
	switch {
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return errs.InvalidArgument(field, "must be valid UTF-8 text without NUL bytes")
	case strings.TrimSpace(v) == "":
		return errs.InvalidArgument(field, "is required and must not be blank")
	}
	if n := utf8.RuneCountInString(v); n > max {
		return errs.InvalidArgument(field, "must be at most %d characters (got %d)", max, n)
	}
	return nil
}

// CheckRange is the rule of an integer argument from min to max.
func CheckRange(field string, v, min, max int) error {
	if v < min || v > max {
		return errs.InvalidArgument(field, "must be from %d to %d (got %d)", min, max, v)
	}
	return nil
}

// CheckMaxTokens is the rule of an answer's token budget: not given, or
// from MinMaxTokens to MaxMaxTokens.
func CheckMaxTokens(v *int) error {
	if v == nil {
		return nil
	}
	return CheckRange("maxTokens", *v, MinMaxTokens, MaxMaxTokens)
}

// ValueOr is *v, or def when the argument was not given.
func ValueOr[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

// CheckAsOf refuses an asOf in the future: the answer would change as time
// passes, which is not what "as of" promises.
func CheckAsOf(asOf *time.Time, now time.Time) (*time.Time, error) {
	if asOf == nil {
		return nil, nil
	}
	if asOf.After(now) {
		return nil, errs.InvalidArgument("asOf", "must not be in the future (got %s; now is %s)", asOf.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	t := asOf.UTC()
	return &t, nil
}

func CheckCaller(c Caller, needAgent bool) error {
	if c.OrgID == uuid.Nil {
		return &errs.Error{Code: errs.CodeInvalidArgument, Message: "the caller has no org"}
	}
	if needAgent && c.AgentID == uuid.Nil {
		return &errs.Error{Code: errs.CodeInvalidArgument, Message: "the caller has no agent"}
	}
	return nil
}

// NormaliseTag maps a tag to lowercase kebab-case: trim, lowercase, spaces
// and underscores to '-', runs of '-' collapsed. The result may still be
// invalid (e.g. "c++"); normaliseTags refuses those.
func NormaliseTag(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	var b strings.Builder
	b.Grow(len(t))
	dash := false
	for _, r := range t {
		if r == '_' || unicode.IsSpace(r) {
			r = '-'
		}
		if r == '-' {
			if dash {
				continue
			}
			dash = true
		} else {
			dash = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// NormaliseTags is the rule of a tag list, the same for storing, searching
// and listing: at most MaxTags tags, each at most MaxTagChars characters
// and kebab-case once normalised. It normalises every tag, drops
// duplicates (first occurrence wins, order kept) and names a bad tag by its
// index in the caller's array.
func NormaliseTags(in []string) ([]string, error) {
	if len(in) > MaxTags {
		return nil, errs.InvalidArgument("tags", "must have at most %d tags (got %d)", MaxTags, len(in))
	}
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, raw := range in {
		field := fmt.Sprintf("tags[%d]", i)
		if !utf8.ValidString(raw) || strings.ContainsRune(raw, 0) {
			return nil, errs.InvalidArgument(field, "must be valid UTF-8 text without NUL bytes")
		}
		t := NormaliseTag(raw)
		if n := max(utf8.RuneCountInString(raw), utf8.RuneCountInString(t)); n > MaxTagChars {
			return nil, errs.InvalidArgument(field, "must be at most %d characters (got %d)", MaxTagChars, n)
		}
		if !Kebab.MatchString(t) {
			return nil, errs.InvalidArgument(field, "%q is not kebab-case even after normalisation (%q): use a-z and 0-9 in words joined by single '-'", raw, t)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// A cursor is base64url(org id, position time in microseconds, position
// id, the digest of the listing's filters (listFilters), then the first 16
// bytes of HMAC-SHA256 over them): opaque to agents, refused when altered,
// forged, presented by another org or with other filters.
const CursorPayload = 16 + 8 + 16 + 8

// ClipRunes cuts s to at most n characters (n <= 0: not at all).
func ClipRunes(s string, n int) string {
	if n <= 0 {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// FilterMatchMax is how many of a filter's matches a search reads first
// (docs/knowledge.md, "Filtered search"). A filter on the entry fields
// (metadata, source, source prefix, kind) that at most this many of the
// org's entries pass is read through its own index, and every list ranks
// those entries only: the vector list exactly (each one's best vector, by
// its primary key), the lexical lists by the postings they read anyway,
// kept when their entry is one of them. A filter more entries pass is
// tested on the lists' candidates as they are read, which finds enough
// of them soon. Reading the set and ranking it costs a heap row a match,
// and testing as the lists read costs about the inverse of the filter's
// share of the org (the HNSW walk, the lexical probes); measured at 100k
// entries the two cross between 1,000 and 10,000 matches, near 2,700
// (docs/benchmarks.md, "Entry field filters"). The number of matches is
// counted, never estimated: the choice does not depend on the planner's
// statistics.
const FilterMatchMax = 2000

// MatchSet is the entries a search or a listing is restricted to, when its
// filters were read first: byIDs false means no such set (every entry of
// the org is a candidate, the filters tested on each).
type MatchSet struct {
	ByIDs bool
	Ids   []uuid.UUID
	// OfMetadata says the set is the metadata filter's matches (not a
	// document's sections, nor another field's): a search may then walk a
	// pair's HNSW index instead of ranking the set (sql/search_vector.sql).
	OfMetadata bool
	// MetadataMax, for a search without such a set: its statements read
	// the metadata filter's matches themselves, and rank them alone if at
	// most MetadataMax entries pass (0: they do not read them).
	MetadataMax int
}

// HopIDs is the set as SearchHop's within: nil (NULL) when there is none.
func (m MatchSet) HopIDs() []uuid.UUID {
	if !m.ByIDs {
		return nil
	}
	return NonNil(m.Ids)
}

// MaxForgetReason bounds forget_knowledge's reason (runes), as the
// tombstone's CHECK does.
const MaxForgetReason = 500

// Search that follows relations (search_knowledge hops, relationTypes).
const (
	// MaxHops is the deepest search_knowledge follows relations.
	MaxHops = 2
	// HopDecay is what each hop multiplies the score by: an entry reached
	// from a hit scores HopDecay times the hit's score, one reached from
	// that entry HopDecay times its score again, so a related entry always
	// ranks below the hit it came from.
	HopDecay = 0.5
	// HopEdgesPerEntry bounds the relations read from one entry in one
	// direction in one hop (newest first): with MaxLimit hits, a search
	// reads at most 2 x HopEdgesPerEntry x (hits + added) edges.
	HopEdgesPerEntry = 20
)

// Limits of relations.
const (
	// MaxRelationNote bounds a relation's note (runes).
	MaxRelationNote = 500
	// MaxRelationsPerEntry is the per-entry cap of open relations: an entry
	// may be an end (from or to) of at most this many open relations. A
	// link that would pass it on either end is refused (conflict naming
	// the end); closed relations do not count. It bounds what one agent can
	// hang on one entry, and so what a summary, a page and a search hop
	// read.
	MaxRelationsPerEntry = 1000
	// DefaultRelationsLimit and MaxRelationsLimit bound a list_relations page.
	DefaultRelationsLimit = 20
	MaxRelationsLimit     = 100
	// RelationSummaryFirst is how many relations an entry's summary
	// (get_knowledge, knowledge://{id}) shows besides its counts.
	RelationSummaryFirst = 5
)

// The length of a relation type's name (the tables' CHECKs repeat it).
const (
	MinRelationTypeChars = 2
	MaxRelationTypeChars = 48
)

// RelationTypePattern is the form of a relation type's name:
// UPPER_SNAKE_CASE, MinRelationTypeChars to MaxRelationTypeChars
// characters (the tables' CHECKs repeat it).
var RelationTypePattern = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// The derived, read-only types.
const (
	RelSupersedes   = "SUPERSEDES"
	RelSupersededBy = "SUPERSEDED_BY"
)

// NormaliseRelationType maps a relation type's name to UPPER_SNAKE_CASE
// as NormaliseTag maps a tag to kebab-case: trim, uppercase, spaces and
// '-' to '_', runs of '_' collapsed ("fixes" is FIXES, "fixed by" and
// "fixed-by" are FIXED_BY). The result may still be invalid (e.g.
// "BLOCKS!"); TypeName refuses those.
func NormaliseRelationType(name string) string {
	name = strings.ToUpper(strings.TrimSpace(name))
	var b strings.Builder
	b.Grow(len(name))
	under := false
	for _, r := range name {
		if r == '-' || unicode.IsSpace(r) {
			r = '_'
		}
		if r == '_' {
			if under {
				continue
			}
			under = true
		} else {
			under = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TypeName is the rule of a relation type's name wherever an agent or an
// operator names one (link, unlink, list_relations' types, search's
// relationTypes, ctl relation-type add): normalised (NormaliseRelationType),
// then UPPER_SNAKE_CASE (RelationTypePattern) of MinRelationTypeChars to
// MaxRelationTypeChars characters, as given and as normalised. It returns
// the normalised name; field names the argument in its errors.
func TypeName(field, name string) (string, error) {
	if !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return "", errs.InvalidArgument(field, "must be valid UTF-8 text without NUL bytes")
	}
	n := NormaliseRelationType(name)
	if n == "" {
		return "", errs.InvalidArgument(field, "is required: a relation type such as RELATES_TO or DEPENDS_ON")
	}
	if chars := max(utf8.RuneCountInString(name), utf8.RuneCountInString(n)); chars > MaxRelationTypeChars || len(n) < MinRelationTypeChars || !RelationTypePattern.MatchString(n) {
		return "", errs.InvalidArgument(field, "%s is not UPPER_SNAKE_CASE of %d to %d characters even after normalisation (%s): use A-Z and 0-9 in words joined by single '_' (spaces and '-' become '_', letters are upper-cased)",
			QuoteType(name), MinRelationTypeChars, MaxRelationTypeChars, QuoteType(n))
	}
	return n, nil
}

// TypeNames is TypeName over a filter of relation types (list_relations'
// types, search's relationTypes): at most MaxRelationTypes names, each
// normalised and named by its index (field[i]). nil stays nil (no filter).
func TypeNames(field string, names []string) ([]string, error) {
	if names == nil {
		return nil, nil
	}
	if len(names) > MaxRelationTypes {
		return nil, errs.InvalidArgument(field, "must have at most %d types (got %d)", MaxRelationTypes, len(names))
	}
	out := make([]string, len(names))
	for i, n := range names {
		var err error
		if out[i], err = TypeName(fmt.Sprintf("%s[%d]", field, i), n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckTypeName is the rule of a relation type's name as stored: already
// UPPER_SNAKE_CASE, not normalised (an import reads the names an export
// wrote).
func CheckTypeName(field, name string) error {
	if name == "" {
		return errs.InvalidArgument(field, "is required: a relation type such as RELATES_TO or DEPENDS_ON")
	}
	if len(name) < MinRelationTypeChars || len(name) > MaxRelationTypeChars || !RelationTypePattern.MatchString(name) {
		return errs.InvalidArgument(field, "must be UPPER_SNAKE_CASE, %d to %d characters (got %s)", MinRelationTypeChars, MaxRelationTypeChars, QuoteType(name))
	}
	return nil
}

func QuoteType(s string) string {
	if utf8.RuneCountInString(s) > 60 {
		s = string([]rune(s)[:60]) + "..."
	}
	return fmt.Sprintf("%q", s)
}

// Relation directions as list_relations reports them.
const (
	DirOut  = "out"
	DirIn   = "in"
	DirBoth = "both" // a symmetric type; also the filter meaning either
)

const ListVector = 1

const ListFullText = 2

const ListTitle = 4

const ListsLexical = ListFullText | ListTitle

func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
