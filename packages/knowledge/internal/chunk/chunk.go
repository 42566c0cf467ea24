// Package chunk cuts an entry's body into the overlapping parts the
// embeddings worker embeds one by one (docs/embeddings.md, "Long entries:
// chunks"): at paragraph, line, sentence or word boundaries, so a fact is
// whole in at least one part. It knows runes and boundaries, nothing of
// models or settings (knowledge.ChunkOptions).
package chunk

import (
	"strings"
	"unicode"
)

// Max bounds the chunks of one entry (a 32,000-character body in chunks
// of 1,000 with 125 of overlap makes 37).
const Max = 64

// Span is a chunk's part of the body: runes [Start, End).
type Span struct{ Start, End int }

// Text is the text embedded for a chunk: the title, a blank line, and
// the chunk's part of the body (body given as runes).
func Text(title string, body []rune, s Span) string {
	return title + "\n\n" + string(body[s.Start:s.End])
}

// Cut cuts a body into spans of at most chars characters with the title
// (title, blank line, part), each starting where the previous one ends
// less about overlap characters. Boundaries, best first, within the
// last half of a chunk's room: a paragraph break (a blank line), a line
// break, the end of a sentence (., !, ? followed by white space), white
// space; a chunk is cut mid-word only when its whole room has none. A chunk
// after the first starts at a word. A body that fits is one span, the
// whole body. At most Max spans: the last one then ends the body's
// cover early (32,000 characters need chunks of 600 to hit it).
func Cut(title string, body []rune, chars, overlap int) []Span {
	n := len(body)
	room := chars - len([]rune(title)) - 2
	if room < chars/2 {
		room = chars / 2 // a long title: parts keep half the chunk
	}
	if chars <= 0 || n <= room {
		return []Span{{0, n}}
	}
	overlap = min(max(overlap, 0), room/2)
	var out []Span
	for start := 0; ; {
		if n-start <= room || len(out) == Max-1 {
			out = append(out, Span{start, min(n, start+room)})
			return out
		}
		end := cut(body, start+room/2, start+room)
		out = append(out, Span{start, end})
		next := wordStart(body, end-overlap, end)
		if next <= start {
			next = end
		}
		start = next
	}
}

// cut is the best boundary in body[lo:hi] (runes): the end of the last
// paragraph break, else line break, else sentence end, else white space;
// else hi.
func cut(body []rune, lo, hi int) int {
	best := [4]int{-1, -1, -1, -1} // paragraph, line, sentence, space
	for i := hi - 1; i >= lo; i-- {
		r := body[i]
		if !unicode.IsSpace(r) {
			continue
		}
		switch {
		case r == '\n' && i > 0 && body[i-1] == '\n':
			if best[0] < 0 {
				best[0] = i + 1
			}
		case r == '\n':
			if best[1] < 0 {
				best[1] = i + 1
			}
		case i > 0 && strings.ContainsRune(".!?", body[i-1]):
			if best[2] < 0 {
				best[2] = i + 1
			}
		default:
			if best[3] < 0 {
				best[3] = i + 1
			}
		}
		if best[0] >= 0 {
			break
		}
	}
	for _, b := range best {
		if b > lo {
			return b
		}
	}
	return hi
}

// wordStart moves at forward to the start of a word (after white space),
// not past limit; at itself when nothing is found.
func wordStart(body []rune, at, limit int) int {
	at = max(at, 0)
	if at == 0 || unicode.IsSpace(body[at-1]) {
		return at
	}
	for i := at; i < limit; i++ {
		if unicode.IsSpace(body[i]) {
			return i + 1
		}
	}
	return at
}

// hitBody is a hit's body and, when one of its later chunks is nearer the
// query than its own vector, that chunk's span (else Start = -1).
