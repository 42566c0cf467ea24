package maintenance

import (
	"context"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/google/uuid"
)

// similarBackfillBatch and similarBackfillMax: Upkeep gives entries
// without keys (stored before migration 00009; an import writes them) theirs, this
// many per statement, at most this many per pass.
const (
	similarBackfillBatch = 1000
	similarBackfillMax   = 50000
)

// backfillSimilarKeys fills in the keys of entries that have none, and
// returns how many it did.
func (m *Maintenance) backfillSimilarKeys(ctx context.Context) (int, error) {
	done := 0
	for done < similarBackfillMax {
		q := sqlc.New(pgbatch.New(m.data.Scoped()))
		if err := q.ListConfig(ctx, false); err != nil { // no sort, no scan: the partial index in order
			return done, err
		}
		rows, err := q.SimilarKeysMissing(ctx, similarBackfillBatch)
		if err != nil || len(rows) == 0 {
			return done, err
		}
		n, err := m.setSimilarKeys(ctx, rows)
		done += n
		if err != nil {
			return done, err
		}
		if n < len(rows) {
			// Rows another transaction holds were skipped (or are gone):
			// the next pass comes back to them.
			return done, nil
		}
	}
	return done, nil
}

// setSimilarKeys writes the keys of rows (in (org, id) order) and returns
// how many it wrote: in one statement on a single node, one per org on a
// Citus cluster (each routed to the org's shard: a row lock may not span
// shards).
func (m *Maintenance) setSimilarKeys(ctx context.Context, rows []sqlc.SimilarKeysMissingRow) (int, error) {
	groups, err := m.data.Runs(ctx, len(rows), func(i int) uuid.UUID { return rows[i].OrgID })
	if err != nil {
		return 0, err
	}
	done := 0
	for _, g := range groups {
		p := sqlc.SetSimilarKeysParams{}
		for _, r := range data.Pick(rows, g) {
			p.OrgIds = append(p.OrgIds, r.OrgID)
			p.Ids = append(p.Ids, r.ID)
			p.Keys = append(p.Keys, simkeys.KeysLiteral(simkeys.WordsOf(r.OrgID, r.Title, r.Body).Keys))
		}
		w, err := m.q.SetSimilarKeys(ctx, p)
		done += int(w)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
