package embed

import (
	"strings"
	"testing"
)

func TestNextFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	if e, err := NextFromEnv(env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m")); e != nil || err != nil {
		t.Fatalf("no next model: %v %v", e, err)
	}
	// The provider's URL and key carry over; the width does not.
	e, err := NextFromEnv(env("EMBEDDINGS_BASE_URL", "http://h/v1", "EMBEDDINGS_DIMENSIONS", "1536",
		"EMBEDDINGS_NEXT_MODEL", "n", "EMBEDDINGS_NEXT_DIMENSIONS", "384"))
	if err != nil {
		t.Fatal(err)
	}
	o := e.(*OpenAI)
	if o.Model() != "n" || o.Dimensions() != 384 || o.cfg.BaseURL != "http://h/v1" {
		t.Fatalf("next %+v", o.cfg)
	}
	if e, err := NextFromEnv(env("EMBEDDINGS_DIMENSIONS", "1536", "EMBEDDINGS_NEXT_MODEL", "n")); err != nil || e.Dimensions() != Dimensions {
		t.Fatalf("default width: %v %v", e, err)
	}
	if _, err := NextFromEnv(env("EMBEDDINGS_NEXT_MODEL", "n", "EMBEDDINGS_NEXT_DIMENSIONS", "9000")); err == nil ||
		!strings.Contains(err.Error(), "EMBEDDINGS_NEXT_") || !strings.Contains(err.Error(), "EMBEDDINGS_DIMENSIONS") {
		t.Fatalf("bad width: %v", err)
	}
}
