package embed

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by FromEnv.
const (
	EnvEmbedder       = "EMBEDDER"              // local (default) | openai
	EnvPreset         = "EMBEDDINGS_PRESET"     // openai | ollama | vllm | tei | litellm: defaults for that server
	EnvBaseURL        = "EMBEDDINGS_BASE_URL"   // default https://api.openai.com/v1
	EnvAPIKey         = "EMBEDDINGS_API_KEY"    // optional bearer token
	EnvModel          = "EMBEDDINGS_MODEL"      // required for openai
	EnvDimensions     = "EMBEDDINGS_DIMENSIONS" // default 768; 64 to 3072
	EnvSendDimensions = "EMBEDDINGS_SEND_DIMENSIONS"
	EnvBatchSize      = "EMBEDDINGS_BATCH_SIZE" // inputs per request, default 64
	EnvTimeout        = "EMBEDDINGS_TIMEOUT"    // per request, Go duration, default 30s
)

// FromEnv builds the configured embedder. The MCP server (query vectors) and
// the worker (entry vectors) both call it with the same environment, so they
// always use the same provider and model. A bad setting is an error naming
// the variable, so a misconfigured process refuses to start instead of
// writing vectors nobody can compare.
func FromEnv(getenv func(string) string) (Embedder, error) {
	kind := strings.ToLower(strings.TrimSpace(getenv(EnvEmbedder)))
	presetName := strings.ToLower(strings.TrimSpace(getenv(EnvPreset)))
	preset, known := Presets[presetName]
	if presetName != "" && !known {
		return nil, fmt.Errorf("%s=%q: must be one of %s", EnvPreset, getenv(EnvPreset), PresetNames())
	}
	switch kind {
	case "", "local":
		if presetName == "" {
			return NewLocal(), nil
		}
		if kind == "local" {
			return nil, fmt.Errorf("%s=%s: a preset is for an HTTP provider; set %s=openai or leave it unset", EnvPreset, presetName, EnvEmbedder)
		}
		// A preset names an HTTP provider: EMBEDDER=openai is implied.
	case "openai":
	default:
		return nil, fmt.Errorf("%s=%q: must be local or openai", EnvEmbedder, getenv(EnvEmbedder))
	}

	cfg := OpenAIConfig{
		BaseURL:        cmp.Or(strings.TrimSpace(getenv(EnvBaseURL)), preset.BaseURL),
		APIKey:         getenv(EnvAPIKey),
		Model:          strings.TrimSpace(getenv(EnvModel)),
		OmitDimensions: known && !preset.SendDimensions,
	}
	if cfg.BaseURL != "" && !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("%s=%q: must be an http:// or https:// URL", EnvBaseURL, cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, fmt.Errorf("%s is required when %s=openai", EnvModel, EnvEmbedder)
	}
	var err error
	if cfg.Dimensions, err = intEnv(getenv, EnvDimensions, Dimensions); err != nil {
		return nil, err
	}
	if cfg.Dimensions < MinDimensions || cfg.Dimensions > MaxDimensions {
		return nil, fmt.Errorf("%s=%d: must be between %d and %d (the model's vector width)", EnvDimensions, cfg.Dimensions, MinDimensions, MaxDimensions)
	}
	if v := strings.TrimSpace(getenv(EnvSendDimensions)); v != "" {
		send, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: must be true or false", EnvSendDimensions, v)
		}
		cfg.OmitDimensions = !send
	}
	if cfg.BatchSize, err = intEnv(getenv, EnvBatchSize, cmp.Or(preset.BatchSize, 64)); err != nil {
		return nil, err
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 2048 {
		return nil, fmt.Errorf("%s=%d: must be between 1 and 2048", EnvBatchSize, cfg.BatchSize)
	}
	cfg.Timeout = 30 * time.Second
	if v := strings.TrimSpace(getenv(EnvTimeout)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: must be a positive duration such as 30s", EnvTimeout, v)
		}
		cfg.Timeout = d
	}
	c, err := NewOpenAI(cfg)
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	return c, nil
}

func intEnv(getenv func(string) string, name string, def int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: must be an integer", name, v)
	}
	return n, nil
}

// The next model of a model switch (docs/embeddings.md, "Model switch"):
// EMBEDDINGS_NEXT_MODEL names it; EMBEDDINGS_NEXT_DIMENSIONS,
// _PRESET, _BASE_URL, _API_KEY, _SEND_DIMENSIONS, _BATCH_SIZE and _TIMEOUT
// configure it like their EMBEDDINGS_ counterparts; the base URL, key,
// batch size and timeout default to the current provider's (the same
// server serving another model), the preset, dimensions and the
// dimensions flag do not.
const (
	EnvNextPrefix = "EMBEDDINGS_NEXT_"
	EnvNextModel  = "EMBEDDINGS_NEXT_MODEL"
)

// NextFromEnv builds the next model's embedder, or nil when no switch is
// configured. It is always an HTTP provider (EMBEDDER=openai).
func NextFromEnv(getenv func(string) string) (Embedder, error) {
	if strings.TrimSpace(getenv(EnvNextModel)) == "" {
		return nil, nil
	}
	own := map[string]bool{EnvPreset: true, EnvDimensions: true, EnvSendDimensions: true, EnvModel: true}
	e, err := FromEnv(func(k string) string {
		if k == EnvEmbedder {
			return "openai"
		}
		if strings.HasPrefix(k, "EMBEDDINGS_") {
			if v := getenv(EnvNextPrefix + strings.TrimPrefix(k, "EMBEDDINGS_")); v != "" || own[k] {
				return v
			}
		}
		return getenv(k)
	})
	if err != nil {
		return nil, fmt.Errorf("the next model (%s*): %w", EnvNextPrefix, err)
	}
	return e, nil
}
