package knowledge

import (
	"fmt"
	"github.com/agentfleet/orchestrator/packages/errs"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// inputSchema infers the schema of T from its json and jsonschema tags,
// makes optional properties plain types (no "null" alternative: omit the
// property instead), then lets constrain add the limits from the domain's
// constants. The result is what tools/list shows.
func inputSchema[T any](constrain func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("schema of %T: %v", *new(T), err))
	}
	dropNull(s)
	constrain(s.Properties)
	return s
}

func dropNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		dropNull(p)
	}
	dropNull(s.Items)
}

func fptr(v float64) *float64 { return &v }

// itoa and ftoa write the domain's numbers into descriptions as JSON
// writes them.
func itoa(v int) string     { return strconv.Itoa(v) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
func iptr(v int) *int       { return &v }

// Shared schema fragments.
func uuidSchema(s *jsonschema.Schema) {
	s.Format = "uuid"
	s.MinLength, s.MaxLength = iptr(36), iptr(36)
	s.Pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
}

func lengthSchema(s *jsonschema.Schema, min, max int) {
	s.MinLength, s.MaxLength = iptr(min), iptr(max)
}

// tagsSchema states the limits of a list of tags (storing, searching and
// listing alike).
func tagsSchema(s *jsonschema.Schema) {
	s.MaxItems = iptr(domain.MaxTags)
	lengthSchema(s.Items, 1, domain.MaxTagChars)
}

// intSchema states an integer's range and, when it has one, its default.
func intSchema(s *jsonschema.Schema, min, max int, def ...int) {
	s.Minimum, s.Maximum = fptr(float64(min)), fptr(float64(max))
	if len(def) == 1 {
		s.Default = []byte(strconv.Itoa(def[0]))
	}
}

// describe sets a property's description where the text states a limit of
// the domain: built from its constants, it cannot say another number than
// the rule it describes.
func describe(p map[string]*jsonschema.Schema, name, format string, args ...any) {
	p[name].Description = fmt.Sprintf(format, args...)
}

// Decoding of the arguments that JSON carries as strings. An argument not
// given decodes to its zero value; whether it is required, like every
// other rule on the values, is the domain's. So an id given as the nil
// UUID is refused here: decoded, it would read as no id at all ("is
// required", though one was given).

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// parseUUID decodes an optional UUID: nil when not given.
func parseUUID(field, v string) (*uuid.UUID, error) {
	if v == "" {
		return nil, nil
	}
	if !uuidRe.MatchString(v) {
		return nil, errs.InvalidArgument(field, "must be a UUID in the 8-4-4-4-12 hex form (got %s)", quoteShort(v))
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return nil, errs.InvalidArgument(field, "must be a UUID (got %s)", quoteShort(v))
	}
	if id == uuid.Nil {
		return nil, errs.InvalidArgument(field, "must be a non-nil UUID (got the nil UUID %s, which names nothing)", v)
	}
	return &id, nil
}

// parseID decodes an entry's or a task's id: uuid.Nil when not given,
// which the domain refuses as a missing id.
func parseID(field, v string) (uuid.UUID, error) {
	id, err := parseUUID(field, v)
	if id == nil {
		return uuid.Nil, err
	}
	return *id, nil
}

// parseTime decodes an optional RFC 3339 date-time: nil when not given.
func parseTime(field, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, errs.InvalidArgument(field, "must be an RFC 3339 date-time such as 2030-01-02T15:04:05Z (got %s)", quoteShort(v))
	}
	return &t, nil
}

// quoteShort quotes v for an error message, cut to 60 characters so an
// error never echoes a large argument back.
func quoteShort(v string) string {
	if utf8.RuneCountInString(v) > 60 {
		r := []rune(v)
		return fmt.Sprintf("%q…", string(r[:60]))
	}
	return fmt.Sprintf("%q", v)
}
