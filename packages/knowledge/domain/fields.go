package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// An entry's provenance, kind and metadata (docs/knowledge.md, "Entry
// fields"): where the knowledge came from, what kind of memory it is, and
// free flat attributes an agent filters on.
const (
	// MaxSourceChars bounds an entry's source: a URL, a path, a ticket id.
	MaxSourceChars = 1000
	// MaxMetadataKeys bounds the keys of an entry's metadata.
	MaxMetadataKeys = 32
	// MaxMetadataKeyChars bounds one key (lower snake case).
	MaxMetadataKeyChars = 64
	// MaxMetadataBytes bounds the metadata as compact JSON (keys sorted).
	MaxMetadataBytes = 4096
)

// The kinds of an entry (memory types common across agent memory
// products). KindSemantic, a fact, is the default.
const (
	KindSemantic   = "semantic"
	KindEpisodic   = "episodic"
	KindProcedural = "procedural"
	KindReference  = "reference"
	DefaultKind    = KindSemantic
)

// Kinds lists every kind, in the order schemas and errors name them.
var Kinds = []string{KindSemantic, KindEpisodic, KindProcedural, KindReference}

// The origins of an entry: who made it (Entry.Origin; not settable by an
// agent). Before the entry fields this was the column "source".
const (
	OriginAgent    = "agent"
	OriginOperator = "operator"
	OriginImport   = "import"
)

// MetadataKeyPattern is the rule of a metadata key: lower snake case.
const MetadataKeyPattern = `^[a-z][a-z0-9_]*$`

var MetadataKey = regexp.MustCompile(MetadataKeyPattern)

// CheckSource is the rule of a source (store, correct, and the source
// filters): valid UTF-8 without NUL, not blank, at most MaxSourceChars.
// "" is "not given".
func CheckSource(field, v string) error {
	if v == "" {
		return nil
	}
	return CheckText(field, v, MaxSourceChars)
}

// CheckKind is the rule of a kind; "" is "not given" (the caller picks the
// default).
func CheckKind(field, v string) error {
	if v == "" || slices.Contains(Kinds, v) {
		return nil
	}
	return errs.InvalidArgument(field, "must be one of: %s (got %q)", strings.Join(Kinds, ", "), ClipRunes(v, 40))
}

// NormaliseMetadata checks metadata (field names the argument, e.g.
// "metadata"; a bad key is named as "metadata.<key>") and returns it as
// compact JSON with sorted keys, or nil when m is empty. Values are
// strings, finite numbers or booleans: a flat object an agent can filter
// on by equality, never null, an array or an object.
func NormaliseMetadata(field string, m map[string]any) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	if len(m) > MaxMetadataKeys {
		return nil, errs.InvalidArgument(field, "must have at most %d keys (got %d)", MaxMetadataKeys, len(m))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := CheckMetadataEntry(field, k, m[k]); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil { // maps encode with sorted keys
		return nil, errs.InvalidArgument(field, "cannot be encoded as JSON: %v", err)
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(out) > MaxMetadataBytes {
		return nil, errs.InvalidArgument(field, "must be at most %d bytes as compact JSON (got %d)", MaxMetadataBytes, len(out))
	}
	return out, nil
}

// CheckMetadataEntry is the rule of one key and its value.
func CheckMetadataEntry(field, k string, v any) error {
	if !utf8.ValidString(k) || utf8.RuneCountInString(k) > MaxMetadataKeyChars {
		return errs.InvalidArgument(field+"."+ClipRunes(k, MaxMetadataKeyChars), "key must be at most %d characters", MaxMetadataKeyChars)
	}
	name := field + "." + k
	if !MetadataKey.MatchString(k) {
		return errs.InvalidArgument(name, "key must be lower snake case (%s: a-z first, then a-z, 0-9, _)", MetadataKeyPattern)
	}
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) || strings.ContainsRune(x, 0) {
			return errs.InvalidArgument(name, "must be valid UTF-8 text without NUL bytes")
		}
	case bool, int, int32, int64, uint32:
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return errs.InvalidArgument(name, "must be a finite number")
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return errs.InvalidArgument(name, "must be a finite number")
		}
	case json.Number:
		if _, err := x.Float64(); err != nil {
			return errs.InvalidArgument(name, "must be a finite number (got %s)", ClipRunes(string(x), 40))
		}
	case nil:
		return errs.InvalidArgument(name, "must be a string, a number or a boolean, not null (leave the key out instead)")
	case []any, map[string]any:
		return errs.InvalidArgument(name, "must be a string, a number or a boolean, not %s (metadata is flat)", JsonTypeName(x))
	default:
		return errs.InvalidArgument(name, "must be a string, a number or a boolean (got %s)", JsonTypeName(x))
	}
	return nil
}

