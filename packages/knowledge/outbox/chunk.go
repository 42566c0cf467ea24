package outbox

import (
	"context"
	"fmt"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/chunk"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/chunkembed"
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

// ChunkOptions say how bodies are cut, in characters (runes): Chars, the
// most characters of one chunk's text (title, blank line and the body's
// part), and Overlap, how many of them the next chunk repeats
// (chunkembed.Options).
type ChunkOptions = chunkembed.Options

// Limits of the chunk settings.
const (
	MinChunkChars = 256
	MaxChunkChars = 40000 // more than any entry: never cut
	// MaxChunks bounds the chunks of one entry (chunk.Max).
	MaxChunks = chunk.Max
)

// DefaultChunkChars is the chunk size of a model without a known context
// size (chunkembed.DefaultChars).
const DefaultChunkChars = chunkembed.DefaultChars

// DefaultMaxInputChars is the most characters of one text the embeddings
// worker sends (jobs.HandlerOptions.MaxInputChars's default) and a model
// switch's backfill sends, a net under the chunks.
const DefaultMaxInputChars = chunkembed.DefaultMaxInputChars

// ChunkOptionsFor is the default cut for a model: its chunk size
// (chunkembed.OptionsFor lists the models it knows) and an eighth of it as
// overlap.
func ChunkOptionsFor(model string) ChunkOptions { return chunkembed.OptionsFor(model) }

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
type EntryText = chunkembed.Entry

// EntryVectors are an entry's vectors, one per chunk of its body (Spans[i]
// is Vecs[i]'s part of the body); the first is the entry's own.
type EntryVectors = chunkembed.Vectors

// EmbedEntries cuts each entry's body into chunks (o) and embeds every
// chunk of every entry in one call of e, each text cut to maxChars
// characters at most (chunkembed.Embed). The embeddings handler and the
// backfill of a model switch (maintenance) both embed this way.
func EmbedEntries(ctx context.Context, e embed.Embedder, o ChunkOptions, maxChars int, entries []EntryText) ([]EntryVectors, error) {
	return chunkembed.Embed(ctx, e, o, maxChars, entries)
}
