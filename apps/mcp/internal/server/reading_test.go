package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
)

// rawCall posts a tools/call whose arguments are the raw bytes given (not
// re-encoded by any client library) and returns the tool error body.
func (b *bundle) rawCall(token, tool, args string) (kt.ErrorBody, bool) {
	b.t.Helper()
	res := b.post(token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		b.t.Fatalf("%s %s: status %d %s", tool, args, res.StatusCode, data)
	}
	var msg struct {
		Result struct {
			IsError           bool            `json:"isError"`
			StructuredContent kt.ErrorPayload `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		b.t.Fatalf("%s: %v", data, err)
	}
	return msg.Result.StructuredContent.Error, msg.Result.IsError
}

// Issue 10, point 6: text that is not valid UTF-8 is refused, naming the
// argument, before JSON decoding could replace it with U+FFFD.
func TestInvalidUTF8IsRefusedNamingTheArgument(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	cases := map[string]struct{ args, field string }{
		"0xFF 0xFE":            {`{"title":"bad ` + "\xff\xfe" + `","body":"b"}`, "title"},
		"overlong 0xC0 0xAF":   {`{"title":"t","body":"x` + "\xc0\xaf" + `"}`, "body"},
		"encoded surrogate":    {`{"title":"t","body":"b","tags":["ok","x` + "\xed\xa0\x80" + `"]}`, "tags[1]"},
		"escape \\ud800":       {`{"title":"t\ud800","body":"b"}`, "title"},
		"low surrogate escape": {`{"title":"t","body":"\udc00 alone"}`, "body"},
		"high then not low":    {`{"title":"t","body":"\ud800\u0041"}`, "body"},
		"nested taskRef.kind":  {`{"title":"t","body":"b","taskRef":{"taskId":"0b7e4c3a-5f1d-4c8e-9a2b-1d3e5f7a9c0b","kind":"` + "\xff" + `"}}`, "taskRef.kind"},
	}
	for name, c := range cases {
		body, isErr := b.rawCall(a.token, kt.ToolStore, c.args)
		if !isErr || body.Code != "invalid_argument" || body.Field != c.field {
			t.Errorf("%s: got %+v (isError %v), want invalid_argument on %s", name, body, isErr, c.field)
		}
	}
	body, isErr := b.rawCall(a.token, kt.ToolSearch, `{"query":"`+"\xff"+`"}`)
	if !isErr || body.Field != "query" {
		t.Errorf("search: got %+v, want invalid_argument on query", body)
	}
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM knowledge").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d entries stored (%v), want 0", n, err)
	}
	// A real U+FFFD and a proper surrogate pair are text like any other.
	if _, isErr := b.rawCall(a.token, kt.ToolStore, `{"title":"ok \ufffd \ud83d\ude00 `+"\xef\xbf\xbd é"+`","body":"b"}`); isErr {
		t.Error("valid text refused")
	}
}

// Issue 10, point 7: a number too large for any type names its argument and
// the rule, like every other bad value.
func TestHugeNumbersNameTheArgument(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a := b.agent(b.org("acme"), "a", allScopes, 0)
	cases := map[string]struct{ tool, args, field, rule string }{
		"limit":      {kt.ToolSearch, `{"query":"x","limit":1e400}`, "limit", "must be an integer from 1 to 50 (got 1e400)"},
		"minScore":   {kt.ToolSearch, `{"query":"x","minScore":1e400}`, "minScore", "must be a number from 0 to 1 (got 1e400)"},
		"confidence": {kt.ToolStore, `{"title":"t","body":"b","confidence":-1e999}`, "confidence", "must be an integer from 0 to 100 (got -1e999)"},
	}
	for name, c := range cases {
		body, isErr := b.rawCall(a.token, c.tool, c.args)
		if !isErr || body.Code != "invalid_argument" || body.Field != c.field || body.Message != c.rule {
			t.Errorf("%s: got %+v, want invalid_argument %s: %s", name, body, c.field, c.rule)
		}
	}
}
