package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A call is a tools/call with the token and MCP's headers, and it fails on
// a status other than 200 and on an answer marked isError, as the bash
// clients judge them.
func TestCallSendsAToolCallAndJudgesTheAnswer(t *testing.T) {
	var got struct {
		Method string `json:"method"`
		Params struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"params"`
	}
	answer, status := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("MCP-Protocol-Version") == "" {
			http.Error(w, "headers", http.StatusUnauthorized)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	if _, failure := call(srv.Client(), srv.URL, "tok", "search_knowledge", map[string]any{"query": "q"}); failure != "" {
		t.Fatalf("a good answer failed: %s", failure)
	}
	if got.Method != "tools/call" || got.Params.Name != "search_knowledge" || got.Params.Arguments["query"] != "q" {
		t.Fatalf("sent %+v", got)
	}
	answer = `{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"quota"}]}}`
	if _, failure := call(srv.Client(), srv.URL, "tok", "store_knowledge", nil); !strings.Contains(failure, "quota") {
		t.Fatalf("an answer marked isError: failure %q", failure)
	}
	answer, status = "busy", http.StatusServiceUnavailable
	if _, failure := call(srv.Client(), srv.URL, "tok", "store_knowledge", nil); !strings.Contains(failure, "HTTP 503") {
		t.Fatalf("a 503: failure %q", failure)
	}
	if _, failure := call(srv.Client(), srv.URL, "other", "store_knowledge", nil); !strings.Contains(failure, "HTTP 401") {
		t.Fatalf("a wrong token: failure %q", failure)
	}
}
