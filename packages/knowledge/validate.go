package knowledge

import (
	"encoding/json"
	"fmt"
	"github.com/agentfleet/orchestrator/packages/errs"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// storeArgs is StoreInput after defaults and tag normalisation; it is also
// what the idempotence fingerprint is computed from (its JSON).
type storeArgs struct {
	Title       string       `json:"title"`
	Body        string       `json:"body"`
	Tags        []string     `json:"tags"`
	Confidence  int          `json:"confidence"`
	ExpiresAt   *time.Time   `json:"expiresAt,omitempty"`
	TaskRef     *taskRefArgs `json:"taskRef,omitempty"`
	ClientToken *uuid.UUID   `json:"clientToken,omitempty"`
	// IfSimilar is IfSimilarSkip or "" (store): the default leaves the
	// idempotence fingerprint as it was before the argument existed.
	IfSimilar string `json:"ifSimilar,omitempty"`
	// The entry fields (fields.go); empty ones are left out of the
	// fingerprint, which stays as it was before they existed. Kind ""
	// is DefaultKind; Metadata is compact JSON with sorted keys.
	Source   string          `json:"source,omitempty"`
	Kind     string          `json:"kind,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// kind is the entry's kind: the one given, or DefaultKind.
func (a *storeArgs) kind() string {
	if a.Kind == "" {
		return DefaultKind
	}
	return a.Kind
}

// metadataJSON is the metadata to store ('{}' when none was given).
func (a *storeArgs) metadataJSON() []byte {
	if len(a.Metadata) == 0 {
		return []byte("{}")
	}
	return a.Metadata
}

type taskRefArgs struct {
	TaskID uuid.UUID `json:"taskId"`
	Kind   string    `json:"kind"`
}

// searchArgs is SearchInput after defaults and tag normalisation.
type searchArgs struct {
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
	Filters           filterArgs
	DocumentID        *uuid.UUID
	// Within: the entries the filters were read first as (filtersearch.go,
	// set by searchMatches); the lists rank those only.
	Within matchSet
	// Lists: the lists the mode ranks by (listVector, listFullText,
	// listTitle bits).
	Lists int
}

// validateStore checks and normalises a store call. It does no I/O.
func validateStore(c Caller, in StoreInput, now time.Time) (*storeArgs, error) {
	if err := checkCaller(c, true); err != nil {
		return nil, err
	}
	a := &storeArgs{Title: in.Title, Body: in.Body, Confidence: valueOr(in.Confidence, DefaultConf), ClientToken: in.ClientToken}
	if err := checkText("title", in.Title, MaxTitleChars); err != nil {
		return nil, err
	}
	if err := checkText("body", in.Body, MaxBodyChars); err != nil {
		return nil, err
	}
	tags, err := normaliseTags(in.Tags)
	if err != nil {
		return nil, err
	}
	a.Tags = tags
	if err := checkRange("confidence", a.Confidence, MinConfidence, MaxConfidence); err != nil {
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
		if err := in.TaskRef.check(); err != nil {
			return nil, err
		}
		a.TaskRef = &taskRefArgs{TaskID: in.TaskRef.TaskID, Kind: string(in.TaskRef.Kind)}
	}
	if in.ClientToken != nil && *in.ClientToken == uuid.Nil {
		return nil, errs.InvalidArgument("clientToken", "must be a non-nil UUID")
	}
	if err := checkSource("source", in.Source); err != nil {
		return nil, err
	}
	if err := checkKind("kind", in.Kind); err != nil {
		return nil, err
	}
	meta, err := normaliseMetadata("metadata", in.Metadata)
	if err != nil {
		return nil, err
	}
	a.Source, a.Metadata = in.Source, meta
	if in.Kind != DefaultKind {
		a.Kind = in.Kind
	}
	switch in.IfSimilar {
	case "", IfSimilarStore:
	case IfSimilarSkip:
		a.IfSimilar = IfSimilarSkip
	default:
		return nil, errs.InvalidArgument("ifSimilar", "must be %s or %s (got %q)", IfSimilarStore, IfSimilarSkip, clipRunes(in.IfSimilar, 40))
	}
	return a, nil
}

// check is the rule of a task link asked for with a new entry (its errors
// name the taskRef argument's fields).
func (r *TaskRef) check() error {
	if r.TaskID == uuid.Nil {
		return errs.InvalidArgument("taskRef.taskId", "is required")
	}
	switch r.Kind {
	case LinkReferences, LinkProduced:
	case "":
		return errs.InvalidArgument("taskRef.kind", "is required: %s or %s", LinkReferences, LinkProduced)
	default:
		return errs.InvalidArgument("taskRef.kind", "must be one of: %s, %s (got %q)", LinkReferences, LinkProduced, clipRunes(string(r.Kind), 40))
	}
	return nil
}

// validateSearch checks a search call and applies its defaults.
func validateSearch(c Caller, in SearchInput, now time.Time) (*searchArgs, error) {
	if err := checkCaller(c, false); err != nil {
		return nil, err
	}
	a := &searchArgs{
		Query: in.Query, Limit: valueOr(in.Limit, DefaultLimit), IncludeSuperseded: in.IncludeSuperseded,
		IncludeExpired: in.IncludeExpired, MinScore: in.MinScore, EfSearch: valueOr(in.EfSearch, DefaultEfSearch),
		Hops: in.Hops, RelationTypes: in.RelationTypes, MaxTokens: valueOr(in.MaxTokens, 0),
		DocumentID: in.DocumentID,
	}
	if err := checkText("query", in.Query, MaxQueryChars); err != nil {
		return nil, err
	}
	if err := checkRange("limit", a.Limit, 1, MaxLimit); err != nil {
		return nil, err
	}
	// The same normalisation as Store, so a search for "Go_Lang" finds what
	// was stored as "go-lang"; a tag that can never match is refused.
	tags, err := normaliseTags(in.Tags)
	if err != nil {
		return nil, err
	}
	a.Tags = tags
	if m := a.MinScore; m != nil && !(*m >= 0 && *m <= 1) { // NaN too
		return nil, errs.InvalidArgument("minScore", "must be from 0 to 1 (got %v)", *m)
	}
	if err := checkMaxTokens(in.MaxTokens); err != nil {
		return nil, err
	}
	if err := checkRange("hops", a.Hops, 0, MaxHops); err != nil {
		return nil, err
	}
	if len(a.RelationTypes) > MaxRelationTypes {
		return nil, errs.InvalidArgument("relationTypes", "must have at most %d types (got %d)", MaxRelationTypes, len(a.RelationTypes))
	}
	if a.RelationTypes != nil && a.Hops == 0 {
		return nil, errs.InvalidArgument("relationTypes", "only applies with hops 1 to %d (the relations followed from the hits)", MaxHops)
	}
	for i, n := range a.RelationTypes {
		if err := checkTypeName(fmt.Sprintf("relationTypes[%d]", i), n); err != nil {
			return nil, err
		}
	}
	if err := checkRange("efSearch", a.EfSearch, 1, MaxEfSearch); err != nil {
		return nil, err
	}
	if a.AsOf, err = checkAsOf(in.AsOf, now); err != nil {
		return nil, err
	}
	if a.Filters, err = checkFilters(in.Filters); err != nil {
		return nil, err
	}
	if a.Lists, err = listsOf(in.Mode); err != nil {
		return nil, err
	}
	return a, nil
}

// listsOf is the lists a search mode ranks by.
func listsOf(mode string) (int, error) {
	switch mode {
	case "", ModeHybrid:
		return listVector | listsLexical, nil
	case ModeLexical:
		return listsLexical, nil
	case ModeSemantic:
		return listVector, nil
	}
	return 0, errs.InvalidArgument("mode", "must be one of: %s (got %q)", strings.Join(Modes, ", "), clipRunes(mode, 40))
}

// checkText is the rule of a required text argument: valid UTF-8 without
// NUL (PostgreSQL refuses NUL in text, and invalid UTF-8 would be cut in
// two by any snippet), not blank, at most max characters.
func checkText(field, v string, max int) error {
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

// checkRange is the rule of an integer argument from min to max.
func checkRange(field string, v, min, max int) error {
	if v < min || v > max {
		return errs.InvalidArgument(field, "must be from %d to %d (got %d)", min, max, v)
	}
	return nil
}

// checkMaxTokens is the rule of an answer's token budget: not given, or
// from MinMaxTokens to MaxMaxTokens.
func checkMaxTokens(v *int) error {
	if v == nil {
		return nil
	}
	return checkRange("maxTokens", *v, MinMaxTokens, MaxMaxTokens)
}

// valueOr is *v, or def when the argument was not given.
func valueOr[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

// checkAsOf refuses an asOf in the future: the answer would change as time
// passes, which is not what "as of" promises.
func checkAsOf(asOf *time.Time, now time.Time) (*time.Time, error) {
	if asOf == nil {
		return nil, nil
	}
	if asOf.After(now) {
		return nil, errs.InvalidArgument("asOf", "must not be in the future (got %s; now is %s)", asOf.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	t := asOf.UTC()
	return &t, nil
}

func checkCaller(c Caller, needAgent bool) error {
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

// normaliseTags is the rule of a tag list, the same for storing, searching
// and listing: at most MaxTags tags, each at most MaxTagChars characters
// and kebab-case once normalised. It normalises every tag, drops
// duplicates (first occurrence wins, order kept) and names a bad tag by its
// index in the caller's array.
func normaliseTags(in []string) ([]string, error) {
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
		if !kebab.MatchString(t) {
			return nil, errs.InvalidArgument(field, "%q is not kebab-case even after normalisation (%q): use a-z and 0-9 in words joined by single '-'", raw, t)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}
