package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
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
//     its shape (search/sql/search_candidates.sql), but the other statements of the
//     module, and any operator's query, still plan from them.
//
// It also gives a large org an HNSW index of its own (see below), and does
// that first (UpkeepVectorIndexes): after a bulk load, the vector list of a
// large org without one walks the shared index filtering by org, which
// costs more than every other part of a search on unvacuumed tables
// (docs/benchmarks.md, "Why search is built so"), and the index is built
// from the heap whatever its visibility map says.
//
// Upkeep then reads each table's change counters (pg_stat, shared with
// autovacuum, so work autovacuum already did is not repeated) and runs
// VACUUM (ANALYZE) or ANALYZE on the tables past their threshold, smallest
// first (sqlc.TableActivity; on a Citus cluster each shard's, on its
// worker: cluster.Cluster.UpkeepParts). The worker calls it periodically
// (jobs.Worker), and at once after an indexer pass that indexed a bulk
// load; it is cheap when nothing is due.

// upkeepTables are the tables of the module that search reads.
var upkeepTables = []string{
	"knowledge", "knowledge_postings", "knowledge_term_stats", "knowledge_search_stats", "knowledge_index_queue",
	// Its rows are deleted as the org counters fold them (stats.go).
	"knowledge_count_deltas",
	// A metadata filter's matches (db/migrations/00041), read by
	// index-only scans.
	"knowledge_metadata_pairs",
	// The duplicate check's keys (00042): erasures leave dead rows its
	// GIN look-up would visit.
	"knowledge_similar_keys",
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

// upkeepBasePages is the growth, in pages (8 kB), past which a table is
// vacuumed whatever its change counters say (see unseen).
const upkeepBasePages = 128

// unseen says whether a table holds what no VACUUM or ANALYZE has seen,
// judged from the catalog alone: never analyzed yet not empty, grown past
// UpkeepScale of its size at the last look (plus upkeepBasePages), or with
// more than UpkeepScale of its pages (plus upkeepBasePages) not all-visible
// at the last look (a CREATE INDEX on a table nobody vacuumed: it records
// the table's size, so growth alone no longer tells). The change counters
// miss exactly these cases: they start at zero after a crash, a restore
// (pg_restore, a new replica promoted) or pg_stat_reset, while the table
// may hold a bulk load nobody vacuumed, the state search is slowest in.
func unseen(r sqlc.TableActivityRow) bool {
	if r.Pages == 0 {
		return false
	}
	if r.NeverAnalyzed {
		return true
	}
	if float64(r.AllVisibleSeen) < float64(r.PagesSeen)*(1-UpkeepScale)-upkeepBasePages {
		return true
	}
	return float64(r.Pages) > float64(r.PagesSeen)*(1+UpkeepScale)+upkeepBasePages
}

// UpkeepReport says what one Upkeep pass did. Vacuumed and Analyzed name
// tables on a single node and shards (knowledge_102008) on a Citus
// cluster (cluster.Cluster.UpkeepParts).
type UpkeepReport struct {
	Vacuumed []string `json:"vacuumed"`
	Analyzed []string `json:"analyzed"`
	// Built and Dropped name per-org vector indexes (see below).
	Built   []string `json:"built,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
	// Skipped names the shards (on a Citus cluster) whose worker did not
	// answer: their upkeep waits for a later pass.
	Skipped []string `json:"skipped,omitempty"`
	// SimilarKeys counts entries given their duplicate-check keys
	// (similar.go: entries stored before migration 00009, or loaded around
	// the product).
	SimilarKeys int `json:"similarKeys,omitempty"`
}

// Upkeep runs the maintenance that is due (see above) and reports it. A
// statement is cancelled when ctx ends; what it did by then is kept.
func (m *Maintenance) Upkeep(ctx context.Context) (_ UpkeepReport, err error) {
	defer data.WrapOp(&err, "knowledge.Upkeep")
	var rep UpkeepReport
	// The statistics' counters first (stats.go): cheap, and it keeps
	// their deltas short whatever else the pass does.
	if _, err := CompactCounts(ctx, m.data, 0); err != nil {
		return rep, fmt.Errorf("upkeep of the org counters: %w", err)
	}
	// What the tables need is read before the vector indexes are built:
	// CREATE INDEX writes the table's row and page counts to the catalog,
	// which would hide a never-analyzed, unvacuumed table from unseen.
	parts, err := m.cluster.UpkeepParts(ctx, upkeepTables)
	if err != nil {
		return rep, err
	}
	// Then the vector indexes (see above).
	if err := m.orgVectorIndex(ctx, &rep); err != nil {
		return rep, err
	}
	for _, p := range parts {
		if p.Unreachable != "" {
			rep.Skipped = append(rep.Skipped, p.Name)
			m.log.Warn("upkeep: a shard's worker did not answer; its upkeep waits for a later pass",
				"shard", p.Name, "err", p.Unreachable)
			continue
		}
		vacuum, analyze := upkeepDue(p.Figures)
		if !vacuum && !analyze {
			continue
		}
		if err := m.cluster.UpkeepRun(ctx, p, vacuum); err != nil {
			return rep, fmt.Errorf("upkeep of %s: %w", p.Name, err)
		}
		// Reported once done, so a failed statement is not counted as run.
		if vacuum {
			rep.Vacuumed = append(rep.Vacuumed, p.Name)
		}
		rep.Analyzed = append(rep.Analyzed, p.Name)
	}
	// Last, the duplicate-check keys of entries that have none (stored
	// before migration 00009, or loaded around the product; Store and
	// Import write them). Each is a rewrite of the entry's row, which
	// every index of the table takes again, the HNSW indexes included:
	// 50,000 of them left as many dead rows at a million rows and grew the
	// table's indexes by 480 MB (docs/benchmarks.md, "Upkeep after a bulk
	// load"). After the vacuums, so a bulk load's tables
	// are vacuumed without waiting for them; the rows they rewrite are
	// vacuumed by a later pass.
	n, err := m.backfillSimilarKeys(ctx)
	rep.SimilarKeys = n
	if err != nil {
		return rep, fmt.Errorf("upkeep: duplicate-check keys: %w", data.MapErr(err, ""))
	}
	return rep, nil
}

// UpkeepVectorIndexes is the first step of Upkeep alone: the configured
// space's HNSW indexes when they are missing or invalid, else at most one
// large org's own (see below). Upkeep runs it; it is exported for a caller
// that wants an org's vector index without waiting for the vacuums (the
// benchmarks measure search in that state).
func (m *Maintenance) UpkeepVectorIndexes(ctx context.Context) (_ UpkeepReport, err error) {
	defer data.WrapOp(&err, "knowledge.UpkeepVectorIndexes")
	var rep UpkeepReport
	err = m.orgVectorIndex(ctx, &rep)
	return rep, err
}

// Per-org vector indexes. The HNSW index of the configured space
// (vectorspace.go) serves every org, filtering by org while it walks: to
// keep 40 hits of an org holding 10% of the table it visits ~550 entries
// (12 ms at 1M entries), and the visits grow as the org's share shrinks.
// pgvector's answer for tenants is a partial index per large tenant (and
// without one, an org too small a share of the table for the shared index
// scans all its vectors, ~1.3 us each): an org past OrgVectorIndexMinDocs
// entries that is at most OrgVectorIndexMaxShare of the table gets an HNSW
// index of its own (vecspace.Space.OrgIndexName, the space's index with
// org_id = the org added to its predicate), built CONCURRENTLY so stores and
// searches go on, one per Upkeep pass, largest org first. The vector
// function plans each call with the org's id as a constant, so the planner
// picks it (db/migrations/00008_embedding_width.sql). An org that is most of
// the table gains nothing from one: the space's index is nearly its own.
// Before any of them, a pass makes sure the space's own index is there
// (EnsureVectorIndex).
const (
	OrgVectorIndexMinDocs  = 5000
	OrgVectorIndexMaxShare = 0.5
)

// orgVectorIndex builds (or, after a failed build, drops) at most one
// per-org HNSW index, and reports what it did.
func (m *Maintenance) orgVectorIndex(ctx context.Context, rep *UpkeepReport) error {
	sp := vecspace.Of(m.emb)
	built, err := m.ensureVectorIndexes(ctx)
	if err != nil {
		return err
	}
	if len(built) > 0 {
		rep.Built = append(rep.Built, built...)
		return nil // the space's indexes alone in a pass: a pass stays bounded
	}
	have, err := m.q.IndexesNamed(ctx, vecspace.OrgIndexesPrefix)
	if err != nil {
		return data.MapErr(err, "")
	}
	valid := map[string]bool{}
	for _, ix := range have {
		if !ix.Valid {
			// A concurrent build that failed or was cancelled leaves an
			// invalid index that writes still maintain: drop it; the next
			// pass builds it again.
			if err := dropIndex(ctx, m.data.Scoped(), ix.Name); err != nil {
				return fmt.Errorf("drop invalid %s: %w", ix.Name, err)
			}
			rep.Dropped = append(rep.Dropped, ix.Name)
			continue
		}
		valid[ix.Name] = true
	}
	orgs, err := m.q.OrgsForVectorIndex(ctx, sqlc.OrgsForVectorIndexParams{
		MinDocs: int64(m.cfg.OrgVectorIndexMinDocs), MaxShare: OrgVectorIndexMaxShare,
	})
	if err != nil {
		return data.MapErr(err, "")
	}
	for _, o := range orgs {
		name := sp.OrgIndexName(o.OrgID)
		if valid[name] {
			continue
		}
		// The org's indexed entries stand for the index's elements (those
		// with a vector of the space): a count would read the org's rows.
		built, err := m.buildVectorIndex(ctx, name, sp.IndexDDL(name, &o.OrgID), sp,
			func(context.Context, *sqlc.Queries) (int64, error) { return o.Docs, nil })
		if err != nil {
			return err
		}
		if built {
			rep.Built = append(rep.Built, name)
		}
		return nil // one build a pass: a pass stays bounded
	}
	return m.pairVectorIndexes(ctx, sp, rep)
}

// Per-pair vector indexes. A search filtered by a metadata pair walks the
// org's HNSW index (or the space's) testing the filter on each entry it
// meets: for a pair on one entry in ten the walk is ten times as long and
// reads and rejects a heap row for nine entries in ten (the vector list
// 2.6x its unfiltered time at 100,000 entries), and ranking the pair's
// matches by key instead costs a row each (so only up to FilterMatchMax).
// So a pair the org's searches filtered by within PairSearchedWithin
// (knowledge_search_stats.searched_pairs, which the searches record),
// carried by PairVectorIndexMinDocs entries or more of an org of
// OrgVectorIndexMinDocs or more, but by at most PairVectorIndexMaxShare of
// it (a filter passing most of the org rejects few entries as it walks),
// gets an HNSW index of the org's heads of the space that carry it
// (vecspace.Space.PairIndexDDL); the vector list walks it instead
// (db/migrations/00050_pair_vector_indexes.sql). At most
// PairVectorIndexesPerOrg an org, its largest pairs first, one build a
// pass. Each costs its entries' vector writes a second HNSW insert, so an
// index whose pair is no longer searched, has fallen under half the
// minimum, grown past twice the share or out of the org's first
// 2 x PairVectorIndexesPerOrg is dropped
// (the margins keep a pair near a bound from being built and dropped in
// turn), as is a failed build's. No index of an org with entries waiting
// for the indexer is dropped (a later pass may): the org's size is its
// entries indexed, which a rebuild of its index counts again from 0 (a
// pass then took it for a small org and dropped them all).
const (
	PairVectorIndexMinDocs  = 1000
	PairVectorIndexMaxShare = 0.25
	PairVectorIndexesPerOrg = 8
	PairSearchedWithin      = 7 * 24 * time.Hour
)

// pairVectorIndexes builds at most one pair's vector index, after dropping
// the indexes no pair wants any more, and reports what it did.
func (m *Maintenance) pairVectorIndexes(ctx context.Context, sp vecspace.Space, rep *UpkeepReport) error {
	minDocs := int64(m.cfg.PairVectorIndexMinDocs)
	pairs, err := m.q.PairsForVectorIndex(ctx, sqlc.PairsForVectorIndexParams{
		Prefix: sp.PairIndexPrefix(), MinDocs: int64(m.cfg.OrgVectorIndexMinDocs), MinPair: minDocs / 2,
		SearchedSince: m.now().Add(-PairSearchedWithin).Unix(),
	})
	if err != nil {
		return data.MapErr(err, "")
	}
	keep := map[string]bool{}
	var want []sqlc.PairsForVectorIndexRow
	kept, wanted := map[uuid.UUID]int{}, map[uuid.UUID]int{} // an org's pairs so far (largest first)
	for _, p := range pairs {
		if p.Indexing {
			// The org's size is its entries indexed, which a rebuild of
			// its index (ctl search language) counts again from 0: while
			// entries wait for the indexer its indexes are not dropped
			// (one is built only if the org's size allows it, below: not
			// while a rebuild's count is low).
			keep[p.Name] = true
		}
		if p.OrgDocs < int64(m.cfg.OrgVectorIndexMinDocs) {
			continue
		}
		share := float64(p.Docs) / float64(max(p.OrgDocs, 1))
		if share <= 2*PairVectorIndexMaxShare && kept[p.OrgID] < 2*PairVectorIndexesPerOrg {
			kept[p.OrgID]++
			keep[p.Name] = true
		}
		if p.Docs >= minDocs && share <= PairVectorIndexMaxShare && wanted[p.OrgID] < PairVectorIndexesPerOrg {
			wanted[p.OrgID]++
			want = append(want, p)
		}
	}
	have, err := m.q.IndexesNamed(ctx, sp.PairIndexPrefix())
	if err != nil {
		return data.MapErr(err, "")
	}
	valid := map[string]bool{}
	for _, ix := range have {
		if ix.Valid && keep[ix.Name] {
			valid[ix.Name] = true
			continue
		}
		if err := dropIndex(ctx, m.data.Scoped(), ix.Name); err != nil {
			return fmt.Errorf("drop %s: %w", ix.Name, err)
		}
		rep.Dropped = append(rep.Dropped, ix.Name)
	}
	for _, p := range want {
		if valid[p.Name] {
			continue
		}
		built, err := m.buildVectorIndex(ctx, p.Name, sp.PairIndexDDL(p.Name, p.OrgID, p.Pair), sp,
			func(context.Context, *sqlc.Queries) (int64, error) { return p.Docs, nil })
		if err != nil {
			return err
		}
		if built {
			rep.Built = append(rep.Built, p.Name)
		}
		return nil // one build a pass: a pass stays bounded
	}
	return nil
}

// upkeepDue is Upkeep's rule for one part (a table, or a shard on a Citus
// cluster: cluster.UpkeepPart): vacuum (with analyze) when the rows
// inserted or dead since its last vacuum pass the threshold or the catalog
// shows what no vacuum saw (unseen); analyze alone when the rows changed
// since its last analyze pass it, or it holds rows and was never analyzed.
func upkeepDue(r sqlc.TableActivityRow) (vacuum, analyze bool) {
	due := func(changed int64) bool {
		return float64(changed) > UpkeepBaseRows+UpkeepScale*float64(r.Live)
	}
	vacuum = due(r.InsSinceVacuum+r.Dead) || unseen(r)
	analyze = vacuum || due(r.ModSinceAnalyze) || (!r.Analyzed && r.Live > 0)
	return vacuum, analyze
}
