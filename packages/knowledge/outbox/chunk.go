package outbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/chunk"
)

// Long entries are embedded in chunks (docs/embeddings.md, "Long entries:
// chunks"). A body may hold 32,000 characters (~8k tokens) and common
// embedding models read 256 to 8,192 tokens, silently truncating the rest
// (or refusing it); one vector for a long text is also a blur of all its
// topics. So the worker cuts the body into overlapping chunks, embeds each
// as the entry's title, a blank line and the chunk's text, and keeps every
// vector: the first chunk's is the entry's own (knowledge.embedding, so
// everything that reads an entry's vector goes on working), the others are
// in knowledge_chunks with their span of the body. The vector list ranks an
// entry by its best vector, and the snippet of a hit found by a later chunk
// is centred on that chunk.

// ChunkOptions say how bodies are cut, in characters (runes).
type ChunkOptions struct {
	// Chars is the most characters of one chunk's text (title, blank line
	// and the body's part), what the model must be able to read. A body
	// that fits with its title is one chunk, embedded as before.
	Chars int
	// Overlap is how many characters of the end of a chunk the next one
	// repeats, so a fact cut by a boundary is whole in one of them.
	Overlap int
}

// Limits of the chunk settings.
const (
	MinChunkChars = 256
	MaxChunkChars = 40000 // more than any entry: never cut
	// MaxChunks bounds the chunks of one entry (chunk.Max).
	MaxChunks = chunk.Max
)

// chunkModels are the context sizes of models people run, as chunk sizes
// in characters (about 4 characters a token in English, with room for the
// tokenizer's differences): a 512-token model gets 2,000 characters, a
// 256-token one 1,000. Long-context models get 4,000 characters (about
// 1,000 tokens): they could read more, but a chunk is also the unit a
// query is matched with, and a vector of 8,000 tokens blurs its topics.
// The first name contained in the model's name (lowercased) wins.
var ChunkModels = []struct {
	name  string
	chars int
}{
	{"all-minilm", 1000}, {"minilm", 1000}, {"paraphrase-multilingual", 1000},
	{"bge-small", 2000}, {"bge-base", 2000}, {"bge-large", 2000}, {"bge-m3", 4000},
	{"mxbai-embed", 2000}, {"snowflake-arctic-embed", 2000}, {"e5-", 2000}, {"gte-", 2000},
	{"nomic-embed", 4000}, {"text-embedding-3", 4000}, {"text-embedding-ada", 4000},
	{"jina-embeddings", 4000}, {"voyage", 4000},
}

// DefaultChunkChars is the chunk size of a model not in the list: 512
// tokens is the smallest context of the common models but the 256-token
// MiniLM family (which is in it).
const DefaultChunkChars = 2000

// DefaultMaxInputChars is the most characters of one text the embeddings
// worker sends (jobs.HandlerOptions.MaxInputChars's default) and a model
// switch's backfill sends, a net under the chunks.
const DefaultMaxInputChars = 8000

// ChunkOptionsFor is the default cut for a model: its chunk size from the
// list above (else DefaultChunkChars) and an eighth of it as overlap.
func ChunkOptionsFor(model string) ChunkOptions {
	m := strings.ToLower(model)
	chars := DefaultChunkChars
	for _, c := range ChunkModels {
		if strings.Contains(m, c.name) {
			chars = c.chars
			break
		}
	}
	return ChunkOptions{Chars: chars, Overlap: chars / 8}
}

// ChunkSettings completes the configured cut (Chars 0: the model's size;
// Overlap < 0: an eighth of the size) and checks it: the overlap must be
// under half the size, or chunks would barely advance
// (*ChunkOverlapError).
func ChunkSettings(model string, o ChunkOptions) (ChunkOptions, error) {
	def := ChunkOptionsFor(model)
	if o.Chars <= 0 {
		o.Chars = def.Chars
	}
	if o.Overlap < 0 {
		o.Overlap = o.Chars / 8
	}
	if o.Overlap >= o.Chars/2 {
		return o, &ChunkOverlapError{o}
	}
	return o, nil
}

// ChunkOverlapError is ChunkSettings' refusal of an overlap of half the
// chunk size or more.
type ChunkOverlapError struct{ ChunkOptions }

func (e *ChunkOverlapError) Error() string {
	return fmt.Sprintf("chunk overlap %d: must be less than half of the chunk size (%d)", e.Overlap, e.Chars)
}

// Span is a chunk's part of the body: runes [Start, End).
type Span = chunk.Span

// ChunkText is the text embedded for a chunk: the title, a blank line, and
// the chunk's part of the body (body given as runes).
func ChunkText(title string, body []rune, s Span) string { return chunk.Text(title, body, s) }

// Chunks cuts a body into spans by o (chunk.Cut says where it cuts).
func Chunks(title string, body []rune, o ChunkOptions) []Span {
	return chunk.Cut(title, body, o.Chars, o.Overlap)
}

// EntryText is an entry to embed: its title and body.
type EntryText struct{ Title, Body string }

// EntryVectors are an entry's vectors, one per chunk of its body (Spans[i]
// is Vecs[i]'s part of the body); the first is the entry's own.
type EntryVectors struct {
	Spans []Span
	Vecs  [][]float32
}

// EmbedEntries cuts each entry's body into chunks (o) and embeds every
// chunk of every entry in one call of e (the provider client splits it into
// requests of its batch size), each text cut to maxChars characters at most.
// A wrong count or width is embed.ErrPermanent. The embeddings handler and
// the backfill of a model switch both embed this way.
func EmbedEntries(ctx context.Context, e embed.Embedder, o ChunkOptions, maxChars int, entries []EntryText) ([]EntryVectors, error) {
	out := make([]EntryVectors, len(entries))
	var texts []string
	for i, en := range entries {
		body := []rune(en.Body)
		out[i].Spans = Chunks(en.Title, body, o)
		for _, sp := range out[i].Spans {
			texts = append(texts, domain.ClipRunes(ChunkText(en.Title, body, sp), maxChars))
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
