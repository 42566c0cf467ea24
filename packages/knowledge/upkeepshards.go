package knowledge

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/db"
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

// upkeepPart is one table (single node) or one shard (cluster) and the
// figures Upkeep decides from.
type upkeepPart struct {
	name    string // the table's, or the shard's (knowledge_102008)
	shardID int64  // 0 on a single node
	figures sqlc.TableActivityRow
	// unreachable is the error of a shard whose worker did not answer.
	unreachable string
}

// upkeepParts reads the figures of upkeepTables' parts, smallest first.
func (m *Maintenance) upkeepParts(ctx context.Context) ([]upkeepPart, error) {
	s := m.s
	citus, err := db.IsCitus(ctx, s.pool.Pool)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if !citus {
		rows, err := s.q.TableActivity(ctx, upkeepTables)
		if err != nil {
			return nil, data.MapErr(err, "")
		}
		parts := make([]upkeepPart, len(rows))
		for i, r := range rows {
			parts[i] = upkeepPart{name: r.Name, figures: r}
		}
		return parts, nil
	}
	rows, err := s.q.ShardActivity(ctx, upkeepTables)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	parts := make([]upkeepPart, len(rows))
	for i, r := range rows {
		parts[i] = upkeepPart{name: r.Shard, shardID: r.ShardID, figures: sqlc.TableActivityRow{
			Name: r.Shard, Live: r.Live, Dead: r.Dead, ModSinceAnalyze: r.ModSinceAnalyze,
			InsSinceVacuum: r.InsSinceVacuum, Analyzed: r.Analyzed, NeverAnalyzed: r.NeverAnalyzed,
			PagesSeen: r.PagesSeen, AllVisibleSeen: r.AllVisibleSeen, Pages: r.Pages,
		}}
		if !r.Ok {
			parts[i].unreachable = r.Error
		}
	}
	return parts, nil
}

// upkeepDue is Upkeep's rule for one part: vacuum (with analyze) when the
// rows inserted or dead since its last vacuum pass the threshold or the
// catalog shows what no vacuum saw (unseen); analyze alone when the rows
// changed since its last analyze pass it, or it holds rows and was never
// analyzed.
func upkeepDue(r sqlc.TableActivityRow) (vacuum, analyze bool) {
	due := func(changed int64) bool {
		return float64(changed) > UpkeepBaseRows+UpkeepScale*float64(r.Live)
	}
	vacuum = due(r.InsSinceVacuum+r.Dead) || unseen(r)
	analyze = vacuum || due(r.ModSinceAnalyze) || (!r.Analyzed && r.Live > 0)
	return vacuum, analyze
}

// upkeepRun vacuums (and analyzes) or analyzes one part.
func (m *Maintenance) upkeepRun(ctx context.Context, p upkeepPart, vacuum bool) error {
	s := m.s
	if p.shardID != 0 {
		_, err := s.q.ShardUpkeep(ctx, sqlc.ShardUpkeepParams{ShardID: p.shardID, Vacuum: vacuum})
		return err
	}
	stmt := "ANALYZE "
	if vacuum {
		stmt = "VACUUM (ANALYZE) "
	}
	// Not through sqlc: VACUUM and ANALYZE take a table name, not a
	// parameter, and VACUUM cannot run inside a transaction. The names
	// come from upkeepTables, quoted all the same.
	_, err := s.pool.Exec(ctx, stmt+pgx.Identifier{p.name}.Sanitize())
	return err
}
