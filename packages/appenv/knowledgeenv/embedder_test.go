package knowledgeenv

import (
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// read is what an app does: read, stop on what is wrong, build.
func read(getenv func(string) string) (embed.Embedder, error) {
	e := appenv.New(getenv)
	c := Embedder(e)
	if err := e.Err(); err != nil {
		return nil, err
	}
	return embed.New(c)
}

func TestEmbedder(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	e, err := read(env())
	if err != nil || e.Model() != embed.LocalModel {
		t.Fatalf("default: %v %v", e, err)
	}
	c := Embedder(appenv.New(env("EMBEDDER", "OpenAI", "EMBEDDINGS_MODEL", "nomic-embed-text",
		"EMBEDDINGS_BASE_URL", "http://127.0.0.1:11434/v1", "EMBEDDINGS_BATCH_SIZE", "16", "EMBEDDINGS_TIMEOUT", "5s",
		"EMBEDDINGS_SEND_DIMENSIONS", "false", "EMBEDDINGS_API_KEY", "sk")))
	if c.Provider != embed.ProviderOpenAI || c.Model != "nomic-embed-text" || c.BatchSize != 16 || c.Timeout != 5*time.Second ||
		c.SendDimensions == nil || *c.SendDimensions || c.BaseURL != "http://127.0.0.1:11434/v1" || c.APIKey != "sk" {
		t.Fatalf("config %+v", c)
	}
	for name, c := range map[string]struct {
		env  func(string) string
		want string
	}{
		"unknown embedder": {env("EMBEDDER", "cohere"), "EMBEDDER"},
		"no model":         {env("EMBEDDER", "openai"), "EMBEDDINGS_MODEL"},
		"bad url":          {env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_BASE_URL", "api.openai.com"), "EMBEDDINGS_BASE_URL"},
		"dims 4096":        {env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_DIMENSIONS", "4096"), "EMBEDDINGS_DIMENSIONS"},
		"dims 32":          {env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_DIMENSIONS", "32"), "EMBEDDINGS_DIMENSIONS"},
		"dims text":        {env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_DIMENSIONS", "x"), "EMBEDDINGS_DIMENSIONS"},
		"batch 0":          {env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_BATCH_SIZE", "0"), "EMBEDDINGS_BATCH_SIZE"},
		"timeout":          {env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_TIMEOUT", "30"), "EMBEDDINGS_TIMEOUT"},
		"send dims":        {env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_SEND_DIMENSIONS", "maybe"), "EMBEDDINGS_SEND_DIMENSIONS"},
		"unknown preset":   {env(EnvPreset, "cohere", EnvModel, "m"), EnvPreset},
		"local + preset":   {env(EnvEmbedder, "local", EnvPreset, "vllm", EnvModel, "m"), EnvPreset},
		"preset no model":  {env(EnvPreset, "vllm"), EnvModel},
	} {
		if _, err := read(c.env); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, c.want)
		}
	}
	// Every bad variable at once.
	_, err = read(env("EMBEDDER", "openai", "EMBEDDINGS_DIMENSIONS", "9000", "EMBEDDINGS_TIMEOUT", "soon"))
	for _, want := range []string{"EMBEDDINGS_MODEL", "EMBEDDINGS_DIMENSIONS", "EMBEDDINGS_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want every bad variable named, %s among them", err, want)
		}
	}
}

// A preset fills what is not set; what is set wins.
func TestPresetConfiguration(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	e, err := read(env(EnvPreset, "Ollama", EnvModel, "nomic-embed-text"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Model() != "nomic-embed-text" || e.Dimensions() != embed.Dimensions {
		t.Fatalf("ollama: %s %d", e.Model(), e.Dimensions())
	}
	c := Embedder(appenv.New(env(EnvPreset, "tei", EnvModel, "bge", EnvBatchSize, "8", EnvSendDimensions, "true")))
	if c.Preset != "tei" || c.BatchSize != 8 || c.SendDimensions == nil || !*c.SendDimensions {
		t.Fatalf("tei: %+v", c)
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	if c := Next(appenv.New(env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m"))); c != nil {
		t.Fatalf("no next model: %+v", c)
	}
	// The provider's URL, key and batch size carry over; the width does not.
	e := appenv.New(env("EMBEDDINGS_BASE_URL", "http://h/v1", "EMBEDDINGS_DIMENSIONS", "1536", "EMBEDDINGS_API_KEY", "k",
		"EMBEDDINGS_NEXT_MODEL", "n", "EMBEDDINGS_NEXT_DIMENSIONS", "384", "EMBEDDINGS_NEXT_BATCH_SIZE", "8", "EMBEDDINGS_BATCH_SIZE", "4"))
	c := Next(e)
	if e.Err() != nil || c == nil || c.Provider != embed.ProviderOpenAI || c.Model != "n" || c.Dimensions != 384 ||
		c.BaseURL != "http://h/v1" || c.APIKey != "k" || c.BatchSize != 8 {
		t.Fatalf("next %+v %v", c, e.Err())
	}
	n, err := embed.New(*c)
	if err != nil || n.Model() != "n" || n.Dimensions() != 384 {
		t.Fatalf("next embedder %v %v", n, err)
	}
	if c := Next(appenv.New(env("EMBEDDINGS_DIMENSIONS", "1536", "EMBEDDINGS_NEXT_MODEL", "n"))); c == nil || c.Dimensions != 0 {
		t.Fatalf("default width: %+v", c)
	}
	e = appenv.New(env("EMBEDDINGS_NEXT_MODEL", "n", "EMBEDDINGS_NEXT_DIMENSIONS", "9000"))
	Next(e)
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), "EMBEDDINGS_NEXT_DIMENSIONS") {
		t.Fatalf("bad width: %v", err)
	}
	// A setting the next model inherits is named once when bad.
	e = appenv.New(env("EMBEDDER", "openai", "EMBEDDINGS_MODEL", "m", "EMBEDDINGS_NEXT_MODEL", "n", "EMBEDDINGS_TIMEOUT", "soon"))
	Embedder(e)
	Next(e)
	if err := e.Err(); err == nil || strings.Count(err.Error(), "EMBEDDINGS_TIMEOUT") != 1 {
		t.Fatalf("inherited bad setting: %v", err)
	}
}
