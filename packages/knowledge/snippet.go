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
	if len(body) <= SnippetChars {
		return body // at most SnippetChars bytes: at most as many runes
	}
	if isASCII(body) {
		// The common case, and worth its own path: a 32,000-character body
		// costs ~0.7 ms as runes and ~0.03 ms as bytes, for each hit of
		// every search. Bytes are runes here, and ASCII lowercases in place.
		at, n := find(strings.ToLower(body), query, false)
		start, end, lead, trail := window(len(body), at, n)
		return lead + body[start:end] + trail
	}
	rs := []rune(body)
	if len(rs) <= SnippetChars {
		return body
	}
	// Lowercasing rune by rune keeps rune offsets aligned with rs (a
	// string-wide ToLower may change lengths, e.g. for 'İ').
	at, n := find(strings.Map(unicode.ToLower, body), query, true)
	start, end, lead, trail := window(len(rs), at, n)
	return lead + string(rs[start:end]) + trail
}

// find locates the whole query in the lowercased body, else its first word
// that occurs there, and returns the offset and length of the match, or 0,
// 0 for none: in runes, or in bytes when the body is ASCII (!runes).
func find(lower, query string, runes bool) (int, int) {
	at, n := indexFold(lower, query, runes)
	if at < 0 {
		for _, w := range strings.FieldsFunc(query, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			if at, n = indexFold(lower, w, runes); at >= 0 {
				break
			}
		}
	}
	if at < 0 {
		return 0, 0
	}
	return at, n
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// indexFold finds needle in the rune-wise lowercased haystack and returns
// its offset and length (in runes, or bytes if !runes), or -1.
func indexFold(lowerHaystack, needle string, runes bool) (int, int) {
	needle = strings.Map(unicode.ToLower, strings.TrimSpace(needle))
	if needle == "" {
		return -1, 0
	}
	i := strings.Index(lowerHaystack, needle)
	if i < 0 {
		return -1, 0
	}
	if !runes {
		return i, len(needle)
	}
	return utf8.RuneCountInString(lowerHaystack[:i]), utf8.RuneCountInString(needle)
}

// window places SnippetChars runes of a text of total runes (more than
// SnippetChars) centred on [at, at+n): the runes [start, end) and the
// ellipses that go before and after them (empty where nothing was cut).
func window(total, at, n int) (start, end int, lead, trail string) {
	start = at + n/2 - SnippetChars/2
	if n >= SnippetChars {
		start = at
	}
	start = max(0, min(start, total-SnippetChars))
	end = start + SnippetChars
	if start > 0 {
		start++ // room for the leading ellipsis
		lead = string(ellipsis)
	}
	if end < total {
		end--
		trail = string(ellipsis)
	}
	return start, end, lead, trail
}
