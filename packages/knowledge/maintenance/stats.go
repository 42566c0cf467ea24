package maintenance

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// OrgStats is what an org holds (ctl stats, the knowledge://stats
// resource). Every number is exact, read in one snapshot (a
// repeatable-read transaction), so they add up: Heads + Superseded +
// Expired = Entries, Pending + Ready + Failed = Entries, the ByKind counts
// = Heads. Forgotten entries (tombstones of forget_knowledge) are no
// longer entries and are counted apart. The counts come from counters kept
// by the writes themselves (migrations 00007, 00026, 00037), so the cost
// does not grow with the org's entries: it grows with its distinct tags
// and authors, and with its expiring heads (read through a partial index
// because expiry changes with the clock alone).
type OrgStats struct {
	OrgID      uuid.UUID `json:"orgId"`
	Entries    int64     `json:"entries"`
	Heads      int64     `json:"heads"`      // current: not superseded, not expired
	Superseded int64     `json:"superseded"` // superseded (whatever their expiry)
	Expired    int64     `json:"expired"`    // not superseded, expiry passed
	Forgotten  int64     `json:"forgotten"`  // erased by forget_knowledge (tombstones)
	// ByKind counts the current entries (Heads) by kind, every kind
	// named (Kinds), so they add up to Heads.
	ByKind map[string]int64 `json:"byKind"`
	// Documents counts the org's live documents (store_document: each
	// source's live version, and every document stored without a source),
	// Sections their current sections (what get_knowledge of a document
	// lists). Both are entries too, counted above with the others.
	Documents  int64 `json:"documents"`
	Sections   int64 `json:"sections"`
	Embeddings struct {
		Pending              int64            `json:"pending"`
		Ready                int64            `json:"ready"`
		Failed               int64            `json:"failed"`
		ReadyByModel         map[string]int64 `json:"readyByModel"`
		OldestPendingSeconds float64          `json:"oldestPendingSeconds"`
	} `json:"embeddings"`
	// OpenRelations counts the org's open relations (link_knowledge,
	// package relations), RelationsByType by their stored (catalogue) type,
	// largest first; closed ones are history and not counted.
	OpenRelations   int64                  `json:"openRelations"`
	RelationsByType []domain.RelationCount `json:"relationsByType"`
	TopTags         []TagCount             `json:"topTags"`
	PerAgent        []AgentCount           `json:"perAgent"`
	// AgentNames names every agent of the org by id.
	AgentNames map[string]string `json:"agentNames"`
	// Quotas and RateLimits are the org's settings (tenancy): the
	// quota's use and limit, and the operators' rate limits (empty: the
	// MCP server's defaults apply).
	Quotas     []tenancy.Quota     `json:"quotas"`
	RateLimits []tenancy.RateLimit `json:"rateLimits"`
	// Index is the lexical index's own view (SearchIndexStatus), with
	// its queue counted up to statsMaxQueued: past it IndexQueuedAtLeast
	// is set and Index.Queued is a lower bound (ctl search status counts
	// them all).
	// Uploads are the org's documents uploaded in parts and not finished
	// (package documents), expired ones until the worker deletes them, and the
	// bytes their staged parts hold.
	Uploads struct {
		Open        int64 `json:"open"`
		StagedBytes int64 `json:"stagedBytes"`
	} `json:"uploads"`
	Index              SearchIndexStatus `json:"index"`
	IndexQueuedAtLeast bool              `json:"indexQueuedAtLeast"`
	ElapsedMs          float64           `json:"elapsedMs"`
}

// statsMaxQueued bounds the index queue's count in Stats.
const statsMaxQueued = 10_000

// TagCount is a tag and how many entries carry it.
type TagCount struct {
	Tag     string `json:"tag"`
	Entries int64  `json:"entries"`
}

// AgentCount is an author and how many entries it created (AgentID nil:
// entries without an agent author, e.g. imported by an operator).
type AgentCount struct {
	AgentID *uuid.UUID `json:"agentId"`
	Entries int64      `json:"entries"`
}

// Stats reads org's statistics (docs/operators.md; latency by org size in
// docs/benchmarks.md). The org is not checked: callers pass an org that
// exists (a token's, or one ctl looked up).
func (m *Maintenance) Stats(ctx context.Context, org uuid.UUID, topTags int) (_ *OrgStats, err error) {
	defer data.WrapOp(&err, "knowledge.Stats")
	if topTags <= 0 {
		topTags = 10
	}
	start := time.Now() // wall time: ElapsedMs measures the call, whatever the service's clock
	st := &OrgStats{OrgID: org}
	err = pgx.BeginTxFunc(ctx, m.data.Scoped(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if err := q.StatsConfig(ctx); err != nil {
			return err
		}
		counts, err := q.StatsCounts(ctx, org)
		if err != nil {
			return err
		}
		heads := st.addCounts(counts)
		clock, err := q.StatsClock(ctx, org)
		if err != nil {
			return err
		}
		if err := st.addExpired(clock.ExpiredByKind); err != nil {
			return err
		}
		st.Forgotten = clock.Forgotten
		st.Heads = heads - st.Expired
		st.Entries = heads + st.Superseded
		st.Embeddings.OldestPendingSeconds = clock.OldestPendingSeconds
		tags, err := q.StatsTopTags(ctx, sqlc.StatsTopTagsParams{OrgID: org, MaxTags: int32(topTags)})
		if err != nil {
			return err
		}
		st.TopTags = make([]TagCount, len(tags))
		for i, t := range tags {
			st.TopTags[i] = TagCount{Tag: t.Tag, Entries: t.Entries}
		}
		if err := st.addTenancy(ctx, tx, org); err != nil {
			return err
		}
		ix, err := q.StatsIndex(ctx, sqlc.StatsIndexParams{OrgID: org, MaxRows: statsMaxQueued + 1})
		if err != nil {
			return err
		}
		up, err := q.CountUploads(ctx, sqlc.CountUploadsParams{OrgID: org})
		if err != nil {
			return err
		}
		st.Uploads.Open, st.Uploads.StagedBytes = up.OpenUploads, up.StagedBytes
		st.Index = SearchIndexStatus{OrgID: org, TextSearchConfig: ix.Config, Indexed: ix.Indexed, Queued: min(ix.Queued, statsMaxQueued)}
		st.IndexQueuedAtLeast = ix.Queued > statsMaxQueued
		return nil
	})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	st.ElapsedMs = float64(time.Since(start).Microseconds()) / 1000
	return st, nil
}

