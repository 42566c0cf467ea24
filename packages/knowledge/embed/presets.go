package embed

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Preset is what one kind of OpenAI-compatible server needs by default
// (Config.Preset). Every field can still be overridden by its own
// setting; a preset only fills what is not set.
type Preset struct {
	// BaseURL is where the server listens by default.
	BaseURL string
	// SendDimensions: whether the server accepts the "dimensions" field.
	// OpenAI accepts it for text-embedding-3 models (and shortens the
	// vector); vLLM and TEI refuse it for models that are not Matryoshka
	// models, and Ollama's OpenAI route ignores it.
	SendDimensions bool
	// BatchSize is the inputs per request the server takes by default.
	BatchSize int
}

// Presets by Config.Preset value (docs/embeddings.md, "Providers",
// says where each figure comes from).
var Presets = map[string]Preset{
	// OpenAI: up to 2,048 inputs and 300k tokens a request; 256 inputs of
	// up to 8,000 characters stay well inside both.
	"openai": {BaseURL: "https://api.openai.com/v1", SendDimensions: true, BatchSize: 256},
	// Ollama serves /v1/embeddings on 11434 and embeds a batch one input
	// at a time on its model runner: small batches keep a request short.
	"ollama": {BaseURL: "http://127.0.0.1:11434/v1", BatchSize: 32},
	// vLLM's OpenAI server (vllm serve --task embed) on 8000.
	"vllm": {BaseURL: "http://127.0.0.1:8000/v1", BatchSize: 64},
	// Hugging Face text-embeddings-inference: --max-client-batch-size
	// defaults to 32 (413 above it). Its default port, 8080, is the MCP
	// server's: run TEI on another (the URL below assumes 8081).
	"tei": {BaseURL: "http://127.0.0.1:8081/v1", BatchSize: 32},
	// LiteLLM proxy on 4000: it passes "dimensions" on to the provider
	// behind it and answers its own rate limits with 429 + Retry-After.
	"litellm": {BaseURL: "http://127.0.0.1:4000/v1", SendDimensions: true, BatchSize: 64},
}

// PresetNames lists the presets, for error messages.
func PresetNames() string { return "openai, ollama, vllm, tei, litellm" }

// minShortened is the shortest an input is cut to before the provider's
// "too long" is taken as final.
const minShortened = 256

// tooLongMessage matches what servers say about an input over the model's
// context: OpenAI and vLLM ("maximum context length is 8192 tokens"), TEI
// ("must have less than 512 tokens"), Ollama ("input length exceeds the
// context length"), gateways quoting them.
var tooLongMessage = regexp.MustCompile(`(?i)(context length|maximum.*tokens|less than \d+ tokens|too many tokens|too long|exceeds)`)

// tooLarge says whether err is a refusal of the request's size: 413, or a
// 400/422 saying an input is over the model's context. Such a request is
// not retried as it is (the refusal is permanent), but split or shortened.
func tooLarge(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Status {
	case http.StatusRequestEntityTooLarge:
		return true
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return tooLongMessage.MatchString(se.Message)
	}
	return false
}

// embedFitting embeds texts, fitting them to what the server takes: a
// batch refused as too large is split in halves (TEI's batch limit, a
// proxy's body limit), and a single input refused as too long is cut to
// three quarters, at a space where there is one, until it passes or is
// minShortened characters (then the refusal stands). The vector of a cut
// input represents its beginning; cutting entries into chunks is the
// worker's job (MaxInputChars), this is the net under it.
func (c *OpenAI) embedFitting(ctx context.Context, texts []string) ([][]float32, error) {
	vs, err := c.embedChunk(ctx, texts)
	if err == nil || !tooLarge(err) {
		return vs, err
	}
	if len(texts) > 1 {
		half := len(texts) / 2
		a, err := c.embedFitting(ctx, texts[:half])
		if err != nil {
			return nil, err
		}
		b, err := c.embedFitting(ctx, texts[half:])
		if err != nil {
			return nil, err
		}
		return append(a, b...), nil
	}
	t := texts[0]
	for utf8.RuneCountInString(t) > minShortened {
		t = shorten(t)
		vs, err = c.embedChunk(ctx, []string{t})
		if err == nil || !tooLarge(err) {
			if err == nil {
				c.shortened.Add(1)
			}
			return vs, err
		}
	}
	return nil, err
}

// shorten keeps about three quarters of t's characters, cut at the last
// space before that point when there is one in the last tenth.
func shorten(t string) string {
	rs := []rune(t)
	keep := max(minShortened, len(rs)*3/4)
	cut := string(rs[:keep])
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)*9/10 {
		cut = cut[:i]
	}
	return cut
}
