package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
)

// How an org in another language is served: each org's lexical index is
// built with one PostgreSQL text search configuration (stop words and
// stemming: english, german, french, spanish, russian, simple, ... any the
// server has, including custom ones), kept in knowledge_search_stats.config
// and used for its entries and its queries alike. A new org gets the
// deployment's (Options.TextSearchConfig); an operator
// moves an org to another with SetTextSearchConfig (`ctl search language`).
// Identifiers are matched whole whatever the language, and the vector list
// serves any language the embedding model knows.

// SearchIndexStatus is what an operator sees of an org's lexical index.
type SearchIndexStatus struct {
	OrgID uuid.UUID `json:"orgId"`
	// TextSearchConfig is the org's configuration; empty until its first
	// entry is indexed (it will be the deployment's).
	TextSearchConfig string `json:"textSearchConfig"`
	Indexed          int64  `json:"indexed"`
	Queued           int64  `json:"queued"`
	// VectorIndexes are the org's own HNSW indexes (Upkeep gives one to a
	// large org: upkeep.go), one per embedding space. Until the org has a
	// valid one, its vector list walks the space's shared index filtering
	// by org, or scans the org's vectors: after a bulk load, the tens of
	// seconds in which its searches are several times slower.
	VectorIndexes []domain.VectorIndexState `json:"vectorIndexes"`
}

// SearchIndexStatus reports an org's lexical index and its own vector
// indexes.
func (m *Maintenance) SearchIndexStatus(ctx context.Context, org uuid.UUID) (_ *SearchIndexStatus, err error) {
	defer data.WrapOp(&err, "knowledge.SearchIndexStatus")
	r, err := m.q.SearchIndexStatus(ctx, org)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	ixs, err := m.q.IndexesNamed(ctx, vecspace.OrgIndexPrefix(org))
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	st := &SearchIndexStatus{OrgID: org, TextSearchConfig: r.Config, Indexed: r.Indexed, Queued: r.Queued,
		VectorIndexes: []domain.VectorIndexState{}}
	for _, ix := range ixs {
		st.VectorIndexes = append(st.VectorIndexes, domain.VectorIndexState{Name: ix.Name, Valid: ix.Valid})
	}
	// Its pairs' (upkeep.go), known by the names its searched pairs give.
	sp := vecspace.Of(m.emb)
	names, err := m.q.OrgPairIndexNames(ctx, sqlc.OrgPairIndexNamesParams{OrgID: org, Prefix: sp.PairIndexPrefix()})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	have, err := m.q.IndexesNamed(ctx, sp.PairIndexPrefix())
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	valid := map[string]bool{}
	for _, ix := range have {
		valid[ix.Name] = ix.Valid
	}
	for _, n := range names {
		v, ok := valid[n.Name]
		if !ok {
			continue
		}
		pair, err := m.q.PairFilter(ctx, sqlc.PairFilterParams{OrgID: org, Pair: n.Pair})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, data.MapErr(err, "")
		}
		st.VectorIndexes = append(st.VectorIndexes, domain.VectorIndexState{Name: n.Name, Valid: v, Pair: pair})
	}
	return st, nil
}

// SetTextSearchConfig moves org's lexical index to another text search
// configuration: in one transaction the org's postings and term statistics
// are dropped, its counters zeroed under the new configuration, and every
// entry queued again; the indexer rebuilds the index. Until it has, search
// still finds the newest TailEntries queued entries by words (scored on the
// fly) and every entry through the vector list. Other orgs are untouched.
// It returns how many entries were queued.
func (m *Maintenance) SetTextSearchConfig(ctx context.Context, org uuid.UUID, config string) (_ int64, err error) {
	defer data.WrapOp(&err, "knowledge.SetTextSearchConfig")
	config = strings.TrimSpace(config)
	if config == "" {
		return 0, errs.InvalidArgument("config", "must name a text search configuration")
	}
	ok, err := m.q.TextSearchConfigExists(ctx, config)
	if err != nil {
		return 0, data.MapErr(err, "")
	}
	if !ok {
		names, err := m.q.TextSearchConfigs(ctx)
		if err != nil {
			return 0, data.MapErr(err, "")
		}
		return 0, errs.InvalidArgument("config", "%q is not a text search configuration of this server (it has: %s)",
			config, strings.Join(names, ", "))
	}
	var queued int64
	err = pgx.BeginFunc(ctx, m.data.Scoped(), func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if _, err := q.LockSearchStats(ctx, sqlc.LockSearchStatsParams{OrgID: org, DefaultConfig: config}); err != nil {
			return err
		}
		if err := q.ResetSearchIndex(ctx, sqlc.ResetSearchIndexParams{OrgID: org, Config: config}); err != nil {
			return err
		}
		if err := q.DeleteOrgPostings(ctx, org); err != nil {
			return err
		}
		if err := q.DeleteOrgTermStats(ctx, org); err != nil {
			return err
		}
		if _, err := q.QueueOrgEntries(ctx, org); err != nil {
			return err
		}
		n, err := q.SearchIndexStatus(ctx, org)
		queued = n.Queued
		return err
	})
	if err != nil {
		return 0, data.MapErr(err, "org") // an org that does not exist: not_found
	}
	return queued, nil
}

// CheckTextSearchConfig makes a misspelt configuration stop an app at start,
// naming what the server has, instead of failing every indexer pass of
// every new org.
func CheckTextSearchConfig(ctx context.Context, pool *pgxpool.Pool, name string) error {
	q := sqlc.New(pool)
	ok, err := q.TextSearchConfigExists(ctx, name)
	if err != nil {
		return fmt.Errorf("checking the text search configuration: %w", err)
	}
	if !ok {
		names, _ := q.TextSearchConfigs(ctx)
		return fmt.Errorf("not a text search configuration of the database (it has: %s)", strings.Join(names, ", "))
	}
	return nil
}