// addCounts fills st from the org's counters (StatsCounts: entries by
// state, kind and author, embeddings by status and model, relations by
// type, live documents and sections), each list largest first, and
// returns the head entries counted (expired ones included, as they are in
// ByKind until addExpired takes them out).
func (st *OrgStats) addCounts(counts []sqlc.StatsCountsRow) (heads int64) {
	st.Embeddings.ReadyByModel = map[string]int64{}
	st.ByKind = make(map[string]int64, len(domain.Kinds))
	for _, k := range domain.Kinds {
		st.ByKind[k] = 0
	}
	for _, c := range counts {
		switch c.Kind {
		case "entry_kind":
			st.ByKind[c.Key] = c.N
		case "document":
			st.Documents = c.N
		case "section":
			st.Sections = c.N
		case "state":
			if c.Key == "head" {
				heads = c.N
			} else {
				st.Superseded = c.N
			}
		case "status":
			switch c.Key {
			case "pending":
				st.Embeddings.Pending = c.N
			case "ready":
				st.Embeddings.Ready = c.N
			case "failed":
				st.Embeddings.Failed = c.N
			}
		case "model":
			st.Embeddings.ReadyByModel[c.Key] = c.N
		case "relation":
			st.RelationsByType = append(st.RelationsByType, domain.RelationCount{Type: c.Key, Count: c.N})
			st.OpenRelations += c.N
		case "agent":
			a := AgentCount{Entries: c.N}
			if id, err := uuid.Parse(c.Key); err == nil {
				a.AgentID = &id
			}
			st.PerAgent = append(st.PerAgent, a)
		}
	}
	sort.Slice(st.PerAgent, func(i, j int) bool {
		a, b := st.PerAgent[i], st.PerAgent[j]
		if a.Entries != b.Entries {
			return a.Entries > b.Entries
		}
		return a.AgentID != nil && (b.AgentID == nil || a.AgentID.String() < b.AgentID.String())
	})
	if st.PerAgent == nil {
		st.PerAgent = []AgentCount{}
	}
	sort.Slice(st.RelationsByType, func(i, j int) bool {
		a, b := st.RelationsByType[i], st.RelationsByType[j]
		return a.Count > b.Count || (a.Count == b.Count && a.Type < b.Type)
	})
	if st.RelationsByType == nil {
		st.RelationsByType = []domain.RelationCount{}
	}
	return heads
}

// addExpired takes the expired heads (StatsClock's expired_by_kind, a
// JSON object of counts by kind) out of ByKind and counts them in
// Expired.
func (st *OrgStats) addExpired(byKind []byte) error {
	var expired map[string]int64
	if err := json.Unmarshal(byKind, &expired); err != nil {
		return err
	}
	for k, n := range expired {
		st.ByKind[k] -= n
		st.Expired += n
	}
	return nil
}

// addTenancy fills st's agent names, quotas and rate limits, read in the
// same transaction as the rest (tenancy's tables).
func (st *OrgStats) addTenancy(ctx context.Context, tx pgx.Tx, org uuid.UUID) error {
	agents, err := tenancy.ListAgentsOn(ctx, tx, org)
	if err != nil {
		return err
	}
	st.AgentNames = make(map[string]string, len(agents))
	for _, a := range agents {
		st.AgentNames[a.ID.String()] = a.Name
	}
	if st.Quotas, err = tenancy.QuotasOn(ctx, tx, org); err != nil {
		return err
	}
	if st.RateLimits, err = tenancy.RateLimitsOn(ctx, tx, org); err != nil {
		return err
	}
	return nil
}

// CompactCounts is Maintenance.CompactCounts on d, its errors mapped but
// not wrapped: Upkeep calls it, and so do a purge and an import (erasure,
// transfer), whose own operation names their errors.
func CompactCounts(ctx context.Context, d *data.DB, batch int) (int64, error) {
	if batch <= 0 {
		batch = 10_000
	}
	q := d.Q()
	var total int64
	for {
		n, err := q.CompactCounts(ctx, int32(batch))
		if err != nil {
			return total, data.MapErr(err, "")
		}
		total += n
		// A short batch found no delta left: those written since wait
		// for the next call. Looping until a batch folded nothing chased
		// the deltas of a steady flow of writes for as long as it lasted
		// (58 statements in a 32-second run of a Citus cluster, each
		// across every shard).
		if n < int64(batch) {
			break
		}
	}
	// A counter at zero names a key nothing carries any more; when the key
	// is a tag, that is content an erasure must not leave behind.
	if _, err := q.DeleteZeroCounts(ctx); err != nil {
		return total, data.MapErr(err, "")
	}
	return total, nil
}
