package knowledgeenv

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// EnvAllowModelChange lets the MCP server and the worker start although
// no stored vector is of the configured space (CheckEmbeddingSpace).
const EnvAllowModelChange = "EMBEDDINGS_ALLOW_MODEL_CHANGE"

// AllowModelChange reads EMBEDDINGS_ALLOW_MODEL_CHANGE (default false).
func AllowModelChange(e *appenv.Env) bool { return e.Bool(EnvAllowModelChange, false) }

// CheckModelSwitch is knowledge.CheckModelSwitch naming the next model's
// variable.
func CheckModelSwitch(current, next embed.Embedder) error {
	if err := knowledge.CheckModelSwitch(current, next); err != nil {
		return fmt.Errorf("%s=%s: %w", EnvNextModel, next.Model(), err)
	}
	return nil
}

// CheckEmbeddingSpace is knowledge.CheckEmbeddingSpace with its refusal
// worded for an operator: the setting that differs from what is stored,
// and the two ways out.
func CheckEmbeddingSpace(ctx context.Context, pool *pgxpool.Pool, e embed.Embedder, allowChange bool) ([]knowledge.StoredSpace, error) {
	others, err := knowledge.CheckEmbeddingSpace(ctx, pool, e, allowChange)
	var m *knowledge.SpaceMismatchError
	if !errors.As(err, &m) {
		return others, err
	}
	setting := EnvModel + "=" + m.Want.Model
	if m.SameModel() {
		setting = fmt.Sprintf("%s=%d", EnvDimensions, m.Want.Dims)
	}
	return others, fmt.Errorf("%s: %w. Set %s and %s to what is stored, or, to change models, set %s=true and run `ctl reembed --org ORG --all` for every org (docs/embeddings.md)",
		setting, err, EnvModel, EnvDimensions, EnvAllowModelChange)
}
