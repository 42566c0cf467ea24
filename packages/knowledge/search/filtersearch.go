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

// commonFilters remembers, for commonTTL, what a read of bound + 1
// matches said of an org's filter: common (more than bound pass) or not.
// Reading them to learn that a filter is common again costs as much as a
// whole search, and a search of a metadata filter known to be selective
// leaves the read to its statements (searchMatches), so a filter is read
// here once per commonTTL at most. A common filter stays common and a
// selective one selective (either path gives the same answer; a filter
// that changed meanwhile is only slower to search until the verdict
// expires, and the statements count a selective filter's matches again
// anyway). It holds at most commonMax verdicts, and forgets them all when
// full.
type commonFilters struct {
	mu sync.Mutex
	at map[commonKey]verdict
}

type commonKey struct {
	org    uuid.UUID
	bound  int
	filter string // a letter for the field, then the filter's value
}

type verdict struct {
	at     time.Time
	common bool
}

const (
	commonTTL = 30 * time.Second
	commonMax = 4096
)

// verdict is what the last read said of k, if it is recent.
func (c *commonFilters) verdict(k commonKey) (common, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.at[k]
	if !ok || time.Since(v.at) >= commonTTL {
		return false, false
	}
	return v.common, true
}

// has says whether k was found common lately.
func (c *commonFilters) has(k commonKey) bool {
	common, known := c.verdict(k)
	return known && common
}

func (c *commonFilters) set(k commonKey, common bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil || len(c.at) >= commonMax {
		c.at = make(map[commonKey]verdict)
	}
	c.at[k] = verdict{at: time.Now(), common: common}
}

func (c *commonFilters) add(k commonKey) { c.set(k, true) }

// searchMatches is filterMatches for a search (a.Within): every entry
// field filter may be read first, up to FilterMatchMax (or
// Options.FilterMatches). A metadata filter known to be selective is not
// read here: the ranking statements read its matches themselves
// (knowledge_metadata_pairs, one index range each; sql/search_vector.sql
// and sql/search_candidates.sql, mread), so a search of it is one round
// trip of two statements at once, as an unfiltered search is. Here it is
// read once per commonTTL, to learn whether it is selective (that search
// ranks the matches read), and not at all while it is known to be common.
func (s *Searcher) searchMatches(ctx context.Context, org uuid.UUID, a *domain.SearchArgs) (err error) {
	bound := domain.FilterMatchMax
	if k := s.opts.FilterMatches; k != 0 {
		bound = k
	}
	f := a.Filters
	if f.Metadata != nil && a.DocumentID == nil && bound >= 0 {
		key := commonKey{org: org, bound: bound, filter: "m" + string(f.Metadata)}
		common, known := s.common.verdict(key)
		if !known {
			s.recordPairSearch(ctx, org, f.Metadata)
			ids, err := s.q.MetadataMatches(ctx, sqlc.MetadataMatchesParams{OrgID: org, Metadata: f.Metadata, Max: int32(bound + 1)})
			if err != nil {
				return data.MapErr(err, "")
			}
			common = len(ids) > bound
			s.common.set(key, common)
			if !common {
				a.Within = domain.MatchSet{ByIDs: true, Ids: ids, OfMetadata: true}
				return nil
			}
		}
		if !common {
			a.Within = domain.MatchSet{MetadataMax: bound}
			return nil
		}
		f.Metadata = nil // common: the other filters may still be few
	}
	a.Within, err = s.filterMatches(ctx, org, f, a.DocumentID, bound, false)
	return err
}

// recordPairSearch records that org searched the metadata filter's pairs,
// once per commonTTL a server and filter (when searchMatches learns the
// filter's verdict), after the search and without its caller waiting:
// Upkeep gives the pairs an org searched lately an HNSW index of their own
// (maintenance/upkeep.go). At most pairRecordsInFlight at once, each
// within pairRecordTimeout; a record skipped or lost (the database slow or
// away) only delays an index.
func (s *Searcher) recordPairSearch(ctx context.Context, org uuid.UUID, metadata []byte) {
	if s.pairRecords.Add(1) > pairRecordsInFlight {
		s.pairRecords.Add(-1)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pairRecordTimeout)
	go func() {
		defer s.pairRecords.Add(-1)
		defer cancel()
		if err := s.q.RecordPairSearch(ctx, sqlc.RecordPairSearchParams{OrgID: org, Metadata: metadata}); err != nil {
			s.log().Debug("search: recording a filter's pairs", "org", org, "err", err)
		}
	}()
}

const (
	pairRecordsInFlight = 16
	pairRecordTimeout   = 2 * time.Second
)
