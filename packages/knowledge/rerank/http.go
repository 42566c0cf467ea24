package rerank

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// HTTP is a reranking server behind one of the two APIs. It makes one
// request per call and never retries: a search waits for it a bounded
// time, and another attempt would only spend that time again.
type HTTP struct {
	API     string // APICohere or APITEI
	URL     string // the whole route, e.g. http://127.0.0.1:8000/v1/rerank
	ModelID string
	APIKey  string
	// Timeout bounds a request whose context has no deadline.
	Timeout time.Duration
	// Client. Default: http.DefaultClient (instrumented by package
	// tracing when tracing is on).
	Client *http.Client
}

func (h *HTTP) Model() string { return h.ModelID }

type cohereRequest struct {
	Model           string   `json:"model"`
	Query           string   `json:"query"`
	Documents       []string `json:"documents"`
	TopN            int      `json:"top_n"`
	ReturnDocuments bool     `json:"return_documents"`
}

type cohereResponse struct {
	Results []struct {
		Index          *int     `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
	} `json:"results"`
}

type teiRequest struct {
	Query string   `json:"query"`
	Texts []string `json:"texts"`
	// Truncate: TEI refuses a text over the model's context (422)
	// unless told to cut it.
	Truncate bool `json:"truncate"`
}

type teiResult struct {
	Index *int     `json:"index"`
	Score *float64 `json:"score"`
}

// maxAnswer bounds what is read of an answer: a result is a few dozen
// bytes, and no document text is asked back.
const maxAnswer = 4 << 20

// Rerank sends query and docs and returns every document's result, best
// first. An answer that does not score each document exactly once is an
// error: a partial order cannot be fused.
func (h *HTTP) Rerank(ctx context.Context, query string, docs []string) ([]Result, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	if _, ok := ctx.Deadline(); !ok && h.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.Timeout)
		defer cancel()
	}
	var body any = cohereRequest{Model: h.ModelID, Query: query, Documents: docs, TopN: len(docs)}
	if h.API == APITEI {
		body = teiRequest{Query: query, Texts: docs, Truncate: true}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("rerank request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if h.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.APIKey)
	}
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rerank provider: %w", err)
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("rerank provider: reading answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &StatusError{Status: resp.StatusCode, Message: errorMessage(ans, resp.Status)}
	}
	var out []Result
	if h.API == APITEI {
		var rs []teiResult
		if err := json.Unmarshal(ans, &rs); err != nil {
			return nil, fmt.Errorf("rerank provider: malformed answer: %v", err)
		}
		for _, r := range rs {
			if r.Index == nil || r.Score == nil {
				return nil, fmt.Errorf("rerank provider: a result without index or score")
			}
			out = append(out, Result{Index: *r.Index, Score: *r.Score})
		}
	} else {
		var r cohereResponse
		if err := json.Unmarshal(ans, &r); err != nil {
			return nil, fmt.Errorf("rerank provider: malformed answer: %v", err)
		}
		for _, x := range r.Results {
			if x.Index == nil || x.RelevanceScore == nil {
				return nil, fmt.Errorf("rerank provider: a result without index or relevance_score")
			}
			out = append(out, Result{Index: *x.Index, Score: *x.RelevanceScore})
		}
	}
	return checked(out, len(docs))
}

// checked verifies that results score each of n documents exactly once
// and orders them best first (ties by index).
func checked(rs []Result, n int) ([]Result, error) {
	if len(rs) != n {
		return nil, fmt.Errorf("rerank provider: %d results for %d documents", len(rs), n)
	}
	seen := make([]bool, n)
	for _, r := range rs {
		if r.Index < 0 || r.Index >= n || seen[r.Index] {
			return nil, fmt.Errorf("rerank provider: result index %d is outside 0..%d or repeated", r.Index, n-1)
		}
		seen[r.Index] = true
	}
	sortResults(rs)
	return rs, nil
}

// errorMessage is the provider's own message when it sent one (Cohere's
// {"message"}, OpenAI-style {"error": {"message"}}, TEI's {"error"}),
// else the start of the body, else the status.
func errorMessage(raw []byte, status string) string {
	var e struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &e) == nil {
		if e.Message != "" {
			return e.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &o) == nil && o.Message != "" {
			return o.Message
		}
		if len(e.Detail) > 0 {
			return clip(string(e.Detail))
		}
	}
	if s := clip(strings.TrimSpace(string(raw))); s != "" {
		return s
	}
	return status
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
