package knowledge

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// Limits of the SPEC, in Unicode characters (runes) where they are lengths.
const (
	MaxTitleChars   = 200
	MaxBodyChars    = 32000
	MaxTags         = 16
	MaxTagChars     = 64
	DefaultConf     = 80
	MaxQueryChars   = 2000
	DefaultLimit    = 10
	MaxLimit        = 50
	DefaultEfSearch = 64
	MaxEfSearch     = 200
)

var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// validate is built once: validator caches struct metadata and is safe for
// concurrent use. Field names are the MCP argument names (json tags), so an
// error names what the agent sent.
var validate = newValidator()

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	// text: valid UTF-8 without NUL bytes (Postgres refuses NUL in text, and
	// invalid UTF-8 would be cut in two by any snippet).
	must(v.RegisterValidation("text", func(fl validator.FieldLevel) bool {
		s := fl.Field().String()
		return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
	}))
	// notblank: present and not only white space.
	must(v.RegisterValidation("notblank", func(fl validator.FieldLevel) bool {
		return strings.TrimSpace(fl.Field().String()) != ""
	}))
	must(v.RegisterValidation("kebab", func(fl validator.FieldLevel) bool {
		return kebab.MatchString(fl.Field().String())
	}))
	must(v.RegisterValidation("finite", func(fl validator.FieldLevel) bool {
		f := fl.Field().Float()
		return !math.IsNaN(f) && !math.IsInf(f, 0)
	}))
	return v
}

// storeArgs is StoreInput after defaults and tag normalisation; it is also
// what the idempotence fingerprint is computed from.
type storeArgs struct {
	Title       string       `json:"title" validate:"text,notblank,max=200"`
	Body        string       `json:"body" validate:"text,notblank,max=32000"`
	Tags        []string     `json:"tags" validate:"max=16"`
	Confidence  int          `json:"confidence" validate:"min=0,max=100"`
	ExpiresAt   *time.Time   `json:"expiresAt,omitempty"`
	TaskRef     *taskRefArgs `json:"taskRef,omitempty" validate:"omitempty"`
	ClientToken *uuid.UUID   `json:"clientToken,omitempty"`
	// IfSimilar is IfSimilarSkip or "" (store): the default leaves the
	// idempotence fingerprint as it was before the argument existed.
	IfSimilar string `json:"ifSimilar,omitempty"`
}

type taskRefArgs struct {
	TaskID uuid.UUID `json:"taskId" validate:"required"`
	Kind   string    `json:"kind" validate:"oneof=references produced"`
}

type searchArgs struct {
	Query             string   `json:"query" validate:"text,notblank,max=2000"`
	Limit             int      `json:"limit" validate:"min=1,max=50"`
	Tags              []string `json:"tags" validate:"max=16"`
	IncludeSuperseded bool     `json:"includeSuperseded"`
	IncludeExpired    bool     `json:"includeExpired"`
	MinScore          *float64 `json:"minScore" validate:"omitempty,finite,min=0,max=1"`
	EfSearch          int      `json:"efSearch" validate:"min=1,max=200"`
	AsOf              *time.Time
	Hops              int      `json:"hops" validate:"min=0,max=2"`
	RelationTypes     []string `json:"relationTypes" validate:"max=16"`
}

