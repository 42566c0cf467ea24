package rerank

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fake answers as a Cohere-shaped or a TEI server does: each document
// scored by the share of the query's words it holds, returned in the
// order given (not sorted, so the client must sort), and records the
// last request.
type fake struct {
	tei   bool
	calls atomic.Int64
	fail  atomic.Int64 // status to answer with (0: 200)
	last  atomic.Value // map[string]any
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	req["path"], req["auth"] = r.URL.Path, r.Header.Get("Authorization")
	f.last.Store(req)
	if s := f.fail.Load(); s != 0 {
		w.WriteHeader(int(s))
		_, _ = w.Write([]byte(`{"message":"model overloaded"}`))
		return
	}
	field := "documents"
	if f.tei {
		field = "texts"
	}
	q := strings.Fields(req["query"].(string))
	var out []map[string]any
	for i, d := range req[field].([]any) {
		n := 0
		for _, w := range q {
			if strings.Contains(d.(string), w) {
				n++
			}
		}
		s := float64(n) / float64(len(q))
		if f.tei {
			out = append(out, map[string]any{"index": i, "score": s})
		} else {
			out = append(out, map[string]any{"index": i, "relevance_score": s})
		}
	}
	if f.tei {
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "results": out})
}

func (f *fake) request() map[string]any { return f.last.Load().(map[string]any) }

func TestBothAPIs(t *testing.T) {
	t.Parallel()
	docs := []string{"nothing here", "rotate the signing key", "the key"}
	for _, tei := range []bool{false, true} {
		f := &fake{tei: tei}
		srv := httptest.NewServer(f)
		defer srv.Close()
		c := Config{Preset: "vllm", BaseURL: srv.URL + "/", Model: "bge-reranker", APIKey: "k"}
		if tei {
			c.Preset = "tei"
		}
		r, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Rerank(context.Background(), "rotate key", docs)
		if err != nil {
			t.Fatalf("tei %v: %v", tei, err)
		}
		want := []Result{{1, 1}, {2, 0.5}, {0, 0}}
		if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("tei %v: %v, want best first %v", tei, got, want)
		}
		req := f.request()
		if req["auth"] != "Bearer k" {
			t.Errorf("tei %v: authorization %q", tei, req["auth"])
		}
		if tei {
			if req["path"] != "/rerank" || req["truncate"] != true || len(req["texts"].([]any)) != 3 || req["model"] != nil {
				t.Errorf("TEI request %v", req)
			}
		} else if req["path"] != "/v1/rerank" || req["model"] != "bge-reranker" || req["top_n"] != float64(3) ||
			req["return_documents"] != false || len(req["documents"].([]any)) != 3 {
			t.Errorf("Cohere request %v", req)
		}
	}
}

// Answers a search cannot use are errors: a document missing or scored
// twice, an index out of range, a body that is not the API's.
func TestMalformedAnswers(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"missing":  `{"results":[{"index":0,"relevance_score":0.9}]}`,
		"repeated": `{"results":[{"index":0,"relevance_score":0.9},{"index":0,"relevance_score":0.1}]}`,
		"range":    `{"results":[{"index":0,"relevance_score":0.9},{"index":2,"relevance_score":0.1}]}`,
		"no score": `{"results":[{"index":0},{"index":1,"relevance_score":0.1}]}`,
		"html":     `<html>gateway</html>`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		h := &HTTP{API: APICohere, URL: srv.URL, ModelID: "m"}
		if _, err := h.Rerank(context.Background(), "q", []string{"a", "b"}); err == nil {
			t.Errorf("%s: no error for %s", name, body)
		}
		srv.Close()
	}
}

func TestStatusError(t *testing.T) {
	t.Parallel()
	f := &fake{}
	f.fail.Store(503)
	srv := httptest.NewServer(f)
	defer srv.Close()
	h := &HTTP{API: APICohere, URL: srv.URL, ModelID: "m"}
	_, err := h.Rerank(context.Background(), "q", []string{"a"})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 503 || se.Message != "model overloaded" {
		t.Fatalf("got %v, want the provider's 503 and its message", err)
	}
}

