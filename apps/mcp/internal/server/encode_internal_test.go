package server

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A result encoded once reads, to any JSON reader, exactly as the go-sdk's
// own encoding of it: the same text, the same structured content, the
// same isError; a result of another shape is left to the go-sdk.
func TestEncodeOnceReadsAsTheSDKsEncoding(t *testing.T) {
	structured := []byte(`{"hits":[{"id":"6f1c","title":"a \"quoted\" title \\ with a backslash, <html> & ` + "\u00e9\u4e2d" + `","snippet":"line\nbreak\ttab \u2028"}],"vectorSearch":true}`)
	indented := []byte("{\n  \"a\": [1, 2],\n\t\"b\": \"x\"\n}")
	for name, res := range map[string]*mcp.CallToolResult{
		"answer":   {StructuredContent: json.RawMessage(structured), Content: []mcp.Content{&mcp.TextContent{Text: string(structured)}}},
		"indented": {StructuredContent: json.RawMessage(indented), Content: []mcp.Content{&mcp.TextContent{Text: string(indented)}}},
		"refusal": {IsError: true, StructuredContent: json.RawMessage(`{"error":{"code":"not_found"}}`),
			Content: []mcp.Content{&mcp.TextContent{Text: "not_found: \"id\" names no entry <of yours>"}}},
	} {
		t.Run(name, func(t *testing.T) {
			enc, ok := encodeOnce(res).(encodedResult)
			if !ok {
				t.Fatal("not encoded once")
			}
			once, err := json.Marshal(enc)
			if err != nil {
				t.Fatalf("the go-sdk's encoder refuses it: %v", err)
			}
			sdk, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			if err := json.Unmarshal(once, &a); err != nil {
				t.Fatalf("%s: %v", once, err)
			}
			json.Unmarshal(sdk, &b)
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Errorf("encoded once:\n%s\nthe go-sdk's:\n%s", once, sdk)
			}
		})
	}
	meta := &mcp.CallToolResult{Meta: mcp.Meta{"k": 1}, StructuredContent: json.RawMessage(`{}`), Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}
	if _, ok := encodeOnce(meta).(encodedResult); ok {
		t.Error("a result with _meta was encoded once: its shape is not a tool's of this server")
	}
}

// BenchmarkEncodeAnswer: a search answer of 10 hits (about 8 kB) as the
// go-sdk encodes a tool's result (the result, then its JSON-RPC message:
// json.Marshal of each, as jsonrpc2 does), with and without encodeOnce.
//
//	go test -run '^$' -bench EncodeAnswer ./apps/mcp/internal/server
func BenchmarkEncodeAnswer(b *testing.B) {
	type hit struct {
		ID, Title, Snippet string
		Score              float64
		Tags               []string
	}
	var hits []hit
	for i := range 10 {
		hits = append(hits, hit{ID: "6f1c2d3e-0000-4000-8000-00000000000" + string(rune('0'+i)), Title: "Restart the \"worker\" after a deploy",
			Snippet: "When the queue lags behind, restart the worker process; the backlog drains within minutes. Check the lag metric first, then the pool's connections, then the disk. " +
				"A second paragraph of the snippet with more words about postgres vacuum and index bloat, 600 characters or so in all, as a hit's snippet is.",
			Score: 0.83, Tags: []string{"ops", "queue"}})
	}
	raw, _ := json.Marshal(map[string]any{"hits": hits, "vectorSearch": true})
	mk := func() *mcp.CallToolResult {
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(raw), Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}
	}
	wire := func(res any) {
		r, err := json.Marshal(res)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(struct {
			V  string          `json:"jsonrpc"`
			ID int             `json:"id"`
			R  json.RawMessage `json:"result"`
		}{"2.0", 1, r}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("sdk", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for range b.N {
			wire(mk())
		}
	})
	b.Run("once", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for range b.N {
			wire(encodeOnce(mk()))
		}
	})
}
