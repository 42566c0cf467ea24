package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// SnippetChars is the longest snippet, in characters (runes), ellipses included.
const SnippetChars = 240

const ellipsis = '…'

// Snippet cuts at most SnippetChars characters of body, centred on the first
// case-insensitive match of the whole query, else on the first word of the
// query that occurs in body, else the start. It works on runes, so it never
// cuts a character in two; an ellipsis marks each side that was cut.
func Snippet(body, query string) string {
	rs := []rune(body)
	if len(rs) <= SnippetChars {
		return body
	}
	// Lowercasing rune by rune keeps rune offsets aligned with rs (a
	// string-wide ToLower may change lengths, e.g. for 'İ').
	lower := strings.Map(unicode.ToLower, body)
	at, n := indexFold(lower, query)
	if at < 0 {
		for _, w := range strings.FieldsFunc(query, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			if at, n = indexFold(lower, w); at >= 0 {
				break
			}
		}
	}
	if at < 0 {
		at, n = 0, 0
	}
	return window(rs, at, n)
}

// indexFold finds needle in the rune-wise lowercased haystack and returns
// its rune offset and rune length, or -1.
func indexFold(lowerHaystack, needle string) (int, int) {
	needle = strings.Map(unicode.ToLower, strings.TrimSpace(needle))
	if needle == "" {
		return -1, 0
	}
	i := strings.Index(lowerHaystack, needle)
	if i < 0 {
		return -1, 0
	}
	return utf8.RuneCountInString(lowerHaystack[:i]), utf8.RuneCountInString(needle)
}

// window returns SnippetChars runes of rs centred on [at, at+n).
func window(rs []rune, at, n int) string {
	total := len(rs)
	if total <= SnippetChars {
		return string(rs)
	}
	start := at + n/2 - SnippetChars/2
	if n >= SnippetChars {
		start = at
	}
	start = max(0, min(start, total-SnippetChars))
	end := start + SnippetChars
	var b strings.Builder
	if start > 0 {
		start++ // room for the leading ellipsis
		b.WriteRune(ellipsis)
	}
	cutEnd := end < total
	if cutEnd {
		end--
	}
	b.WriteString(string(rs[start:end]))
	if cutEnd {
		b.WriteRune(ellipsis)
	}
	return b.String()
}
