package server

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's answer is encoded once: the tool marshals its structured
// content (kt), and its text content is the same JSON as a string. The
// go-sdk would encode the result again, escaping that text with
// encoding/json's string encoder and re-validating the structured content
// inside it; encodedResult hands it the result's JSON made once, here: the
// structured content as the tool made it, and its text form by escaping
// those bytes (a JSON text is valid UTF-8 whose control characters are
// escaped already, so only its quotes and backslashes need escaping). What
// is left of the go-sdk's work is its compaction of the finished bytes.

// encodedResult is a tool's result with its JSON made once. It embeds the
// result, so it is an mcp.Result, and marshals as json.
type encodedResult struct {
	*mcp.CallToolResult
	json []byte
}

func (r encodedResult) MarshalJSON() ([]byte, error) { return r.json, nil }

// encodeOnce returns res with its JSON made once, or res itself when its
// shape is not the one a tool of this server answers (one text content,
// the same JSON as the structured content, nothing else), which the go-sdk
// then encodes as usual.
func encodeOnce(res mcp.Result) mcp.Result {
	tr, ok := res.(*mcp.CallToolResult)
	if !ok || tr == nil || len(tr.Meta) != 0 || tr.InputRequests != nil || len(tr.Content) != 1 {
		return res
	}
	raw, ok := tr.StructuredContent.(json.RawMessage)
	text, isText := tr.Content[0].(*mcp.TextContent)
	if !ok || !isText || text.Meta != nil || text.Annotations != nil {
		return res
	}
	var b []byte
	if text.Text == string(raw) {
		b = make([]byte, 0, 2*len(raw)+64)
		b = append(b, `{"content":[{"type":"text","text":`...)
		b = appendQuoted(b, raw)
	} else { // a refusal: its text is the error's wording
		t, err := json.Marshal(text.Text)
		if err != nil {
			return res
		}
		b = make([]byte, 0, len(t)+len(raw)+64)
		b = append(b, `{"content":[{"type":"text","text":`...)
		b = append(b, t...)
	}
	b = append(b, `}],"structuredContent":`...)
	b = append(b, raw...)
	if tr.IsError {
		b = append(b, `,"isError":true`...)
	}
	b = append(b, '}')
	return encodedResult{CallToolResult: tr, json: b}
}

// appendQuoted appends the JSON text j as a JSON string: its quotes and
// backslashes escaped, and the white space an indented text would have
// outside its strings (a compact one has none; within its strings control
// characters are escaped already). j is valid UTF-8: the go-sdk's
// encoding of the result checks what MarshalJSON returns.
func appendQuoted(b, j []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i, c := range j {
		switch {
		case c == '"' || c == '\\':
			b = append(b, j[start:i]...)
			b = append(b, '\\', c)
			start = i + 1
		case c < 0x20:
			b = append(b, j[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			start = i + 1
		}
	}
	b = append(b, j[start:]...)
	return append(b, '"')
}
