package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// A relation type's name is normalised as a tag is (trimmed, case and
// separators), then held to UPPER_SNAKE_CASE; what no normalisation makes
// a name is refused naming the field and the rule.
func TestTypeNameNormalisesLikeTags(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"fixes":          "FIXES",
		"  Fixed by ":    "FIXED_BY",
		"fixed-by":       "FIXED_BY",
		"depends__on":    "DEPENDS_ON",
		"part - of":      "PART_OF",
		"RELATES_TO":     "RELATES_TO",
		"blocks2":        "BLOCKS2",
		"caused\tby":     "CAUSED_BY",
		"example--of  ":  "EXAMPLE_OF",
		"already_Upper1": "ALREADY_UPPER1",
	} {
		got, err := domain.TypeName("type", in)
		if err != nil || got != want {
			t.Errorf("TypeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, says := range map[string]string{
		"":                      "is required",
		"   ":                   "is required",
		"x":                     "2 to 48",
		"blocks!":               "UPPER_SNAKE_CASE",
		"_fixes":                "UPPER_SNAKE_CASE",
		"fixes_":                "UPPER_SNAKE_CASE",
		"2FIX":                  "UPPER_SNAKE_CASE",
		"héllo":                 "UPPER_SNAKE_CASE",
		strings.Repeat("A", 49): "2 to 48",
		"a\x00b":                "NUL",
		" " + strings.Repeat("B", 47) + strings.Repeat(" ", 3): "2 to 48", // as given, over 48
	} {
		_, err := domain.TypeName("type", in)
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.CodeInvalidArgument || e.Field != "type" || !strings.Contains(e.Message, says) {
			t.Errorf("TypeName(%q): %v, want invalid_argument on type saying %q", in, err, says)
		}
	}
	got, err := domain.TypeNames("types", []string{"fixes", "Fixed by"})
	if err != nil || strings.Join(got, ",") != "FIXES,FIXED_BY" {
		t.Errorf("TypeNames: %v, %v", got, err)
	}
	if got, err := domain.TypeNames("types", nil); got != nil || err != nil {
		t.Errorf("TypeNames(nil) = %v, %v: no filter stays no filter", got, err)
	}
	_, err = domain.TypeNames("types", []string{"FIXES", "no good!"})
	var e *errs.Error
	if !errors.As(err, &e) || e.Field != "types[1]" {
		t.Errorf("TypeNames names the bad one by index: %v", err)
	}
}
