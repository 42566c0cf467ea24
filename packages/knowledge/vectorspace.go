package knowledge

import (
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
)

// VectorSpace is a vector's space: its model and width. Each space has
// HNSW indexes of its own (internal/vecspace says how they are named and
// built).
type VectorSpace = vecspace.Space

// SpaceOf is the space of the vectors an embedder makes.
func SpaceOf(e embed.Embedder) VectorSpace { return vecspace.Of(e) }

// StoredSpace is a space some stored vectors are of (maintenance owns the
// start-up check of the configured space against them).
type StoredSpace = maintenance.StoredSpace

// ErrSpacesUnread is CheckEmbeddingSpace's error when some shard did not
// answer in time (maintenance.ErrSpacesUnread).
var ErrSpacesUnread = maintenance.ErrSpacesUnread

// SpaceMismatchError is CheckEmbeddingSpace's refusal.
type SpaceMismatchError = maintenance.SpaceMismatchError

// CheckEmbeddingSpace compares the configured embedder with the vectors
// stored, at the start of the MCP server and the worker
// (maintenance.CheckEmbeddingSpace).
var CheckEmbeddingSpace = maintenance.CheckEmbeddingSpace
