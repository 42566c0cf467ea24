package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI behaves like POST /v1/embeddings of OpenAI: it checks the key, the
// method, the body and the model, answers {"object":"list","data":[...]} with
// vectors whose first component encodes the input's length (so tests can
// check order), and replays scripted failures first.
type fakeAPI struct {
	t        *testing.T
	key      string
	dims     int // width answered; 0: the requested "dimensions"
	reverse  bool
	mu       sync.Mutex
	script   []func(w http.ResponseWriter) // consumed one per request
	requests []openAIRequest
	hits     int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	f.hits++
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		writeErr(w, 401, "Incorrect API key provided.", "invalid_request_error")
		return
	}
	var req openAIRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Input) == 0 {
		writeErr(w, 400, "'input' is a required property", "invalid_request_error")
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	var step func(http.ResponseWriter)
	if len(f.script) > 0 {
		step, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()
	if step != nil {
		step(w)
		return
	}
	if req.Model != "text-embedding-3-small" {
		writeErr(w, 404, fmt.Sprintf("The model `%s` does not exist", req.Model), "invalid_request_error")
		return
	}
	dims := f.dims
	if dims == 0 {
		dims = req.Dimensions
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]item, len(req.Input))
	for i, in := range req.Input {
		v := make([]float32, dims)
		v[0] = float32(len(in))
		data[i] = item{"embedding", i, v}
	}
	if f.reverse {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1},
	})
}

func writeErr(w http.ResponseWriter, status int, msg, typ string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func (f *fakeAPI) push(steps ...func(http.ResponseWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, steps...)
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

type setup struct {
	api    *fakeAPI
	client *OpenAI
	slept  *[]time.Duration
}

func newSetup(t *testing.T, mod func(*OpenAIConfig)) setup {
	t.Helper()
	api := &fakeAPI{t: t, key: "sk-test"}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cfg := OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "text-embedding-3-small", BatchSize: 3, Timeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	slept := []time.Duration{}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
		return ctx.Err()
	}
	return setup{api, c, &slept}
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat("x", i+1)
	}
	return out
}

func checkOrder(t *testing.T, vs [][]float32, n int) {
	t.Helper()
	if len(vs) != n {
		t.Fatalf("got %d vectors, want %d", len(vs), n)
	}
	for i, v := range vs {
		if len(v) != Dimensions {
			t.Fatalf("vector %d has %d dims", i, len(v))
		}
		if int(v[0]) != i+1 {
			t.Fatalf("vector %d belongs to input %d: order lost", i, int(v[0])-1)
		}
	}
}

func TestOpenAISplitsBatchesAndKeepsOrder(t *testing.T) {
	t.Parallel()
	s := newSetup(t, nil)
	s.api.reverse = true // the API may answer out of order: index decides
	vs, err := s.client.Embed(context.Background(), texts(7))
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, vs, 7)
	if s.api.count() != 3 {
		t.Fatalf("7 inputs with batch size 3 made %d requests, want 3", s.api.count())
	}
	r := s.api.requests[0]
	if r.Dimensions != Dimensions || r.EncodingFormat != "float" || len(r.Input) != 3 {
		t.Fatalf("request %+v", r)
	}
	if s.client.Model() != "text-embedding-3-small" || s.client.Dimensions() != Dimensions {
		t.Fatal("model or dimensions not reported")
	}
}

func TestOpenAIRetries429HonouringRetryAfter(t *testing.T) {
	t.Parallel()
	s := newSetup(t, nil)
	s.api.push(func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "2")
		writeErr(w, 429, "Rate limit reached for requests", "requests")
	})
	vs, err := s.client.Embed(context.Background(), texts(2))
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, vs, 2)
	if len(*s.slept) != 1 || (*s.slept)[0] != 2*time.Second {
		t.Fatalf("slept %v, want [2s] from Retry-After", *s.slept)
	}
}

func TestOpenAIRetryAfterBeyondBoundIsReturnedRetryable(t *testing.T) {
	t.Parallel()
	s := newSetup(t, func(c *OpenAIConfig) { c.MaxRetryWait = 5 * time.Second })
	s.api.push(func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "3600")
		writeErr(w, 429, "quota", "requests")
	})
	_, err := s.client.Embed(context.Background(), texts(1))
	if err == nil || errors.Is(err, ErrPermanent) {
		t.Fatalf("got %v, want a retryable error", err)
	}
	if len(*s.slept) != 0 {
		t.Fatalf("slept %v through an unbounded Retry-After", *s.slept)
	}
}

func TestOpenAIRetries5xxThenSucceeds(t *testing.T) {
	t.Parallel()
	s := newSetup(t, nil)
	s.api.push(
		func(w http.ResponseWriter) { writeErr(w, 500, "The server had an error", "server_error") },
		func(w http.ResponseWriter) { w.WriteHeader(502); w.Write([]byte("<html>bad gateway</html>")) },
	)
	vs, err := s.client.Embed(context.Background(), texts(3))
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, vs, 3)
	if s.api.count() != 3 || len(*s.slept) != 2 {
		t.Fatalf("requests %d, sleeps %v", s.api.count(), *s.slept)
	}
}

func TestOpenAIGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	s := newSetup(t, func(c *OpenAIConfig) { c.MaxAttempts = 2 })
	for range 5 {
		s.api.push(func(w http.ResponseWriter) { writeErr(w, 503, "overloaded", "server_error") })
	}
	_, err := s.client.Embed(context.Background(), texts(1))
	if err == nil || errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "overloaded") {
		t.Fatalf("got %v", err)
	}
	if s.api.count() != 2 {
		t.Fatalf("%d requests, want 2", s.api.count())
	}
}

func TestOpenAIPermanentErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mod  func(*OpenAIConfig)
		api  func(*fakeAPI)
		want string
	}{
		"400 refused input": {api: func(a *fakeAPI) {
			a.push(func(w http.ResponseWriter) {
				writeErr(w, 400, "'$.input' is invalid. Please check the API reference", "invalid_request_error")
			})
		}, want: "is invalid"},
		"401 bad key":     {mod: func(c *OpenAIConfig) { c.APIKey = "wrong" }, want: "Incorrect API key"},
		"404 wrong model": {mod: func(c *OpenAIConfig) { c.Model = "nope" }, want: "does not exist"},
		"wrong dims":      {api: func(a *fakeAPI) { a.dims = 1536 }, want: "1536 dimensions"},
		"missing index": {api: func(a *fakeAPI) {
			a.push(func(w http.ResponseWriter) {
				v := make([]float32, Dimensions)
				json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []map[string]any{
					{"index": 0, "embedding": v}, {"index": 0, "embedding": v}}})
			})
		}, want: "indexes"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, c.mod)
			if c.api != nil {
				c.api(s.api)
			}
			_, err := s.client.Embed(context.Background(), texts(2))
			if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a permanent error containing %q", err, c.want)
			}
			if s.api.count() != 1 {
				t.Fatalf("a permanent error was retried: %d requests", s.api.count())
			}
		})
	}
}

func TestOpenAITimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) }) // runs first: unblocks the handler so Close returns
	c, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", Timeout: 50 * time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = func(ctx context.Context, d time.Duration) error { return nil }
	start := time.Now()
	_, err = c.Embed(context.Background(), []string{"a"})
	if err == nil || errors.Is(err, ErrPermanent) {
		t.Fatalf("got %v, want a retryable timeout", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("timeout not applied")
	}
}

func TestOmitDimensions(t *testing.T) {
	t.Parallel()
	s := newSetup(t, func(c *OpenAIConfig) { c.OmitDimensions = true })
	s.api.dims = Dimensions
	if _, err := s.client.Embed(context.Background(), texts(1)); err != nil {
		t.Fatal(err)
	}
	if s.api.requests[0].Dimensions != 0 {
		t.Fatal("dimensions sent although omitted")
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"-1":                            0,
		"soon":                          0,
		"Thu, 01 Jan 2026 00:00:10 GMT": 10 * time.Second,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	e, err := New(Config{})
	if err != nil || e.Model() != LocalModel {
		t.Fatalf("default: %v %v", e, err)
	}
	no := false
	e, err = New(Config{Provider: ProviderOpenAI, Model: "nomic-embed-text", BaseURL: "http://127.0.0.1:11434/v1",
		BatchSize: 16, Timeout: 5 * time.Second, SendDimensions: &no})
	if err != nil {
		t.Fatal(err)
	}
	o := e.(*OpenAI)
	if o.Model() != "nomic-embed-text" || o.cfg.BatchSize != 16 || o.cfg.Timeout != 5*time.Second ||
		!o.cfg.OmitDimensions || o.url != "http://127.0.0.1:11434/v1/embeddings" || o.Dimensions() != Dimensions {
		t.Fatalf("config %+v url %s", o.cfg, o.url)
	}
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"unknown provider": {Config{Provider: "cohere"}, "Provider"},
		"no model":         {Config{Provider: ProviderOpenAI}, "Model"},
		"bad url":          {Config{Provider: ProviderOpenAI, Model: "m", BaseURL: "api.openai.com"}, "BaseURL"},
		"dims 4096":        {Config{Provider: ProviderOpenAI, Model: "m", Dimensions: 4096}, "Dimensions"},
		"dims 32":          {Config{Provider: ProviderOpenAI, Model: "m", Dimensions: 32}, "Dimensions"},
		"batch":            {Config{Provider: ProviderOpenAI, Model: "m", BatchSize: -1}, "BatchSize"},
		"timeout":          {Config{Provider: ProviderOpenAI, Model: "m", Timeout: -1}, "Timeout"},
		"unknown preset":   {Config{Preset: "cohere", Model: "m"}, "Preset"},
		"local + preset":   {Config{Provider: ProviderLocal, Preset: "vllm", Model: "m"}, "Preset"},
		"preset no model":  {Config{Preset: "vllm"}, "Model"},
	} {
		var fe *FieldError
		if _, err := New(c.cfg); !errors.As(err, &fe) || fe.Field != c.want {
			t.Errorf("%s: got %v, want an error about %s", name, err, c.want)
		}
	}
}