// BreakerFailures failures in a row open the breaker: the provider is not
// called again until BreakerOpenFor has passed; then one call probes it,
// and its success closes the breaker. A cancelled call counts neither way.
func TestBreaker(t *testing.T) {
	t.Parallel()
	f := &fake{}
	f.fail.Store(500)
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := NewClient(&HTTP{API: APICohere, URL: srv.URL, ModelID: "m"}, BreakerSettings{Failures: 3, OpenFor: 200 * time.Millisecond})
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for range 5 {
		if _, err := c.Rerank(cancelled, "q", []string{"a"}); err == nil || errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("cancelled call: %v", err)
		}
	}
	if c.Open() {
		t.Fatal("cancelled calls opened the breaker")
	}
	for i := range 3 {
		if _, err := c.Rerank(ctx, "q", []string{"a"}); err == nil || errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	before := f.calls.Load()
	for range 10 {
		if _, err := c.Rerank(ctx, "q", []string{"a"}); !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("after 3 failures: %v, want ErrBreakerOpen", err)
		}
	}
	if n := f.calls.Load() - before; n != 0 {
		t.Fatalf("the provider was called %d times with the breaker open", n)
	}
	f.fail.Store(0)
	deadline := time.Now().Add(5 * time.Second)
	for c.Open() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Rerank(ctx, "q", []string{"a"}); err != nil {
		t.Fatalf("the probe after OpenFor: %v", err)
	}
	if c.Open() {
		t.Fatal("a successful probe left the breaker open")
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	if r, err := New(Config{}); r != nil || err != nil {
		t.Fatalf("zero config: %v %v, want no reranker", r, err)
	}
	for name, c := range map[string]struct {
		cfg   Config
		field string
	}{
		"unknown preset": {Config{Preset: "bing", Model: "m"}, "Preset"},
		"no url":         {Config{Model: "m"}, "BaseURL"},
		"bad url":        {Config{BaseURL: "127.0.0.1:8000", Model: "m"}, "BaseURL"},
		"no model":       {Config{Preset: "tei"}, "Model"},
		"no key":         {Config{Preset: "cohere", Model: "rerank-v3.5"}, "APIKey"},
		"timeout":        {Config{Preset: "vllm", Model: "m", Timeout: -time.Second}, "Timeout"},
	} {
		err := c.cfg.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a FieldError on %s", name, err, c.field)
		}
	}
	for preset, url := range map[string]string{
		"cohere": "https://api.cohere.com/v1/rerank", "jina": "https://api.jina.ai/v1/rerank",
		"vllm": "http://127.0.0.1:8000/v1/rerank", "infinity": "http://127.0.0.1:7997/rerank",
		"litellm": "http://127.0.0.1:4000/v1/rerank", "tei": "http://127.0.0.1:8082/rerank",
	} {
		c, err := New(Config{Preset: preset, Model: "m", APIKey: "k"})
		if err != nil {
			t.Fatalf("%s: %v", preset, err)
		}
		if h := c.r.(*HTTP); h.URL != url {
			t.Errorf("%s: %s, want %s", preset, h.URL, url)
		}
		// What the server's start-up line names (a preset alone: its URL).
		if got := (Config{Preset: preset}).Endpoint(); got != url {
			t.Errorf("%s: Endpoint %s, want %s", preset, got, url)
		}
	}
	c, err := New(Config{BaseURL: "http://reranker.example:9000", Model: "m"})
	if err != nil || c.r.(*HTTP).URL != "http://reranker.example:9000/v1/rerank" || c.r.(*HTTP).API != APICohere {
		t.Errorf("no preset: %v %+v, want the Cohere shape at /v1/rerank", err, c)
	}
}