func JsonTypeName(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// DecodeMetadata reads stored metadata (JSON of a flat object) back into
// a map; numbers stay json.Number so that an integer reads back as
// written. An empty object is nil (omitted from answers).
func DecodeMetadata(raw []byte) map[string]any {
	if len(raw) == 0 || string(raw) == "{}" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || len(m) == 0 {
		return nil
	}
	return m
}

// SameMetadata says whether two JSON objects hold the same keys and
// values (PostgreSQL's jsonb orders keys its own way and keeps numbers as
// written: compared as values, not bytes).
func SameMetadata(a, b []byte) bool {
	var x, y map[string]any
	if len(a) > 0 && json.Unmarshal(a, &x) != nil {
		return false
	}
	if len(b) > 0 && json.Unmarshal(b, &y) != nil {
		return false
	}
	return len(x) == len(y) && reflect.DeepEqual(NonNilMap(x), NonNilMap(y))
}

func NonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// StrOrNil is s, or nil when s is "" (a column left NULL).
func StrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// StrOf is *p, or "" for NULL.
func StrOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Filters are the entry-field filters of search_knowledge and
// list_knowledge; every one given must hold (AND). Zero values: no filter.
type Filters struct {
	// Kind: entries of this kind (one of Kinds).
	Kind string
	// Source: entries whose source is exactly this; SourcePrefix: entries
	// whose source starts with this (a URL's site, a path's directory).
	// At most one of the two.
	Source       string
	SourcePrefix string
	// Metadata: entries whose metadata holds every one of these keys with
	// an equal value (the rules of stored metadata).
	Metadata map[string]any
}

// FilterArgs are Filters checked: nil pointers and a nil Metadata are
// filters not given (NULL arguments of the statements).
type FilterArgs struct {
	Kind, Source, SourcePrefix *string
	Metadata                   []byte // compact JSON, keys sorted
}

// CheckFilters checks the filters by the rules of the fields they filter
// on; the errors name kind, source, sourcePrefix and metadata.<key>.
func CheckFilters(f Filters) (FilterArgs, error) {
	var a FilterArgs
	if err := CheckKind("kind", f.Kind); err != nil {
		return a, err
	}
	if err := CheckSource("source", f.Source); err != nil {
		return a, err
	}
	if err := CheckSource("sourcePrefix", f.SourcePrefix); err != nil {
		return a, err
	}
	if f.Source != "" && f.SourcePrefix != "" {
		return a, errs.InvalidArgument("sourcePrefix", "give source (exact) or sourcePrefix, not both")
	}
	meta, err := NormaliseMetadata("metadata", f.Metadata)
	if err != nil {
		return a, err
	}
	a.Kind, a.Source, a.SourcePrefix, a.Metadata = StrOrNil(f.Kind), StrOrNil(f.Source), StrOrNil(f.SourcePrefix), meta
	return a, nil
}

// PrefixEnd is the exclusive upper bound of the sources starting with
// prefix, in the column's byte order (COLLATE "C"): the prefix followed
// by the highest code point. (A source holding U+10FFFF, a noncharacter,
// right after the prefix would fall outside; the prefix test still
// checks every row the range gives.)
func PrefixEnd(prefix string) string { return prefix + "\U0010FFFF" }
