package knowledgeenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// Search, chunking and index-build variables (docs/operators.md,
// docs/embeddings.md).
const (
	// EnvTextSearchConfig is the deployment's text search configuration
	// (knowledge.Config.TextSearchConfig): the MCP server's and the
	// worker's must be the same.
	EnvTextSearchConfig = "SEARCH_TEXT_CONFIG"
	// EnvCosineFloor and EnvCosineFull are an operator's calibration of
	// the model (knowledge.Config.VectorCalibration): both or neither.
	EnvCosineFloor = "SEARCH_COSINE_FLOOR"
	EnvCosineFull  = "SEARCH_COSINE_FULL"
	// EnvQueryEmbedBudget is knowledge.Config.QueryEmbedBudget.
	EnvQueryEmbedBudget = "SEARCH_EMBED_BUDGET"
	// EnvChunkChars and EnvChunkOverlap are the cut of bodies into chunks
	// (knowledge.ChunkOptions); unset, the model's defaults.
	EnvChunkChars   = "EMBEDDINGS_CHUNK_CHARS"
	EnvChunkOverlap = "EMBEDDINGS_CHUNK_OVERLAP"
	// EnvVectorIndexMemory is knowledge.MaintenanceConfig.VectorIndexMemory, in MB
	// (the worker's).
	EnvVectorIndexMemory = "WORKER_VECTOR_INDEX_MEMORY_MB"
)

// TextSearchConfig reads SEARCH_TEXT_CONFIG (default
// knowledge.DefaultTextSearchConfig); CheckTextSearchConfig checks it
// against the database once it answers.
func TextSearchConfig(e *appenv.Env) string {
	return e.String(EnvTextSearchConfig, knowledge.DefaultTextSearchConfig)
}

// CheckTextSearchConfig is knowledge.CheckTextSearchConfig naming the
// variable: a misspelt configuration stops the app at start.
func CheckTextSearchConfig(ctx context.Context, pool *pgxpool.Pool, name string) error {
	if err := knowledge.CheckTextSearchConfig(ctx, pool, name); err != nil {
		return fmt.Errorf("%s=%q: %w", EnvTextSearchConfig, name, err)
	}
	return nil
}

// VectorCalibration reads SEARCH_COSINE_FLOOR and SEARCH_COSINE_FULL:
// nil when neither is set (then knowledge.CalibrationFor the model).
// Measure a model's floor as the best cosine nonsense queries reach in a
// real org (apps/eval prints it), and full as a close paraphrase's.
func VectorCalibration(e *appenv.Env) *knowledge.VectorCalibration {
	floor, full := e.String(EnvCosineFloor, ""), e.String(EnvCosineFull, "")
	if floor == "" && full == "" {
		return nil
	}
	var c knowledge.VectorCalibration
	var err error
	if c.Floor, err = strconv.ParseFloat(floor, 64); err != nil || c.Floor < -1 || c.Floor >= 1 {
		e.Fail(EnvCosineFloor, "must be a cosine in [-1, 1), set together with "+EnvCosineFull)
		return nil
	}
	if c.Full, err = strconv.ParseFloat(full, 64); err != nil || c.Full <= c.Floor || c.Full > 1 {
		e.Fail(EnvCosineFull, "must be a cosine above "+EnvCosineFloor+" and at most 1")
		return nil
	}
	return &c
}

// QueryEmbedBudget reads SEARCH_EMBED_BUDGET; 0 when unset, which the
// knowledge service takes as knowledge.DefaultQueryEmbedBudget.
func QueryEmbedBudget(e *appenv.Env) time.Duration {
	return e.Duration(EnvQueryEmbedBudget, 0, 10*time.Millisecond, time.Minute)
}

// Chunk reads EMBEDDINGS_CHUNK_CHARS and EMBEDDINGS_CHUNK_OVERLAP and
// completes them with the defaults of the model c embeds with
// (knowledge.ChunkSettings): the MCP server's duplicate check and the
// worker must cut bodies alike.
func Chunk(e *appenv.Env, c embed.Config) knowledge.ChunkOptions {
	o := knowledge.ChunkOptions{
		Chars:   e.Int(EnvChunkChars, 0, knowledge.MinChunkChars, knowledge.MaxChunkChars),
		Overlap: e.Int(EnvChunkOverlap, -1, 0, knowledge.MaxChunkChars/2),
	}
	o, err := knowledge.ChunkSettings(c.ModelName(), o)
	var oe *knowledge.ChunkOverlapError
	if errors.As(err, &oe) {
		e.Fail(EnvChunkOverlap, fmt.Sprintf("must be less than half of the chunk size (%s=%d)", EnvChunkChars, oe.Chars))
	} else {
		e.Add(err)
	}
	return o
}

// VectorIndexMemory reads WORKER_VECTOR_INDEX_MEMORY_MB (default
// knowledge.DefaultVectorIndexMemory), in bytes.
func VectorIndexMemory(e *appenv.Env) int64 {
	return int64(e.Int(EnvVectorIndexMemory, knowledge.DefaultVectorIndexMemory>>20, 64, 1<<20)) << 20
}
