package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// OpenAIConfig configures the OpenAI-compatible client. Zero values mean the
// documented defaults.
type OpenAIConfig struct {
	// BaseURL is the API root including its version segment, as the OpenAI
	// SDKs take it: requests go to BaseURL + "/embeddings".
	// Default: https://api.openai.com/v1. Ollama: http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey is sent as a bearer token when not empty (local servers such as
	// Ollama or TEI need none).
	APIKey string
	// Model is sent with every request and stored with every vector. Required.
	Model string
	// Dimensions is the width the provider must answer with; every vector is
	// checked against it. Default: Dimensions (the column's width).
	Dimensions int
	// OmitDimensions leaves the "dimensions" request field out, for servers
	// that refuse it for models of a fixed width (vLLM, TEI with non-Matryoshka
	// models). The width of the answer is still checked.
	OmitDimensions bool
	// BatchSize is the largest number of inputs per request; bigger inputs
	// are split. Default DefaultBatchSize.
	BatchSize int
	// Timeout bounds one HTTP request. Default DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the attempts per request on 429, 5xx and network
	// errors. Default 4.
	MaxAttempts int
	// MaxRetryWait bounds one wait between attempts. A Retry-After longer
	// than this is not slept through: the error is returned (retryable), so
	// the caller's own backoff (the asynq retry) takes over. Default 20s.
	MaxRetryWait time.Duration
	// HTTPClient. Default: a client without its own timeout (Timeout applies
	// per request through the context).
	HTTPClient *http.Client
}

// OpenAI embeds through an OpenAI-compatible POST /embeddings endpoint
// (OpenAI, Azure-style gateways, Ollama, vLLM, TEI, LiteLLM).
type OpenAI struct {
	cfg OpenAIConfig
	url string
	// sleep is replaceable in tests; it returns early when ctx is done.
	sleep func(ctx context.Context, d time.Duration) error
	// shortened counts inputs cut to fit the model (embedFitting).
	shortened atomic.Int64
}

// Shortened is how many inputs were cut shorter to fit the model's context
// since the client was made.
func (c *OpenAI) Shortened() int64 { return c.shortened.Load() }

// NewOpenAI validates cfg and returns the client.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.openai.com/v1"
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("base url %q: must start with http:// or https://", cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, errors.New("model is required")
	}
	if cfg.Dimensions == 0 {
		cfg.Dimensions = Dimensions
	}
	if cfg.Dimensions < 1 {
		return nil, fmt.Errorf("dimensions %d: must be positive", cfg.Dimensions)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchSize < 1 {
		return nil, fmt.Errorf("batch size %d: must be positive", cfg.BatchSize)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.MaxRetryWait == 0 {
		cfg.MaxRetryWait = 20 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	return &OpenAI{
		cfg:   cfg,
		url:   strings.TrimRight(cfg.BaseURL, "/") + "/embeddings",
		sleep: sleepCtx,
	}, nil
}

func (c *OpenAI) Model() string   { return c.cfg.Model }
func (c *OpenAI) Dimensions() int { return c.cfg.Dimensions }

// Embed returns one vector per text, in order, making one request per
// BatchSize texts.
func (c *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += c.cfg.BatchSize {
		end := min(start+c.cfg.BatchSize, len(texts))
		vs, err := c.embedFitting(ctx, texts[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

type openAIRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

type openAIResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

type openAIError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// StatusError is a non-2xx answer of the provider.
type StatusError struct {
	Status     int
	Message    string
	RetryAfter time.Duration // from the Retry-After header; 0 if absent
	permanent  bool
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("embeddings provider: HTTP %d: %s", e.Status, e.Message)
}

// Is makes errors.Is(err, ErrPermanent) true for 4xx answers other than 429
// (and 408: a timeout on the provider's side is worth another try).
func (e *StatusError) Is(target error) bool { return target == ErrPermanent && e.permanent }

func (c *OpenAI) embedChunk(ctx context.Context, texts []string) ([][]float32, error) {
	req := openAIRequest{Model: c.cfg.Model, Input: texts, EncodingFormat: "float"}
	if !c.cfg.OmitDimensions {
		req.Dimensions = c.cfg.Dimensions
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		vs, err := c.do(ctx, body, len(texts))
		if err == nil {
			return vs, nil
		}
		if errors.Is(err, ErrPermanent) || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
		if attempt >= c.cfg.MaxAttempts {
			return nil, fmt.Errorf("after %d attempts: %w", attempt, lastErr)
		}
		wait := backoff(attempt)
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > 0 {
			wait = se.RetryAfter
		}
		if wait > c.cfg.MaxRetryWait {
			// Sleeping longer would hold a worker slot for nothing; the
			// caller's retry schedule is the better place to wait.
			return nil, fmt.Errorf("provider asks to wait %s (more than %s): %w", wait, c.cfg.MaxRetryWait, err)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%w (while waiting to retry after: %v)", err, lastErr)
		}
	}
}

// do makes one request. Errors wrapping ErrPermanent must not be retried.
func (c *OpenAI) do(ctx context.Context, body []byte, n int) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embeddings request: %v: %w", err, ErrPermanent)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("embeddings provider: %w", err)
	}
	defer resp.Body.Close()
	// 32 MiB is far above the largest legitimate answer (2048 x 3072 floats).
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("embeddings provider: reading answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{Status: resp.StatusCode, Message: errorMessage(raw, resp.Status)}
		se.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		se.permanent = resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests &&
			resp.StatusCode != http.StatusRequestTimeout
		return nil, se
	}
	var r openAIResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		// A 2xx that is not the API's JSON is a proxy or server fault; retry.
		return nil, fmt.Errorf("embeddings provider: malformed answer: %v", err)
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("embeddings provider: %d vectors for %d inputs: %w", len(r.Data), n, ErrPermanent)
	}
	// The API does not promise order: place each vector by its index.
	sort.Slice(r.Data, func(i, j int) bool { return r.Data[i].Index < r.Data[j].Index })
	out := make([][]float32, n)
	for i, d := range r.Data {
		if d.Index != i {
			return nil, fmt.Errorf("embeddings provider: indexes are not 0..%d (missing or repeated %d): %w", n-1, i, ErrPermanent)
		}
		if len(d.Embedding) != c.cfg.Dimensions {
			return nil, fmt.Errorf("embeddings provider: model %q answered %d dimensions, want %d: %w",
				c.cfg.Model, len(d.Embedding), c.cfg.Dimensions, ErrPermanent)
		}
		out[i] = d.Embedding
	}
	return out, nil
}

func errorMessage(raw []byte, status string) string {
	var e openAIError
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return status
	}
	return s
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// backoff is exponential with full jitter: 250ms, 500ms, 1s, ... up to 8s.
func backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt-1, 5)
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
