package cluster

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Upkeep decides and acts per part of a table: the table itself on a
// single node, each of its shards on a Citus cluster. On a coordinator a
// distributed table is an empty shell whose catalog figures and change
// counters stay at zero whatever its shards hold, so the decisions read
// there would never vacuum a thing, and a VACUUM of the distributed table
// would run on every shard of every worker, however few are due. So on a
// cluster Upkeep reads each shard's figures on its worker (sqlc
// ShardActivity, migration 00035), applies the same rules to each shard
// (a shard is a table of the worker's: its thresholds scale with its own
// rows), and vacuums or analyzes only the shards that are due, on their
// worker (sqlc ShardUpkeep). A big org isolated in a shard of its own
// (`ctl isolate-org`) is thereby kept up on its own, like a table.

// UpkeepPart is one table (single node) or one shard (cluster) and the
// figures Upkeep decides from.
type UpkeepPart struct {
	Name    string // the table's, or the shard's (knowledge_102008)
	ShardID int64  // 0 on a single node
	Figures sqlc.TableActivityRow
	// Unreachable is the error of a shard whose worker did not answer.
	Unreachable string
}

// UpkeepParts reads the figures of tables' parts, smallest first.
func (c *Cluster) UpkeepParts(ctx context.Context, tables []string) ([]UpkeepPart, error) {
	citus, err := c.data.Citus(ctx)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if !citus {
		rows, err := c.data.Q().TableActivity(ctx, tables)
		if err != nil {
			return nil, data.MapErr(err, "")
		}
		parts := make([]UpkeepPart, len(rows))
		for i, r := range rows {
			parts[i] = UpkeepPart{Name: r.Name, Figures: r}
		}
		return parts, nil
	}
	rows, err := c.data.Q().ShardActivity(ctx, tables)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	parts := make([]UpkeepPart, len(rows))
	for i, r := range rows {
		parts[i] = UpkeepPart{Name: r.Shard, ShardID: r.ShardID, Figures: sqlc.TableActivityRow{
			Name: r.Shard, Live: r.Live, Dead: r.Dead, ModSinceAnalyze: r.ModSinceAnalyze,
			InsSinceVacuum: r.InsSinceVacuum, Analyzed: r.Analyzed, NeverAnalyzed: r.NeverAnalyzed,
			PagesSeen: r.PagesSeen, AllVisibleSeen: r.AllVisibleSeen, Pages: r.Pages,
		}}
		if !r.Ok {
			parts[i].Unreachable = r.Error
		}
	}
	return parts, nil
}

// UpkeepRun vacuums (and analyzes) or analyzes one part.
func (c *Cluster) UpkeepRun(ctx context.Context, p UpkeepPart, vacuum bool) error {
	if p.ShardID != 0 {
		_, err := c.data.Q().ShardUpkeep(ctx, sqlc.ShardUpkeepParams{ShardID: p.ShardID, Vacuum: vacuum})
		return err
	}
	stmt := "ANALYZE "
	if vacuum {
		stmt = "VACUUM (ANALYZE) "
	}
	// Not through sqlc: VACUUM and ANALYZE take a table name, not a
	// parameter, and VACUUM cannot run inside a transaction. The names
	// come from the caller's table list (UpkeepParts), quoted all the same.
	_, err := c.data.Scoped().Exec(ctx, stmt+pgx.Identifier{p.Name}.Sanitize())
	return err
}
