package knowledgeenv

import (
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

func TestVectorCalibration(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	e := appenv.New(env())
	if c := VectorCalibration(e); c != nil || e.Err() != nil {
		t.Fatalf("unset: %v %v", c, e.Err())
	}
	e = appenv.New(env("SEARCH_COSINE_FLOOR", "0.2", "SEARCH_COSINE_FULL", " 0.7 "))
	if c := VectorCalibration(e); e.Err() != nil || c.Floor != 0.2 || c.Full != 0.7 {
		t.Fatalf("set: %v %v", c, e.Err())
	}
	for _, kv := range [][]string{
		{"SEARCH_COSINE_FLOOR", "0.2"},
		{"SEARCH_COSINE_FULL", "0.7"},
		{"SEARCH_COSINE_FLOOR", "x", "SEARCH_COSINE_FULL", "0.7"},
		{"SEARCH_COSINE_FLOOR", "0.7", "SEARCH_COSINE_FULL", "0.7"},
		{"SEARCH_COSINE_FLOOR", "0.2", "SEARCH_COSINE_FULL", "1.5"},
	} {
		e := appenv.New(env(kv...))
		if c := VectorCalibration(e); c != nil || e.Err() == nil || !strings.Contains(e.Err().Error(), "SEARCH_COSINE_") {
			t.Errorf("%v: got %v %v, want an error naming the variable", kv, c, e.Err())
		}
	}
}

// Unset, every setting is the knowledge service's default: 0 where the
// service takes 0 as its default, the default's constant where the app
// needs the value itself (to check it against the database, to log it).
func TestSearchDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	e := appenv.New(env())
	if TextSearchConfig(e) != knowledge.DefaultTextSearchConfig || QueryEmbedBudget(e) != 0 ||
		VectorIndexMemory(e) != knowledge.DefaultVectorIndexMemory || AllowModelChange(e) || e.Err() != nil {
		t.Fatalf("defaults: %v", e.Err())
	}
	e = appenv.New(env("SEARCH_TEXT_CONFIG", "simple", "SEARCH_EMBED_BUDGET", "250ms", "WORKER_VECTOR_INDEX_MEMORY_MB", "128",
		"EMBEDDINGS_ALLOW_MODEL_CHANGE", "true"))
	if TextSearchConfig(e) != "simple" || QueryEmbedBudget(e) != 250*time.Millisecond || VectorIndexMemory(e) != 128<<20 ||
		!AllowModelChange(e) || e.Err() != nil {
		t.Fatalf("set: %v", e.Err())
	}
	e = appenv.New(env("SEARCH_EMBED_BUDGET", "1ms", "WORKER_VECTOR_INDEX_MEMORY_MB", "4GB", "EMBEDDINGS_ALLOW_MODEL_CHANGE", "yes please"))
	QueryEmbedBudget(e)
	VectorIndexMemory(e)
	AllowModelChange(e)
	for _, name := range []string{"SEARCH_EMBED_BUDGET", "WORKER_VECTOR_INDEX_MEMORY_MB", "EMBEDDINGS_ALLOW_MODEL_CHANGE"} {
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), name+"=") {
			t.Errorf("want %s named in %v", name, err)
		}
	}
}

// The cut is completed with the defaults of the configured model, and an
// overlap of half the size or more is refused naming both variables.
func TestChunk(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	local := embed.Config{}
	e := appenv.New(env())
	if o := Chunk(e, local); o != knowledge.ChunkOptionsFor(embed.LocalModel) || e.Err() != nil {
		t.Fatalf("default: %+v %v", o, e.Err())
	}
	minilm := embed.Config{Provider: embed.ProviderOpenAI, Model: "all-minilm:l6-v2"}
	if o := Chunk(appenv.New(env()), minilm); o.Chars != 1000 || o.Overlap != 125 {
		t.Fatalf("the model's: %+v", o)
	}
	if o := Chunk(appenv.New(env("EMBEDDINGS_CHUNK_CHARS", "3000", "EMBEDDINGS_CHUNK_OVERLAP", "0")), minilm); o != (knowledge.ChunkOptions{Chars: 3000}) {
		t.Fatalf("explicit: %+v", o)
	}
	for _, kv := range [][]string{
		{"EMBEDDINGS_CHUNK_CHARS", "100"},
		{"EMBEDDINGS_CHUNK_CHARS", "1000", "EMBEDDINGS_CHUNK_OVERLAP", "600"},
		{"EMBEDDINGS_CHUNK_OVERLAP", "600"}, // the model's 1,000 characters
	} {
		e := appenv.New(env(kv...))
		Chunk(e, minilm)
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), kv[len(kv)-2]) {
			t.Errorf("%v: got %v, want an error naming %s", kv, err, kv[len(kv)-2])
		}
	}
}
