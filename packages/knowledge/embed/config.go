package embed

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Providers of Config.Provider.
const (
	ProviderLocal  = "local"  // the hashing embedder, in process (the default)
	ProviderOpenAI = "openai" // an OpenAI-compatible HTTP server
)

// Bounds and defaults of an HTTP provider's settings.
const (
	DefaultBatchSize = 64
	MaxBatchSize     = 2048
	DefaultTimeout   = 30 * time.Second
)

// Config chooses the embedder and configures it. Its zero value is the
// local embedder; every other zero value is the documented default. The
// MCP server (query vectors), the worker (entry vectors) and ctl build
// theirs from the same configuration, so they always use the same
// provider and model. The apps read it from their environment
// (packages/appenv/knowledgeenv); this package never does.
type Config struct {
	// Provider is ProviderLocal (default) or ProviderOpenAI. A Preset
	// implies ProviderOpenAI.
	Provider string
	// Preset names the kind of OpenAI-compatible server (Presets): it
	// fills BaseURL, BatchSize and whether the width is sent, where those
	// are not set.
	Preset string
	// BaseURL of the HTTP provider. Default: the preset's, else
	// https://api.openai.com/v1.
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// Model of the HTTP provider. Required for ProviderOpenAI.
	Model string
	// Dimensions is the model's vector width, MinDimensions to
	// MaxDimensions. Default: Dimensions.
	Dimensions int
	// SendDimensions says whether the width is sent with each request
	// (OpenAIConfig.OmitDimensions). Default (nil): the preset's choice,
	// and sent without a preset.
	SendDimensions *bool
	// BatchSize is the most inputs per request, 1 to MaxBatchSize.
	// Default: the preset's, else DefaultBatchSize.
	BatchSize int
	// Timeout bounds one request. Default: DefaultTimeout.
	Timeout time.Duration
}

// FieldError is a Config field whose value breaks a rule; the apps name
// the setting the field was read from.
type FieldError struct {
	Field string // the Config field, e.g. "Dimensions"
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// Validate reports every field that breaks a rule, each as a *FieldError
// (errors.Join).
func (c Config) Validate() error {
	var errs []error
	fail := func(field, rule string) { errs = append(errs, &FieldError{Field: field, Rule: rule}) }
	preset, known := Presets[c.Preset]
	if c.Preset != "" && !known {
		fail("Preset", "must be one of "+PresetNames())
	}
	switch c.Provider {
	case "":
	case ProviderLocal:
		if c.Preset != "" {
			fail("Preset", "a preset is for an HTTP provider (openai), not the local embedder")
		}
	case ProviderOpenAI:
	default:
		fail("Provider", "must be local or openai")
	}
	if !c.http() {
		return errors.Join(errs...)
	}
	if u := cmp.Or(c.BaseURL, preset.BaseURL); u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		fail("BaseURL", "must be an http:// or https:// URL")
	}
	if c.Model == "" {
		fail("Model", "is required for an HTTP provider (openai)")
	}
	if c.Dimensions != 0 && (c.Dimensions < MinDimensions || c.Dimensions > MaxDimensions) {
		fail("Dimensions", fmt.Sprintf("must be between %d and %d (the model's vector width)", MinDimensions, MaxDimensions))
	}
	if c.BatchSize != 0 && (c.BatchSize < 1 || c.BatchSize > MaxBatchSize) {
		fail("BatchSize", fmt.Sprintf("must be between 1 and %d", MaxBatchSize))
	}
	if c.Timeout < 0 {
		fail("Timeout", "must be a positive duration")
	}
	return errors.Join(errs...)
}

// ModelName is the model the embedder c configures names: Model, or
// LocalModel for the local embedder.
func (c Config) ModelName() string {
	if c.http() {
		return c.Model
	}
	return LocalModel
}

// http says whether c is of an HTTP provider.
func (c Config) http() bool {
	return c.Provider == ProviderOpenAI || (c.Provider == "" && c.Preset != "")
}

// New returns the embedder c configures, or the first rule c breaks
// (Validate reports them all).
func New(c Config) (Embedder, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.http() {
		return NewLocal(), nil
	}
	preset, known := Presets[c.Preset]
	cfg := OpenAIConfig{
		BaseURL:        cmp.Or(c.BaseURL, preset.BaseURL),
		APIKey:         c.APIKey,
		Model:          c.Model,
		Dimensions:     cmp.Or(c.Dimensions, Dimensions),
		OmitDimensions: known && !preset.SendDimensions,
		BatchSize:      cmp.Or(c.BatchSize, preset.BatchSize, DefaultBatchSize),
		Timeout:        cmp.Or(c.Timeout, DefaultTimeout),
	}
	if c.SendDimensions != nil {
		cfg.OmitDimensions = !*c.SendDimensions
	}
	e, err := NewOpenAI(cfg)
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	return e, nil
}
