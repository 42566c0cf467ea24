package knowledge

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

func TestChunksCoverTheBodyAtBoundariesWithOverlap(t *testing.T) {
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
	o := ChunkOptions{Chars: 2000, Overlap: 250}
	spans := Chunks(title, body, o)
	if len(spans) < 15 || spans[0].Start != 0 || spans[len(spans)-1].End != len(body) {
		t.Fatalf("%d spans, first %v, last %v of %d", len(spans), spans[0], spans[len(spans)-1], len(body))
	}
	for i, s := range spans {
		if n := len([]rune(ChunkText(title, body, s))); n > o.Chars {
			t.Fatalf("chunk %d is %d characters with its title, more than %d", i, n, o.Chars)
		}
		if i == 0 {
			continue
		}
		prev := spans[i-1]
		if s.Start >= prev.End || prev.End-s.Start > o.Overlap+20 || s.Start <= prev.Start {
			t.Fatalf("chunk %d %v after %v: want an overlap of about %d", i, s, prev, o.Overlap)
		}
		// Cut at a boundary (white space before the cut), started at a word.
		if !unicode.IsSpace(body[prev.End-1]) || !unicode.IsSpace(body[s.Start-1]) {
			t.Fatalf("chunk %d cut mid-word: %q | %q", i, string(body[prev.End-5:prev.End]), string(body[s.Start:s.Start+5]))
		}
	}
	// A paragraph break in the last half of the room is preferred.
	para := []rune(strings.Repeat("word ", 300) + "\n\n" + strings.Repeat("next ", 300))
	if s := Chunks("", para, ChunkOptions{Chars: 2000}); s[0].End != 1502 {
		t.Fatalf("first cut at %d, want the paragraph break at 1502", s[0].End)
	}
	// A body that fits is one chunk; so is any body with MaxChunkChars.
	if s := Chunks(title, []rune("short"), o); len(s) != 1 || s[0] != (Span{0, 5}) {
		t.Fatalf("short body: %v", s)
	}
	if s := Chunks(title, body, ChunkOptions{Chars: MaxChunkChars}); len(s) != 1 {
		t.Fatalf("MaxChunkChars: %d chunks", len(s))
	}
	// No white space at all: cut at the room, still progressing.
	if s := Chunks("", []rune(strings.Repeat("x", 5000)), ChunkOptions{Chars: 1000, Overlap: 100}); len(s) != 6 || s[1].Start != 898 { // 998 characters with the blank line, 100 again
		t.Fatalf("no spaces: %v", s)
	}
	// At most MaxChunks.
	if s := Chunks("", body, ChunkOptions{Chars: MinChunkChars}); len(s) != MaxChunks {
		t.Fatalf("%d chunks, want the cap %d", len(s), MaxChunks)
	}
}

func TestChunkSettings(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]int{"all-minilm:l6-v2": 1000, "BAAI/bge-large-en-v1.5": 2000,
		"nomic-embed-text": 4000, "text-embedding-3-large": 4000, "mystery-model": DefaultChunkChars} {
		o, err := ChunkSettings(model, ChunkOptions{Overlap: -1})
		if err != nil || o.Chars != want || o.Overlap != want/8 {
			t.Fatalf("%s: %+v %v, want %d", model, o, err, want)
		}
	}
	if o, err := ChunkSettings("m", ChunkOptions{Chars: 3000, Overlap: 0}); err != nil || o != (ChunkOptions{3000, 0}) {
		t.Fatalf("explicit: %+v %v", o, err)
	}
	var oe *ChunkOverlapError
	if _, err := ChunkSettings("m", ChunkOptions{Chars: 1000, Overlap: 500}); !errors.As(err, &oe) || oe.Chars != 1000 {
		t.Fatalf("overlap of half the size: %v", err)
	}
}
