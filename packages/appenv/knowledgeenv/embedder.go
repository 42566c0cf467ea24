// Package knowledgeenv reads the knowledge module's settings from an app's
// environment: the embedder (EMBEDDER, EMBEDDINGS_*), the next model of a
// model switch (EMBEDDINGS_NEXT_*), search and chunking. The MCP server,
// the worker, ctl and eval read them here, so each variable has one
// reader, one default and one wording of its errors; the knowledge
// packages take the Config values and never read the environment.
// docs/embeddings.md and docs/operators.md document the variables.
package knowledgeenv

import (
	"errors"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// The embedder's variables (docs/embeddings.md).
const (
	EnvEmbedder       = "EMBEDDER"              // local (default) | openai
	EnvPreset         = "EMBEDDINGS_PRESET"     // openai | ollama | vllm | tei | litellm: defaults for that server
	EnvBaseURL        = "EMBEDDINGS_BASE_URL"   // default: the preset's, else https://api.openai.com/v1
	EnvAPIKey         = "EMBEDDINGS_API_KEY"    // optional bearer token
	EnvModel          = "EMBEDDINGS_MODEL"      // required for openai
	EnvDimensions     = "EMBEDDINGS_DIMENSIONS" // default 768; 64 to 3072
	EnvSendDimensions = "EMBEDDINGS_SEND_DIMENSIONS"
	EnvBatchSize      = "EMBEDDINGS_BATCH_SIZE" // inputs per request, default: the preset's, else 64
	EnvTimeout        = "EMBEDDINGS_TIMEOUT"    // per request, Go duration, default 30s
)

// The next model of a model switch (docs/embeddings.md, "Model switch"):
// EMBEDDINGS_NEXT_MODEL names it; EMBEDDINGS_NEXT_DIMENSIONS, _PRESET,
// _BASE_URL, _API_KEY, _SEND_DIMENSIONS, _BATCH_SIZE and _TIMEOUT
// configure it like their EMBEDDINGS_ counterparts; the base URL, key,
// batch size and timeout default to the current provider's (the same
// server serving another model), the preset, dimensions and the
// dimensions flag do not.
const (
	EnvNextPrefix = "EMBEDDINGS_NEXT_"
	EnvNextModel  = "EMBEDDINGS_NEXT_MODEL"
)

// Embedder reads the configured embedder. Bad values are recorded in e,
// each naming its variable; embed.New(Embedder(e)) then succeeds once
// e.Err() is nil.
func Embedder(e *appenv.Env) embed.Config {
	return readEmbedder(e, func(name string) string { return name }, "")
}

// Next reads the next model of a model switch, or nil when
// EMBEDDINGS_NEXT_MODEL is unset. It is always an HTTP provider.
func Next(e *appenv.Env) *embed.Config {
	if e.String(EnvNextModel, "") == "" {
		return nil
	}
	own := map[string]bool{EnvPreset: true, EnvDimensions: true, EnvSendDimensions: true, EnvModel: true}
	c := readEmbedder(e, func(name string) string {
		next := EnvNextPrefix + strings.TrimPrefix(name, "EMBEDDINGS_")
		if own[name] || strings.TrimSpace(e.Raw(next)) != "" {
			return next
		}
		return name
	}, embed.ProviderOpenAI)
	return &c
}

// readEmbedder reads an embedder's settings, each from the variable
// name(its EMBEDDINGS_ variable) names; provider, when given, is not read.
func readEmbedder(e *appenv.Env, name func(string) string, provider string) embed.Config {
	c := embed.Config{
		Provider:   provider,
		Preset:     strings.ToLower(e.String(name(EnvPreset), "")),
		BaseURL:    e.String(name(EnvBaseURL), ""),
		APIKey:     e.Raw(name(EnvAPIKey)),
		Model:      e.String(name(EnvModel), ""),
		Dimensions: e.Int(name(EnvDimensions), 0, embed.MinDimensions, embed.MaxDimensions),
		BatchSize:  e.Int(name(EnvBatchSize), 0, 1, embed.MaxBatchSize),
		Timeout:    e.Duration(name(EnvTimeout), 0, time.Millisecond, 0),
	}
	if provider == "" {
		c.Provider = strings.ToLower(e.String(EnvEmbedder, ""))
	}
	if v := name(EnvSendDimensions); e.String(v, "") != "" {
		send := e.Bool(v, true)
		c.SendDimensions = &send
	}
	// The rules between settings (a model for an HTTP provider, a preset
	// that exists, a URL): embed's, worded with the variables.
	vars := map[string]string{
		"Provider": EnvEmbedder, "Preset": name(EnvPreset), "BaseURL": name(EnvBaseURL), "Model": name(EnvModel),
		"Dimensions": name(EnvDimensions), "BatchSize": name(EnvBatchSize), "Timeout": name(EnvTimeout),
	}
	var fe *embed.FieldError
	for _, err := range unjoin(c.Validate()) {
		if errors.As(err, &fe) && vars[fe.Field] != "" {
			e.Fail(vars[fe.Field], fe.Rule)
		} else {
			e.Add(err)
		}
	}
	return c
}

// unjoin is the errors errors.Join joined.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}
