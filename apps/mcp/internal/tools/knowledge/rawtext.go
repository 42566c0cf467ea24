package knowledge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// checkRawText refuses string values whose raw JSON text is not valid
// UTF-8: invalid bytes (0xFF, 0xFE), overlong forms (0xC0 0xAF), encoded
// surrogates (0xED 0xA0 0x80) and lone surrogate escapes (\ud800). JSON
// decoding silently turns each of them into U+FFFD, so the check must see
// the bytes before decoding does; afterwards the text is valid UTF-8 and
// nothing can tell a replaced byte from a real U+FFFD. The error names the
// argument by its path (title, tags[2], taskRef.kind).
//
// raw is the arguments object exactly as the request carried it (the SDK
// hands it over as json.RawMessage, copied verbatim).
func checkRawText(path string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		if !validJSONText(raw) {
			return errs.InvalidArgument(nameOr(path), "must be valid UTF-8 text (it has bytes or \\u escapes that are not: invalid bytes, overlong forms or unpaired surrogates)")
		}
	case '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.Token() // {
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return nil // not valid JSON: the decoder says so next
			}
			key, _ := t.(string)
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return nil
			}
			p := key
			if path != "" {
				p = path + "." + key
			}
			if err := checkRawText(p, v); err != nil {
				return err
			}
		}
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, v := range items {
			if err := checkRawText(fmt.Sprintf("%s[%d]", path, i), v); err != nil {
				return err
			}
		}
	}
	return nil
}

func nameOr(path string) string {
	if path == "" {
		return "arguments"
	}
	return path
}

// validJSONText reports whether a JSON string literal (with its quotes) is
// valid UTF-8 with every \u escape a scalar value or a proper surrogate pair.
func validJSONText(lit []byte) bool {
	if !utf8.Valid(lit) {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i >= len(lit) || lit[i] != 'u' {
			continue // \" \\ \n ...: one character, skipped with the backslash
		}
		r, ok := hex4(lit, i+1)
		if !ok {
			return false
		}
		i += 4
		switch {
		case utf16.IsSurrogate(r) && r < 0xDC00: // high: a low escape must follow
			if i+6 >= len(lit) || lit[i+1] != '\\' || lit[i+2] != 'u' {
				return false
			}
			lo, ok := hex4(lit, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		case utf16.IsSurrogate(r): // a low surrogate on its own
			return false
		}
	}
	return true
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}
