package rerank

import (
	"cmp"
	"errors"
	"strings"
	"time"
)

// The APIs a reranking server serves.
const (
	// APICohere is POST {base}{path} {model, query, documents, top_n,
	// return_documents} -> {results: [{index, relevance_score}]}.
	APICohere = "cohere"
	// APITEI is text-embeddings-inference's POST {base}/rerank {query,
	// texts, truncate} -> [{index, score}].
	APITEI = "tei"
)

// Preset is what one kind of reranking server needs by default
// (Config.Preset); a setting given explicitly wins.
type Preset struct {
	// API is APICohere or APITEI.
	API string
	// BaseURL is where the server listens by default.
	BaseURL string
	// Path is the route under BaseURL.
	Path string
	// NeedsKey: the hosted APIs refuse a request without a key.
	NeedsKey bool
}

// Presets by Config.Preset value (docs/knowledge.md, "Reranking").
var Presets = map[string]Preset{
	// Cohere's hosted API (rerank-v3.5, rerank-english-v3.0, ...).
	"cohere": {API: APICohere, BaseURL: "https://api.cohere.com", Path: "/v1/rerank", NeedsKey: true},
	// Jina's hosted API (jina-reranker-v2-base-multilingual, ...).
	"jina": {API: APICohere, BaseURL: "https://api.jina.ai", Path: "/v1/rerank", NeedsKey: true},
	// vLLM's server (vllm serve BAAI/bge-reranker-v2-m3) on 8000.
	"vllm": {API: APICohere, BaseURL: "http://127.0.0.1:8000", Path: "/v1/rerank"},
	// Infinity on 7997: the Cohere body at /rerank (no /v1 prefix by default).
	"infinity": {API: APICohere, BaseURL: "http://127.0.0.1:7997", Path: "/rerank"},
	// LiteLLM's proxy on 4000, in front of any of these.
	"litellm": {API: APICohere, BaseURL: "http://127.0.0.1:4000", Path: "/v1/rerank"},
	// Hugging Face text-embeddings-inference with a reranking model. Its
	// default port, 8080, is the MCP server's and 8081 the embeddings
	// preset's: the URL assumes 8082. It takes at most 32 texts a request
	// by default (--max-client-batch-size).
	"tei": {API: APITEI, BaseURL: "http://127.0.0.1:8082", Path: "/rerank"},
}

// PresetNames lists the presets, for error messages.
func PresetNames() string { return "cohere, jina, vllm, infinity, litellm, tei" }

// DefaultTimeout bounds one request of a caller whose context has no
// deadline (a search's has its budget's).
const DefaultTimeout = 10 * time.Second

// Config configures the reranker; the apps read it from their environment
// (packages/appenv/knowledgeenv). Its zero value is no reranker.
type Config struct {
	// Preset names the kind of server (Presets): it fills API, BaseURL
	// and the route where those are not set.
	Preset string
	// BaseURL of the server, without the route. Default: the preset's.
	BaseURL string
	// Model is sent with every Cohere-shaped request (TEI serves one
	// model and is not told it) and names the score's calibration.
	// Required.
	Model string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// Timeout bounds a request whose context has no deadline. Default:
	// DefaultTimeout.
	Timeout time.Duration
}

// Configured says whether c asks for a reranker at all.
func (c Config) Configured() bool {
	return c.Preset != "" || c.BaseURL != "" || c.Model != ""
}

// FieldError is a Config field whose value breaks a rule; the apps name
// the setting the field was read from.
type FieldError struct {
	Field string // the Config field, e.g. "BaseURL"
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// Validate reports every field of a configured c that breaks a rule, each
// as a *FieldError (errors.Join).
func (c Config) Validate() error {
	if !c.Configured() {
		return nil
	}
	var errs []error
	fail := func(field, rule string) { errs = append(errs, &FieldError{Field: field, Rule: rule}) }
	p, known := Presets[c.Preset]
	if c.Preset != "" && !known {
		fail("Preset", "must be one of "+PresetNames())
	}
	switch u := cmp.Or(c.BaseURL, p.BaseURL); {
	case u == "":
		fail("BaseURL", "is required without a preset (the server's root, e.g. http://127.0.0.1:8000)")
	case !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://"):
		fail("BaseURL", "must be an http:// or https:// URL")
	}
	if c.Model == "" {
		fail("Model", "is required (the reranking model the server serves, e.g. BAAI/bge-reranker-v2-m3; it names the score's calibration)")
	}
	if p.NeedsKey && c.APIKey == "" {
		fail("APIKey", "is required by the "+c.Preset+" API")
	}
	if c.Timeout < 0 {
		fail("Timeout", "must be a positive duration")
	}
	return errors.Join(errs...)
}

// Endpoint is the whole route c's requests go to: the base URL given or
// the preset's, and the preset's route (/v1/rerank without a preset).
func (c Config) Endpoint() string {
	p := Presets[c.Preset]
	return strings.TrimRight(cmp.Or(c.BaseURL, p.BaseURL), "/") + cmp.Or(p.Path, "/v1/rerank")
}

// New returns the reranker c configures, behind a circuit breaker, or nil
// when c configures none; or the first rule c breaks (Validate reports
// them all).
func New(c Config) (*Client, error) {
	if !c.Configured() {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p := Presets[c.Preset]
	h := &HTTP{
		API:     cmp.Or(p.API, APICohere),
		URL:     c.Endpoint(),
		ModelID: c.Model,
		APIKey:  c.APIKey,
		Timeout: cmp.Or(c.Timeout, DefaultTimeout),
	}
	return NewClient(h, BreakerSettings{}), nil
}
