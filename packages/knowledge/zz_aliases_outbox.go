package knowledge

import "github.com/agentfleet/orchestrator/packages/knowledge/outbox"

// The embeddings pipeline's view of the tables and how it cuts and embeds
// bodies (package outbox), re-exported for the apps and package jobs.
type (
	Outbox            = outbox.Outbox
	PendingEntry      = outbox.PendingEntry
	VectorsWritten    = outbox.VectorsWritten
	Backlog           = outbox.Backlog
	ChunkOptions      = outbox.ChunkOptions
	ChunkOverlapError = outbox.ChunkOverlapError
	Span              = outbox.Span
	EntryText         = outbox.EntryText
	EntryVectors      = outbox.EntryVectors
)

// Limits and defaults of the cut (package outbox).
const (
	MaxEmbeddingErrorChars = outbox.MaxEmbeddingErrorChars
	DefaultChunkChars      = outbox.DefaultChunkChars
	DefaultMaxInputChars   = outbox.DefaultMaxInputChars
	MinChunkChars          = outbox.MinChunkChars
	MaxChunkChars          = outbox.MaxChunkChars
	MaxChunks              = outbox.MaxChunks
)

// The outbox's constructor and the cut (package outbox).
var (
	NewOutbox       = outbox.NewOutbox
	ChunkOptionsFor = outbox.ChunkOptionsFor
	ChunkSettings   = outbox.ChunkSettings
	ChunkText       = outbox.ChunkText
	Chunks          = outbox.Chunks
	EmbedEntries    = outbox.EmbedEntries
)
