package outbox

import (
	"errors"
	"testing"
)

func TestChunkSettings(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]int{"all-minilm:l6-v2": 1000, "BAAI/bge-large-en-v1.5": 2000,
		"nomic-embed-text": 4000, "text-embedding-3-large": 4000, "mystery-model": DefaultChunkChars} {
		o, err := ChunkSettings(model, ChunkOptions{Overlap: -1})
		if err != nil || o.Chars != want || o.Overlap != want/8 {
			t.Fatalf("%s: %+v %v, want %d", model, o, err, want)
		}
	}
	if o, err := ChunkSettings("m", ChunkOptions{Chars: 3000, Overlap: 0}); err != nil || o != (ChunkOptions{Chars: 3000, Overlap: 0}) {
		t.Fatalf("explicit: %+v %v", o, err)
	}
	var oe *ChunkOverlapError
	if _, err := ChunkSettings("m", ChunkOptions{Chars: 1000, Overlap: 500}); !errors.As(err, &oe) || oe.Chars != 1000 {
		t.Fatalf("overlap of half the size: %v", err)
	}
}
