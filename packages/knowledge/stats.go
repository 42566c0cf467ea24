package knowledge

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// OrgStats is what an org holds (ctl stats). Every number is exact, read
// in one snapshot (a repeatable-read transaction), so they add up: Heads +
// Superseded + Expired = Entries, Pending + Ready + Failed = Entries.
type OrgStats struct {
	OrgID      uuid.UUID `json:"orgId"`
	Entries    int64     `json:"entries"`
	Heads      int64     `json:"heads"`      // current: not superseded, not expired
	Superseded int64     `json:"superseded"` // superseded (whatever their expiry)
	Expired    int64     `json:"expired"`    // not superseded, expiry passed
	Embeddings struct {
		Pending              int64            `json:"pending"`
		Ready                int64            `json:"ready"`
		Failed               int64            `json:"failed"`
		ReadyByModel         map[string]int64 `json:"readyByModel"`
		OldestPendingSeconds float64          `json:"oldestPendingSeconds"`
	} `json:"embeddings"`
	TopTags  []TagCount   `json:"topTags"`
	PerAgent []AgentCount `json:"perAgent"`
	// Index is the lexical index's own view (SearchIndexStatus).
	Index     SearchIndexStatus `json:"index"`
	ElapsedMs float64           `json:"elapsedMs"`
}

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

// Stats reads org's statistics. Cost: four passes over the org's rows
// (docs/operators.md has the measured latency by org size).
func (s *Service) Stats(ctx context.Context, org uuid.UUID, topTags int) (*OrgStats, error) {
	if topTags <= 0 {
		topTags = 10
	}
	start := time.Now()
	st := &OrgStats{OrgID: org}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		e, err := q.StatsEntries(ctx, org)
		if err != nil {
			return err
		}
		st.Entries, st.Heads, st.Superseded, st.Expired = e.Total, e.Heads, e.Superseded, e.Expired
		st.Embeddings.Pending, st.Embeddings.Ready, st.Embeddings.Failed = e.Pending, e.Ready, e.Failed
		st.Embeddings.OldestPendingSeconds = e.OldestPendingSeconds
		models, err := q.StatsModels(ctx, org)
		if err != nil {
			return err
		}
		st.Embeddings.ReadyByModel = make(map[string]int64, len(models))
		for _, m := range models {
			st.Embeddings.ReadyByModel[m.Model] = m.Entries
		}
		tags, err := q.StatsTopTags(ctx, sqlc.StatsTopTagsParams{OrgID: org, MaxTags: int32(topTags)})
		if err != nil {
			return err
		}
		st.TopTags = make([]TagCount, len(tags))
		for i, t := range tags {
			st.TopTags[i] = TagCount{Tag: t.Tag, Entries: t.Entries}
		}
		agents, err := q.StatsPerAgent(ctx, org)
		if err != nil {
			return err
		}
		st.PerAgent = make([]AgentCount, len(agents))
		for i, a := range agents {
			st.PerAgent[i] = AgentCount{AgentID: a.AgentID, Entries: a.Entries}
		}
		ix, err := q.SearchIndexStatus(ctx, org)
		if err != nil {
			return err
		}
		st.Index = SearchIndexStatus{OrgID: org, TextSearchConfig: ix.Config, Indexed: ix.Indexed, Queued: ix.Queued}
		return nil
	})
	if err != nil {
		return nil, mapErr(err, "")
	}
	st.ElapsedMs = float64(time.Since(start).Microseconds()) / 1000
	return st, nil
}
