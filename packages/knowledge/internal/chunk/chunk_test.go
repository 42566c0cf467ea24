package chunk

import (
	"strings"
	"testing"
	"unicode"
)

func TestCutCoversTheBodyAtBoundariesWithOverlap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 0; b.Len() < 30000; i++ {
		b.WriteString("Ünïcode wörd number ")
		b.WriteString(strings.Repeat("x", i%9))
		if i%11 == 10 {
			b.WriteString(". ")
		}
		if i%60 == 59 {
			b.WriteString("\n\n")
		}
	}
	body := []rune(b.String())
	title := "a title"
	chars, overlap := 2000, 250
	spans := Cut(title, body, chars, overlap)
	if len(spans) < 15 || spans[0].Start != 0 || spans[len(spans)-1].End != len(body) {
		t.Fatalf("%d spans, first %v, last %v of %d", len(spans), spans[0], spans[len(spans)-1], len(body))
	}
	for i, s := range spans {
		if n := len([]rune(Text(title, body, s))); n > chars {
			t.Fatalf("chunk %d is %d characters with its title, more than %d", i, n, chars)
		}
		if i == 0 {
			continue
		}
		prev := spans[i-1]
		if s.Start >= prev.End || prev.End-s.Start > overlap+20 || s.Start <= prev.Start {
			t.Fatalf("chunk %d %v after %v: want an overlap of about %d", i, s, prev, overlap)
		}
		// Cut at a boundary (white space before the cut), started at a word.
		if !unicode.IsSpace(body[prev.End-1]) || !unicode.IsSpace(body[s.Start-1]) {
			t.Fatalf("chunk %d cut mid-word: %q | %q", i, string(body[prev.End-5:prev.End]), string(body[s.Start:s.Start+5]))
		}
	}
	// A paragraph break in the last half of the room is preferred.
	para := []rune(strings.Repeat("word ", 300) + "\n\n" + strings.Repeat("next ", 300))
	if s := Cut("", para, 2000, 0); s[0].End != 1502 {
		t.Fatalf("first cut at %d, want the paragraph break at 1502", s[0].End)
	}
	// A body that fits is one chunk; so is any body with the largest chunk
	// size (knowledge.MaxChunkChars).
	if s := Cut(title, []rune("short"), chars, overlap); len(s) != 1 || s[0] != (Span{0, 5}) {
		t.Fatalf("short body: %v", s)
	}
	if s := Cut(title, body, 40000, 0); len(s) != 1 {
		t.Fatalf("40,000 characters: %d chunks", len(s))
	}
	// No white space at all: cut at the room, still progressing.
	if s := Cut("", []rune(strings.Repeat("x", 5000)), 1000, 100); len(s) != 6 || s[1].Start != 898 { // 998 characters with the blank line, 100 again
		t.Fatalf("no spaces: %v", s)
	}
	// At most Max.
	if s := Cut("", body, 256, 0); len(s) != Max {
		t.Fatalf("%d chunks, want the cap %d", len(s), Max)
	}
}