// validateStore checks and normalises a store call. It does no I/O.
func validateStore(c Caller, in StoreInput, now time.Time) (*storeArgs, error) {
	if err := checkCaller(c, true); err != nil {
		return nil, err
	}
	a := &storeArgs{Title: in.Title, Body: in.Body, Confidence: DefaultConf, ClientToken: in.ClientToken}
	if in.Confidence != nil {
		a.Confidence = *in.Confidence
	}
	if in.TaskRef != nil {
		a.TaskRef = &taskRefArgs{TaskID: in.TaskRef.TaskID, Kind: string(in.TaskRef.Kind)}
	}
	if err := structErr(validate.Struct(a)); err != nil {
		return nil, err
	}
	if len(in.Tags) > MaxTags {
		return nil, errs.InvalidArgument("tags", "must have at most %d tags (got %d)", MaxTags, len(in.Tags))
	}
	tags, err := normaliseTags(in.Tags)
	if err != nil {
		return nil, err
	}
	a.Tags = tags
	if in.ExpiresAt != nil {
		if !in.ExpiresAt.After(now) {
			return nil, errs.InvalidArgument("expiresAt", "must be strictly in the future (got %s, now is %s)",
				in.ExpiresAt.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		}
		// Postgres keeps microseconds: round now so a replay compares equal.
		e := in.ExpiresAt.UTC().Round(time.Microsecond)
		a.ExpiresAt = &e
	}
	if in.ClientToken != nil && *in.ClientToken == uuid.Nil {
		return nil, errs.InvalidArgument("clientToken", "must be a non-nil UUID")
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

// validateSearch checks a search call and applies its defaults.
func validateSearch(c Caller, in SearchInput) (*searchArgs, error) {
	if err := checkCaller(c, false); err != nil {
		return nil, err
	}
	a := &searchArgs{
		Query: in.Query, Limit: in.Limit, IncludeSuperseded: in.IncludeSuperseded,
		IncludeExpired: in.IncludeExpired, MinScore: in.MinScore, EfSearch: in.EfSearch,
		Hops: in.Hops, RelationTypes: in.RelationTypes,
	}
	if a.Limit == 0 {
		a.Limit = DefaultLimit
	}
	if a.EfSearch == 0 {
		a.EfSearch = DefaultEfSearch
	}
	if err := structErr(validate.Struct(a)); err != nil {
		return nil, err
	}
	if len(in.Tags) > MaxTags {
		return nil, errs.InvalidArgument("tags", "must have at most %d tags (got %d)", MaxTags, len(in.Tags))
	}
	// The same normalisation as Store, so a search for "Go_Lang" finds what
	// was stored as "go-lang"; a tag that can never match is refused.
	tags, err := normaliseTags(in.Tags)
	if err != nil {
		return nil, err
	}
	a.Tags = tags
	if a.RelationTypes != nil && a.Hops == 0 {
		return nil, errs.InvalidArgument("relationTypes", "only applies with hops 1 or 2 (the relations followed from the hits)")
	}
	for i, n := range a.RelationTypes {
		if err := checkTypeName(fmt.Sprintf("relationTypes[%d]", i), n); err != nil {
			return nil, err
		}
	}
	if a.AsOf, err = checkAsOf(in.AsOf, time.Now()); err != nil {
		return nil, err
	}
	return a, nil
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

// normaliseTags normalises every tag, drops duplicates (first occurrence
// wins, order kept) and refuses what is still not kebab-case, naming the
// tag by its index in the caller's array.
func normaliseTags(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, raw := range in {
		field := fmt.Sprintf("tags[%d]", i)
		if !utf8.ValidString(raw) || strings.ContainsRune(raw, 0) {
			return nil, errs.InvalidArgument(field, "must be valid UTF-8 text without NUL bytes")
		}
		t := NormaliseTag(raw)
		if n := utf8.RuneCountInString(t); n > MaxTagChars {
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

// structErr turns the first validator error into an *errs.Error naming the field
// (dotted path of json names, e.g. "taskRef.kind") and the rule.
func structErr(err error) error {
	if err == nil {
		return nil
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) || len(ves) == 0 {
		return err
	}
	fe := ves[0]
	field := fe.Namespace()
	if _, rest, ok := strings.Cut(field, "."); ok {
		field = rest // drop the struct's own name
	}
	return &errs.Error{Code: errs.CodeInvalidArgument, Field: field, Message: ruleMessage(fe), Err: err}
}

func ruleMessage(fe validator.FieldError) string {
	kind := fe.Kind()
	switch fe.Tag() {
	case "text":
		return "must be valid UTF-8 text without NUL bytes"
	case "notblank":
		return "is required and must not be blank"
	case "required":
		return "is required"
	case "finite":
		return "must be a finite number"
	case "oneof":
		return fmt.Sprintf("must be one of: %s (got %q)", strings.ReplaceAll(fe.Param(), " ", ", "), fmt.Sprint(fe.Value()))
	case "max":
		switch kind {
		case reflect.String:
			return fmt.Sprintf("must be at most %s characters (got %d)", fe.Param(), utf8.RuneCountInString(fe.Value().(string)))
		case reflect.Slice:
			return fmt.Sprintf("must have at most %s items (got %d)", fe.Param(), reflect.ValueOf(fe.Value()).Len())
		default:
			return fmt.Sprintf("must be at most %s (got %v)", fe.Param(), fe.Value())
		}
	case "min":
		return fmt.Sprintf("must be at least %s (got %v)", fe.Param(), fe.Value())
	}
	return "breaks the rule " + fe.Tag()
}
