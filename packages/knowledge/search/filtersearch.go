package search

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// filterMatches reads the entries passing a filter by the filter's own
// index, up to bound (negative: none is read): the first filter given, in
// the order below, with at most bound matches gives the set (the other
// filters are still tested on each entry of it). A document's sections
// (doc) are always read, by its section rows
// (knowledge_sections_document_idx; at most a few thousand, ended ones
// included): no list has an index by document.
//
// ordered is a listing's: it walks an exact source's and a kind's own
// index in the page's order (knowledge_org_source_idx,
// knowledge_org_kind_idx), so with an exact source nothing is read first
// and a kind is never read first. Tags are never read first: their index
// is of every org (knowledge_tags_idx), so a bound on its matches would
// count other orgs' entries.
func (s *Searcher) filterMatches(ctx context.Context, org uuid.UUID, f domain.FilterArgs, doc *uuid.UUID, bound int, ordered bool) (domain.MatchSet, error) {
	if doc != nil {
		ids, err := s.q.DocumentSectionIDs(ctx, sqlc.DocumentSectionIDsParams{OrgID: org, Ids: []uuid.UUID{*doc}})
		if err != nil {
			return domain.MatchSet{}, data.MapErr(err, "")
		}
		return domain.MatchSet{ByIDs: true, Ids: ids}, nil
	}
	if bound < 0 || (ordered && f.Source != nil) {
		return domain.MatchSet{}, nil
	}
	reads := []struct {
		given bool
		key   string // the filter, for commonFilters
		read  func() ([]uuid.UUID, error)
	}{
		{f.Metadata != nil, "m" + string(f.Metadata), func() ([]uuid.UUID, error) {
			return s.q.MetadataMatches(ctx, sqlc.MetadataMatchesParams{OrgID: org, Metadata: f.Metadata, Max: int32(bound + 1)})
		}},
		{f.Source != nil && !ordered, "s" + domain.StrOf(f.Source), func() ([]uuid.UUID, error) {
			return s.q.SourceMatches(ctx, sqlc.SourceMatchesParams{OrgID: org, Source: domain.StrOf(f.Source), Max: int32(bound + 1)})
		}},
		{f.SourcePrefix != nil, "p" + domain.StrOf(f.SourcePrefix), func() ([]uuid.UUID, error) {
			return s.q.SourcePrefixMatches(ctx, sqlc.SourcePrefixMatchesParams{
				OrgID: org, Prefix: domain.StrOf(f.SourcePrefix), PrefixEnd: domain.PrefixEnd(domain.StrOf(f.SourcePrefix)), Max: int32(bound + 1),
			})
		}},
		{f.Kind != nil && !ordered, "k" + domain.StrOf(f.Kind), func() ([]uuid.UUID, error) {
			return s.q.KindMatches(ctx, sqlc.KindMatchesParams{OrgID: org, Kind: domain.StrOf(f.Kind), Max: int32(bound + 1)})
		}},
	}
	for _, r := range reads {
		key := commonKey{org: org, bound: bound, filter: r.key}
		if !r.given || s.common.has(key) {
			continue
		}
		ids, err := r.read()
		if err != nil {
			return domain.MatchSet{}, data.MapErr(err, "")
		}
		if len(ids) <= bound {
			return domain.MatchSet{ByIDs: true, Ids: ids}, nil
		}
		s.common.add(key)
	}
	return domain.MatchSet{}, nil
}

// commonFilters remembers, for commonTTL, the filters of an org found to
// have more matches than a bound: reading bound + 1 matches to learn that a
// filter is common again costs as much as a whole search (a heap row a
// match: 20 ms for 1,500 of them at 100k entries, docs/benchmarks.md,
// "Entry field filters"), while a common filter stays common (either path
// gives the same answer; a filter that became rare meanwhile is only slower
// to search until the verdict expires). It holds at most commonMax
// verdicts, and forgets them all when full.
type commonFilters struct {
	mu sync.Mutex
	at map[commonKey]time.Time
}

type commonKey struct {
	org    uuid.UUID
	bound  int
	filter string // a letter for the field, then the filter's value
}

const (
	commonTTL = 30 * time.Second
	commonMax = 4096
)

func (c *commonFilters) has(k commonKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[k]
	return ok && time.Since(t) < commonTTL
}

func (c *commonFilters) add(k commonKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil || len(c.at) >= commonMax {
		c.at = make(map[commonKey]time.Time)
	}
	c.at[k] = time.Now()
}

// searchMatches is filterMatches for a search (a.Within): every entry
// field filter may be read first, up to FilterMatchMax (or
// Options.FilterMatches).
func (s *Searcher) searchMatches(ctx context.Context, org uuid.UUID, a *domain.SearchArgs) (err error) {
	bound := domain.FilterMatchMax
	if k := s.opts.FilterMatches; k != 0 {
		bound = k
	}
	a.Within, err = s.filterMatches(ctx, org, a.Filters, a.DocumentID, bound, false)
	return err
}
