package maintenance

import (
	_ "embed"

	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rank"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// The lexical index is written out of band, in batches. Store queues an
// entry (one small row in the store's own statement); the indexer moves
// queued entries into knowledge_postings and the org's statistics. Why not
// in the store transaction: ~100 postings and ~100 document-frequency
// upserts per entry halved store throughput (docs/knowledge.md); in a batch
// a common term's frequency is updated once for hundreds of entries.
//
// Search never waits for the indexer: queued entries are scored on the fly
// (the "tail" of search/sql/search_candidates.sql, bounded by TailEntries), so an entry is
// found as soon as it is stored, and a stopped indexer makes search slower,
// never blind.

// IndexBatchSize is how many entries one IndexPending call of IndexAll moves.
const IndexBatchSize = 500

//go:embed sql/index_batch.sql
var indexBatchSQL string

// indexBatchPositional is indexBatchSQL with positional parameters, for
// knowledge_index_org's EXECUTE ... USING org, max, k1, b (a cluster).
var indexBatchPositional = strings.NewReplacer("@org_id", "$1", "@max", "$2", "@k1", "$3", "@b", "$4").Replace(indexBatchSQL)

// IndexPending moves up to max queued entries of org into the org's
// inverted index and term statistics, and returns how many it moved.
//
// One transaction: the org's statistics row is locked first (made on first
// use with the deployment's text search configuration), so indexers of one
// org take turns and the statistics always equal the index; other orgs
// never wait. The queue rows are taken FOR UPDATE SKIP LOCKED and deleted in
// the same statement that writes the postings, so an entry is indexed
// exactly once even with several workers, and a crash loses nothing (the
// transaction rolls back, the rows stay queued).
func (m *Maintenance) IndexPending(ctx context.Context, org uuid.UUID, max int) (_ int, err error) {
	defer data.WrapOp(&err, "knowledge.IndexPending")
	unscoped := ctx
	ctx = data.AsOrg(ctx, org) // a pass acts for one org after another
	if max <= 0 {
		max = IndexBatchSize
	}
	// On a Citus cluster the batch runs on the org's worker, as one call
	// (cluster.Cluster.IndexOrg), sent without the org in the context.
	n, delegated, err := m.cluster.IndexOrg(unscoped, org, indexBatchPositional, max, rank.BM25K1, rank.BM25B, m.tsc)
	if err != nil || delegated {
		return n, err
	}
	err = pgx.BeginFunc(ctx, m.data.Scoped(), func(tx pgx.Tx) error {
		if _, err := sqlc.New(tx).LockSearchStats(ctx, sqlc.LockSearchStatsParams{
			OrgID: org, DefaultConfig: m.tsc,
		}); err != nil {
			return err
		}
		return tx.QueryRow(ctx, indexBatchSQL, pgx.NamedArgs{
			"org_id": org, "max": max, "k1": rank.BM25K1, "b": rank.BM25B,
		}).Scan(&n)
	})
	if err != nil {
		return 0, data.MapErr(err, "")
	}
	return n, nil
}

// IndexAll indexes every entry queued when it starts, of every org, batch
// by batch (or until ctx ends), and returns how many it indexed. The worker
// runs it in a loop; tools (apps/eval) call it after a bulk load.
//
// It reads the orgs with queued entries again only while a round left
// some: an org's batch came back full, or the list of orgs was cut at its
// limit. A round of short batches took every row queued before it (but
// rows another indexer holds, which it finishes), and entries stored while
// it ran wait for the next call. Looping until a read found none chased a
// steady flow of stores instead: on a cluster each read is a statement
// across every shard, and a busy worker sent three or four a pass
// (docs/benchmarks.md, "Cluster").
//
// An org whose batch fails is skipped for the rest of the call, and the
// other orgs are still indexed: one org's trouble (a row it cannot analyse,
// a lock held too long) must not stall every org's index. The errors are
// returned together at the end.
func (m *Maintenance) IndexAll(ctx context.Context) (_ int, err error) {
	defer data.WrapOp(&err, "knowledge.IndexAll")
	total := 0
	failed := map[uuid.UUID]error{}
	// Indexed since the indexer's tables were last vacuumed (see
	// vacuumIndexerTables).
	unvacuumed := 0
	for {
		if unvacuumed >= IndexVacuumEvery {
			m.vacuumIndexerTables(ctx, false)
			unvacuumed = 0
		}
		limit := 100 + len(failed)
		orgs, err := m.q.OrgsWithQueuedEntries(ctx, int32(limit))
		if err != nil {
			return total, errors.Join(data.MapErr(err, ""), joinOrgErrors(failed))
		}
		moved, more := 0, len(orgs) >= limit
		for _, org := range orgs {
			if failed[org] != nil {
				continue
			}
			n, err := m.IndexPending(ctx, org, IndexBatchSize)
			if err != nil {
				if ctx.Err() != nil {
					return total + moved, errors.Join(err, joinOrgErrors(failed))
				}
				failed[org] = err
				continue
			}
			moved += n
			more = more || n >= IndexBatchSize
		}
		total += moved
		unvacuumed += moved
		// Done: every org's batch was short (nothing was left of what was
		// queued, but rows of a failed org or locked by another indexer,
		// which will finish them) and no org was left out of the list.
		if moved == 0 || !more {
			if unvacuumed >= UpkeepBaseRows {
				m.vacuumIndexerTables(ctx, true)
			}
			return total, joinOrgErrors(failed)
		}
	}
}

// IndexVacuumEvery is how many entries IndexAll indexes between two
// vacuums of the tables it writes (vacuumIndexerTables).
const IndexVacuumEvery = 20000

// vacuumIndexerTables vacuums the tables search reads by index-only scans
// that a bulk load fills: every IndexVacuumEvery entries one call indexes,
// and at its end when it indexed at least UpkeepBaseRows since the last
// one.
//
//   - knowledge_postings: search reads postings by index-only scans, which
//     visit the heap for every posting on a page the visibility map does
//     not mark all-visible, and only a vacuum marks it. Without this, the
//     postings of a bulk load cost a heap visit each until Upkeep got to
//     them, minutes later at a million entries: a 100k-entry org's search
//     read 1,819 postings with as many heap visits, 24 of its 40 ms
//     (docs/benchmarks.md, "Why search is built so"). The table only grows
//     between purges, so a vacuum reads only the pages written since the
//     last one (5 s for all 44M postings of a million entries at once).
//   - knowledge_index_queue: every indexed entry leaves a dead queue row,
//     and search's read of the org's queued tail walks their index entries
//     (0.8 ms a search for a 100k-entry org until vacuumed).
//   - knowledge_metadata_pairs: written with the entries the indexer then
//     indexes (a trigger, db/migrations/00041), and read, like the
//     postings, by index-only scans: a metadata filter's matches, and the
//     lexical walks' test of each entry they reach (search/filtersearch.go).
//     Unvacuumed, each of those reads visits a heap page too.
//
// Between batches (last false) the vacuum is SKIP_LOCKED: another
// vacuum of the table in progress (Upkeep's, another indexer's) is nearly
// as good, and indexing should not wait behind it. The vacuum at the end
// of the pass (last true) waits for the lock, within ctx's deadline (the
// worker's indexer pass has one): only a vacuum that starts after the last
// batch committed can mark that batch's pages all-visible, and a
// concurrent one may have started before. (It still cannot mark pages a
// snapshot older than that commit may not see, if one is open then; the
// Upkeep's all-visible rule catches a table left far behind.) A failure is
// logged and left to Upkeep: indexing has succeeded either way.
func (m *Maintenance) vacuumIndexerTables(ctx context.Context, last bool) {
	if ctx.Err() != nil {
		return
	}
	stmt := "VACUUM (SKIP_LOCKED) knowledge_postings, knowledge_index_queue, knowledge_metadata_pairs"
	if last {
		stmt = "VACUUM knowledge_postings, knowledge_index_queue, knowledge_metadata_pairs"
	}
	// Not through sqlc: VACUUM is not a query, and cannot run in a
	// transaction block.
	if _, err := m.data.Scoped().Exec(ctx, stmt); err != nil && ctx.Err() == nil {
		m.log.Warn("knowledge: vacuum of the index tables after indexing failed; Upkeep will do it", "err", err)
	}
}

func joinOrgErrors(failed map[uuid.UUID]error) error {
	var errs []error
	for org, err := range failed {
		errs = append(errs, fmt.Errorf("indexing org %s: %w", org, err))
	}
	return errors.Join(errs...)
}
