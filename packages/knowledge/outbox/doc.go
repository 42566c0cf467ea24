// Package outbox is the embeddings pipeline's view of the knowledge tables
// and how the pipeline cuts and embeds bodies.
//
// The outbox is the entries' own columns: embedding_status = 'pending' is
// an entry waiting for its vectors, embedding_generation names the request
// a job was made for. Outbox reads the pending entries of jobs, writes
// their vectors (knowledge.embedding for the first chunk,
// knowledge_chunks for the others) or their failure, asks for re-embeds,
// and reads the reconciler's stale list and the backlog; every write is
// conditional on the job's generation. Its statements see every org (the
// worker serves all of them) and it holds no cache.
//
// The cut (ChunkOptions, Chunks, ChunkText, EmbedEntries) is here because
// the worker embeds with it; the MCP server's store cuts a new entry's
// text alike (a one-chunk text's vector is written as the entry's own), so
// it uses this package too. Where a body is cut is internal/chunk's; the
// options for a model and the embedding of entries in chunks are
// internal/chunkembed's, which a model switch's backfill (maintenance, a
// capability beside this one) uses as well.
//
// It sits at the bottom of the capabilities (domain, internal/data,
// internal/chunk, internal/vecspace and embed below it) so that package
// jobs, the worker, ctl and the facade can all use it; they reach it
// through the facade's re-exports (knowledge.Outbox, knowledge.NewOutbox,
// knowledge.ChunkOptions...).
package outbox
