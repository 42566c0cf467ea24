package knowledge

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Upkeep is the table maintenance search depends on, done by the product
// instead of being left to autovacuum or a DBA. Autovacuum may be off (it is
// on the development machine), and after a bulk load it lags by design (its
// thresholds scale with the table), while search needs, for every table it
// reads:
//
//   - a vacuumed visibility map: the postings are read by index-only scans,
//     which fetch the heap page of every posting not marked all-visible;
//   - dead rows removed: the embeddings worker updates every entry once, and
//     the indexer deletes every queue row;
//   - planner statistics: the plans of the search statement are pinned by
//     its shape (sql/search_candidates.sql), but the other statements of the
//     module, and any operator's query, still plan from them.
//
// Upkeep reads each table's change counters (pg_stat, shared with
// autovacuum, so work autovacuum already did is not repeated) and runs
// VACUUM (ANALYZE) or ANALYZE on the tables past their threshold. The worker
// calls it periodically (jobs.Worker); it is cheap when nothing is due.

// upkeepTables are the tables of the module that search reads.
var upkeepTables = []string{
	"knowledge", "knowledge_postings", "knowledge_term_stats", "knowledge_search_stats", "knowledge_index_queue",
}

// Thresholds of Upkeep: a table is vacuumed when the rows inserted or dead
// since its last vacuum exceed UpkeepBaseRows plus UpkeepScale of its live
// rows, and analyzed on the same rule for rows changed since its last
// analyze (or when it was never analyzed). Autovacuum's defaults are 50 rows
// + 20% (analyze: 10%); ours are tighter because a stale visibility map
// costs every search, and a vacuum of a mostly all-visible table is cheap.
const (
	UpkeepBaseRows = 1000
	UpkeepScale    = 0.05
)

// UpkeepReport says what one Upkeep pass did.
type UpkeepReport struct {
	Vacuumed []string `json:"vacuumed"`
	Analyzed []string `json:"analyzed"`
}

// Upkeep runs the maintenance that is due (see above) and reports it. A
// statement is cancelled when ctx ends; what it did by then is kept.
func (s *Service) Upkeep(ctx context.Context) (UpkeepReport, error) {
	var rep UpkeepReport
	rows, err := s.q.TableActivity(ctx, upkeepTables)
	if err != nil {
		return rep, mapErr(err, "")
	}
	for _, r := range rows {
		due := func(changed int64) bool {
			return float64(changed) > UpkeepBaseRows+UpkeepScale*float64(r.Live)
		}
		vacuum := due(r.InsSinceVacuum + r.Dead)
		if !vacuum && !due(r.ModSinceAnalyze) && (r.Analyzed || r.Live == 0) {
			continue
		}
		stmt := "ANALYZE "
		if vacuum {
			stmt = "VACUUM (ANALYZE) "
		}
		// Not through sqlc: VACUUM and ANALYZE take a table name, not a
		// parameter, and VACUUM cannot run inside a transaction. The names
		// come from upkeepTables, quoted all the same.
		if _, err := s.pool.Exec(ctx, stmt+pgx.Identifier{r.Name}.Sanitize()); err != nil {
			return rep, fmt.Errorf("upkeep of %s: %w", r.Name, err)
		}
		// Reported once done, so a failed statement is not counted as run.
		if vacuum {
			rep.Vacuumed = append(rep.Vacuumed, r.Name)
		}
		rep.Analyzed = append(rep.Analyzed, r.Name)
	}
	return rep, nil
}
