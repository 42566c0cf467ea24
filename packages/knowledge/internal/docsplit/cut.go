package docsplit

import (
	"unicode"
	"unicode/utf8"
)

// span is a piece of a section: bytes [start, end) of its text.
type span struct{ start, end int }

// Boundary classes, best first.
const (
	paragraphBreak = iota // the start of a line after a blank line
	lineBreak             // the start of a line
	sentenceEnd           // after the white space that follows . ! ?, or after 。！？
	wordBreak             // after white space
	classes
)

// cut cuts s into pieces of at most maxChars runes (one piece when it fits
// or maxChars < 1). Each piece ends at the best boundary of its window (the
// maxChars runes from where it starts): the last paragraph break, else
// line break, else sentence end, else word break in the window's second
// half, so a piece keeps at least half the room and a reader gets whole
// paragraphs where the text has them; failing those, the best one in the
// first half; failing all, the window's last rune boundary (a word longer
// than maxChars, or a text without spaces that is not CJK prose). A cut is
// never placed before the window's first non-space rune, so a piece is
// white space alone only when the window holds nothing else.
func cut(s string, maxChars int) []span {
	left := utf8.RuneCountInString(s)
	if maxChars < 1 || left <= maxChars {
		return []span{{0, len(s)}}
	}
	var out []span
	start := 0
	for left > maxChars {
		mid, end := start, start
		for k := 0; k < maxChars; k++ {
			if k == maxChars/2 {
				mid = end
			}
			end += runeLen(s, end)
		}
		c := boundary(s, start, mid, end)
		out = append(out, span{start, c})
		left -= utf8.RuneCountInString(s[start:c])
		start = c
	}
	return append(out, span{start, len(s)})
}

// boundary is where the piece of s starting at start ends: the best cut in
// (first non-space rune, end], preferring cuts at or after mid (see cut).
func boundary(s string, start, mid, end int) int {
	lo := start
	for lo < end {
		r, w := decode(s, lo)
		if !isSpace(r) {
			break
		}
		lo += w
	}
	if lo == end {
		return end // white space alone fills the window
	}
	var best [2][classes]int // [0]: at or after mid, [1]: before; 0 = none
	blankLine := false       // the line being scanned has only white space so far
	var prev rune
	for i := lo; i < end; {
		r, w := decode(s, i)
		i += w
		class := -1
		switch {
		case r == '\n' && blankLine:
			class = paragraphBreak
		case r == '\n':
			class = lineBreak
		case r == '。' || r == '！' || r == '？':
			class = sentenceEnd
		case isSpace(r) && (prev == '.' || prev == '!' || prev == '?'):
			class = sentenceEnd
		case isSpace(r):
			class = wordBreak
		}
		if r == '\n' {
			blankLine = true
		} else if !isSpace(r) {
			blankLine = false
		}
		prev = r
		if class >= 0 {
			tier := 0
			if i < mid {
				tier = 1
			}
			best[tier][class] = i
		}
	}
	for _, tier := range best {
		for _, c := range tier {
			if c > 0 {
				return c
			}
		}
	}
	if end-1 > lo && s[end-1] == '\r' && end < len(s) && s[end] == '\n' {
		return end - 1 // keep a CRLF whole
	}
	return end
}

// decode is the rune at s[i:] and its width, ASCII without a call: most
// documents are mostly ASCII and every rune of a cut window is looked at.
func decode(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// runeLen is the width of the rune at s[i:].
func runeLen(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	return w
}

// isSpace is unicode.IsSpace, ASCII first.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return r >= utf8.RuneSelf && unicode.IsSpace(r)
}
