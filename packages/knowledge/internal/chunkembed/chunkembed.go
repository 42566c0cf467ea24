// Package chunkembed embeds entries the way the module keeps their vectors
// (docs/embeddings.md, "Long entries: chunks"): each body cut into chunks
// sized for the model (Options, OptionsFor), every chunk embedded as the
// entry's title, a blank line and the chunk's text, one vector per chunk.
// The embeddings worker (the outbox) and a model switch's backfill
// (maintenance) both embed this way, so it sits below both; package chunk
// says where a body is cut.
package chunkembed

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/chunk"
)

// Options say how bodies are cut, in characters (runes).
type Options struct {
	// Chars is the most characters of one chunk's text (title, blank line
	// and the body's part), what the model must be able to read. A body
	// that fits with its title is one chunk, embedded as before.
	Chars int
	// Overlap is how many characters of the end of a chunk the next one
	// repeats, so a fact cut by a boundary is whole in one of them.
	Overlap int
}

// models are the context sizes of models people run, as chunk sizes
// in characters (about 4 characters a token in English, with room for the
// tokenizer's differences): a 512-token model gets 2,000 characters, a
// 256-token one 1,000. Long-context models get 4,000 characters (about
// 1,000 tokens): they could read more, but a chunk is also the unit a
// query is matched with, and a vector of 8,000 tokens blurs its topics.
// The first name contained in the model's name (lowercased) wins.
var models = []struct {
	name  string
	chars int
}{
	{"all-minilm", 1000}, {"minilm", 1000}, {"paraphrase-multilingual", 1000},
	{"bge-small", 2000}, {"bge-base", 2000}, {"bge-large", 2000}, {"bge-m3", 4000},
	{"mxbai-embed", 2000}, {"snowflake-arctic-embed", 2000}, {"e5-", 2000}, {"gte-", 2000},
	{"nomic-embed", 4000}, {"text-embedding-3", 4000}, {"text-embedding-ada", 4000},
	{"jina-embeddings", 4000}, {"voyage", 4000},
}

// DefaultChars is the chunk size of a model not in the list: 512
// tokens is the smallest context of the common models but the 256-token
// MiniLM family (which is in it).
const DefaultChars = 2000

// DefaultMaxInputChars is the most characters of one text the embeddings
// worker sends (jobs.HandlerOptions.MaxInputChars's default) and a model
// switch's backfill sends, a net under the chunks.
const DefaultMaxInputChars = 8000

// OptionsFor is the default cut for a model: its chunk size from the
// list above (else DefaultChars) and an eighth of it as overlap.
func OptionsFor(model string) Options {
	m := strings.ToLower(model)
	chars := DefaultChars
	for _, c := range models {
		if strings.Contains(m, c.name) {
			chars = c.chars
			break
		}
	}
	return Options{Chars: chars, Overlap: chars / 8}
}

// Entry is an entry to embed: its title and body.
type Entry struct{ Title, Body string }

// Vectors are an entry's vectors, one per chunk of its body (Spans[i]
// is Vecs[i]'s part of the body); the first is the entry's own.
type Vectors struct {
	Spans []chunk.Span
	Vecs  [][]float32
}

// Embed cuts each entry's body into chunks (o) and embeds every
// chunk of every entry in one call of e (the provider client splits it into
// requests of its batch size), each text cut to maxChars characters at most.
// A wrong count or width is embed.ErrPermanent.
func Embed(ctx context.Context, e embed.Embedder, o Options, maxChars int, entries []Entry) ([]Vectors, error) {
	out := make([]Vectors, len(entries))
	var texts []string
	for i, en := range entries {
		body := []rune(en.Body)
		out[i].Spans = chunk.Cut(en.Title, body, o.Chars, o.Overlap)
		for _, sp := range out[i].Spans {
			texts = append(texts, domain.ClipRunes(chunk.Text(en.Title, body, sp), maxChars))
		}
	}
	vecs, err := e.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embedder returned %d vectors for %d texts: %w", len(vecs), len(texts), embed.ErrPermanent)
	}
	for _, v := range vecs {
		if len(v) != e.Dimensions() {
			return nil, fmt.Errorf("embedder returned %d dimensions, its model %q has %d: %w", len(v), e.Model(), e.Dimensions(), embed.ErrPermanent)
		}
	}
	for i := range out {
		out[i].Vecs, vecs = vecs[:len(out[i].Spans)], vecs[len(out[i].Spans):]
	}
	return out, nil
}
