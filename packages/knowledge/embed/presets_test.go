package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// server is a fake of one kind of OpenAI-compatible server, with the limits
// and the error shapes that kind has: a batch limit, a context limit (in
// "tokens" of four characters), whether it takes "dimensions", and 429s.
type server struct {
	name       string
	maxBatch   int // inputs a request; 0: no limit
	batchErr   func(w http.ResponseWriter, n int)
	maxTokens  int // per input
	tooLong    func(w http.ResponseWriter, tokens int)
	truncates  bool                        // cuts over-long inputs itself (Ollama)
	dimsErr    func(w http.ResponseWriter) // nil: takes "dimensions"
	limitFirst bool                        // answers the first request 429 + Retry-After

	mu       sync.Mutex
	requests int
	limited  bool
	longest  int // longest input it embedded, in characters
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req openAIRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, 400, err.Error(), "invalid_request_error")
		return
	}
	s.mu.Lock()
	s.requests++
	first := s.limitFirst && !s.limited
	s.limited = s.limited || first
	s.mu.Unlock()
	if first {
		w.Header().Set("Retry-After", "1")
		writeErr(w, 429, "Rate limit reached", "rate_limit_error")
		return
	}
	if req.Dimensions != 0 && s.dimsErr != nil {
		s.dimsErr(w)
		return
	}
	if s.maxBatch > 0 && len(req.Input) > s.maxBatch {
		s.batchErr(w, len(req.Input))
		return
	}
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := make([]item, len(req.Input))
	for i, in := range req.Input {
		tokens := utf8.RuneCountInString(in) / 4
		if tokens > s.maxTokens && !s.truncates {
			s.tooLong(w, tokens)
			return
		}
		s.mu.Lock()
		s.longest = max(s.longest, utf8.RuneCountInString(in))
		s.mu.Unlock()
		v := make([]float32, Dimensions)
		v[0] = float32(i) // position in the request
		v[1] = float32(len(strings.Fields(in)))
		out[i] = item{i, v}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": out})
}

// The servers, as each answers (messages as the real servers word them).
func servers() []*server {
	return []*server{
		{
			name: "openai", maxTokens: 8191, limitFirst: true,
			tooLong: func(w http.ResponseWriter, n int) {
				writeErr(w, 400, fmt.Sprintf("This model's maximum context length is 8192 tokens, however you requested %d tokens (%d in your prompt; 0 for the completion). Please reduce your prompt; or completion length.", n, n), "invalid_request_error")
			},
		},
		{
			name: "ollama", maxTokens: 2048, truncates: true,
		},
		{
			name: "vllm", maxTokens: 512,
			tooLong: func(w http.ResponseWriter, n int) {
				writeErr(w, 400, fmt.Sprintf("This model's maximum context length is 512 tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.", n), "BadRequestError")
			},
			dimsErr: func(w http.ResponseWriter) {
				writeErr(w, 400, "Model \"BAAI/bge-base-en-v1.5\" does not support matryoshka representation, changing output dimensions will lead to poor results.", "BadRequestError")
			},
		},
		{
			name: "tei", maxTokens: 512, maxBatch: 32,
			batchErr: func(w http.ResponseWriter, n int) {
				w.WriteHeader(413)
				json.NewEncoder(w).Encode(map[string]any{"error": fmt.Sprintf("batch size %d > maximum allowed batch size 32", n), "error_type": "validation"})
			},
			tooLong: func(w http.ResponseWriter, n int) {
				w.WriteHeader(413)
				json.NewEncoder(w).Encode(map[string]any{"error": fmt.Sprintf("Input validation error: `inputs` must have less than 512 tokens. Given: %d", n), "error_type": "validation"})
			},
			dimsErr: func(w http.ResponseWriter) {
				w.WriteHeader(422)
				json.NewEncoder(w).Encode(map[string]any{"error": "`dimensions` is not supported by this model", "error_type": "validation"})
			},
		},
		{
			name: "litellm", maxTokens: 8191, limitFirst: true, maxBatch: 2048,
			batchErr: func(w http.ResponseWriter, n int) { writeErr(w, 400, "too many inputs", "invalid_request_error") },
			tooLong: func(w http.ResponseWriter, n int) {
				writeErr(w, 400, fmt.Sprintf("litellm.BadRequestError: OpenAIException - This model's maximum context length is 8192 tokens, however you requested %d tokens", n), "invalid_request_error")
			},
		},
	}
}

// Each preset, configured as an operator would (EMBEDDINGS_PRESET, the
// model, the server's URL), embeds a batch bigger than the server takes
// and holding an input over the model's context: every input gets its
// vector, in order; the over-long one is cut to fit, not refused; the
// preset's dimensions setting suits the server; a 429 is waited out.
func TestPresetsAgainstServersThatBehaveLikeThem(t *testing.T) {
	t.Parallel()
	for _, s := range servers() {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			e, err := New(Config{Preset: s.name, Model: "m", BaseURL: srv.URL + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			c := e.(*OpenAI)
			c.sleep = func(ctx context.Context, d time.Duration) error {
				if d != time.Second {
					t.Errorf("waited %v, the server asked for 1s", d)
				}
				return nil
			}
			in := make([]string, 70)
			for i := range in {
				in[i] = fmt.Sprintf("input %d", i)
			}
			in[41] = strings.Repeat("word ", 8000) // 40,000 characters: over every context
			vs, err := c.Embed(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != len(in) {
				t.Fatalf("%d vectors for %d inputs", len(vs), len(in))
			}
			for i, v := range vs {
				if i != 41 && v[1] != 2 {
					t.Fatalf("vector %d is not input %d's", i, i)
				}
			}
			if s.truncates {
				if c.Shortened() != 0 {
					t.Fatal("cut an input the server takes whole")
				}
			} else if c.Shortened() != 1 || s.longest > 4*s.maxTokens || s.longest < 2*s.maxTokens {
				t.Fatalf("the long input: cut %d times, embedded at %d characters (context %d tokens)", c.Shortened(), s.longest, s.maxTokens)
			}
		})
	}
}

// A preset fills what is not set; what is set wins.
func TestPresetConfiguration(t *testing.T) {
	t.Parallel()
	e, err := New(Config{Preset: "ollama", Model: "nomic-embed-text"})
	if err != nil {
		t.Fatal(err)
	}
	o := e.(*OpenAI)
	if o.url != "http://127.0.0.1:11434/v1/embeddings" || !o.cfg.OmitDimensions || o.cfg.BatchSize != 32 {
		t.Fatalf("ollama: %s %+v", o.url, o.cfg)
	}
	yes := true
	e, err = New(Config{Preset: "tei", Model: "bge", BatchSize: 8, SendDimensions: &yes})
	if err != nil {
		t.Fatal(err)
	}
	if o := e.(*OpenAI); o.cfg.BatchSize != 8 || o.cfg.OmitDimensions {
		t.Fatalf("explicit settings must win over the preset: %+v", o.cfg)
	}
}
