package knowledge_test

import (
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

func TestNormaliseTag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"  Go_Lang ":  "go-lang",
		"PGX  Pool":   "pgx-pool",
		"a__b--c":     "a-b-c",
		"a - b":       "a-b",
		"Ünïcode":     "ünïcode", // lowercased, then refused as not kebab by Store
		"already-ok1": "already-ok1",
	} {
		if got := knowledge.NormaliseTag(in); got != want {
			t.Errorf("NormaliseTag(%q) = %q, want %q", in, got, want)
		}
	}
}
