package knowledge

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// inputSchema infers the schema of T from its json and jsonschema tags,
// makes optional properties plain types (no "null" alternative: omit the
// property instead), then lets constrain add the limits. The result is what
// tools/list shows; the same constants drive the edge checks.
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
func iptr(v int) *int         { return &v }

// Shared schema fragments.
func uuidSchema(s *jsonschema.Schema) {
	s.Format = "uuid"
	s.MinLength, s.MaxLength = iptr(36), iptr(36)
	s.Pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
}

func lengthSchema(s *jsonschema.Schema, min, max int) {
	s.MinLength, s.MaxLength = iptr(min), iptr(max)
}

// Edge checks, named after the rule they enforce. They return
// *errs.Error values with code invalid_argument.

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func parseUUID(field, v string, required bool) (*uuid.UUID, error) {
	if v == "" {
		if required {
			return nil, errs.InvalidArgument(field, "is required: a UUID such as 0b7e4c3a-5f1d-4c8e-9a2b-1d3e5f7a9c0b")
		}
		return nil, nil
	}
	if !uuidRe.MatchString(v) {
		return nil, errs.InvalidArgument(field, "must be a UUID in the 8-4-4-4-12 hex form (got %s)", quoteShort(v))
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return nil, errs.InvalidArgument(field, "must be a UUID (got %s)", quoteShort(v))
	}
	return &id, nil
}

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

// checkText enforces a length in characters (Unicode code points, as the
// schema's minLength/maxLength count them) and refuses NUL characters,
// which PostgreSQL text cannot hold.
func checkText(field, v string, min, max int) error {
	n := utf8.RuneCountInString(v)
	if n == 0 && min > 0 {
		return errs.InvalidArgument(field, "is required: %d to %d characters", min, max)
	}
	if min > 0 && strings.TrimSpace(v) == "" {
		return errs.InvalidArgument(field, "must not be blank")
	}
	if n < min || n > max {
		return errs.InvalidArgument(field, "must be %d to %d characters (got %d)", min, max, n)
	}
	if strings.ContainsRune(v, 0) {
		return errs.InvalidArgument(field, "must not contain NUL characters")
	}
	return nil
}

func checkIntRange(field string, v *int, min, max int) error {
	if v != nil && (*v < min || *v > max) {
		return errs.InvalidArgument(field, "must be an integer from %d to %d (got %d)", min, max, *v)
	}
	return nil
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
