package knowledgeenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
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

// NewEmbedders builds the embedders cur and next configure (next nil: no
// model switch) and checks that they can be configured together.
func NewEmbedders(cur embed.Config, next *embed.Config) (embed.Embedder, embed.Embedder, error) {
	e, err := embed.New(cur)
	if err != nil {
		return nil, nil, fmt.Errorf("embedder: %w", err)
	}
	if next == nil {
		return e, nil, nil
	}
	n, err := embed.New(*next)
	if err != nil {
		return nil, nil, fmt.Errorf("next embedder: %w", err)
	}
	if err := CheckModelSwitch(e, n); err != nil {
		return nil, nil, err
	}
	return e, n, nil
}

// CheckDatabase is the start check of an app of the knowledge module
// against its database, once it answers: the schema is this build's (else
// the command that fixes it, not the first call's raw SQL error), the
// text search configuration exists, and stored vectors are of e's space
// (CheckEmbeddingSpace; other spaces stored beside it, a re-embed under
// way, are logged).
//
// The stored spaces are read from every shard; when some shard does not
// answer within SpaceCheckTimeout (a Citus worker down or hung) the app
// starts anyway, for the orgs of the other workers, and the space check
// runs again every SpaceRecheckEvery until every shard answers. A refusal
// found then arrives on later, for the app to stop as it would have at
// start; later is nil when the check was done at start.
func CheckDatabase(ctx context.Context, pool *pgxpool.Pool, textSearchConfig string, e embed.Embedder, allowChange bool, log *slog.Logger) (later <-chan error, err error) {
	if err := db.CheckSchema(ctx, pool); err != nil {
		return nil, err
	}
	if err := CheckTextSearchConfig(ctx, pool, textSearchConfig); err != nil {
		return nil, err
	}
	err = checkSpaces(ctx, pool, e, allowChange, log)
	if !errors.Is(err, knowledge.ErrSpacesUnread) {
		return nil, err
	}
	log.Warn("starting without the embedding-space check: the stored vectors' models could not be read from every shard; checking again until they are",
		"every", SpaceRecheckEvery.String(), "err", err)
	out := make(chan error, 1)
	go func() {
		t := time.NewTicker(SpaceRecheckEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := checkSpaces(ctx, pool, e, allowChange, log)
			switch {
			case errors.Is(err, knowledge.ErrSpacesUnread):
				log.Warn("embedding-space check: a shard still does not answer", "err", err)
				continue
			case err == nil:
				log.Info("embedding-space check passed: every shard answered")
			case ctx.Err() == nil:
				out <- err
			}
			return
		}
	}()
	return out, nil
}

// SpaceCheckTimeout bounds one read of the stored spaces, and
// SpaceRecheckEvery spaces the reads while some shard does not answer
// (CheckDatabase). Variables for tests.
var SpaceCheckTimeout, SpaceRecheckEvery = 10 * time.Second, 30 * time.Second

// checkSpaces is CheckEmbeddingSpace within SpaceCheckTimeout, the other
// spaces stored logged.
func checkSpaces(ctx context.Context, pool *pgxpool.Pool, e embed.Embedder, allowChange bool, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, SpaceCheckTimeout)
	defer cancel()
	others, err := CheckEmbeddingSpace(cctx, pool, e, allowChange)
	if len(others) > 0 && err == nil {
		log.Warn("vectors of other models or widths are stored; search uses only the configured one's (re-embed with ctl reembed)",
			"model", e.Model(), "dimensions", e.Dimensions(), "other", fmt.Sprint(others))
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // the app is stopping: not a shard's fault
	}
	return err
}
