package knowledge

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/search"
)

// The reads of an org's entries are package search's (search.Searcher);
// the facade puts the caller's org in the context and hands them over.

// Search runs the hybrid search (search_knowledge): three ranked lists
// (vector, full text, title), each within the caller's org and the filters,
// fused by evidence-weighted RRF, then the hops over relations, the
// snippets and the token budget (search.Searcher.Search says how). A query
// that cannot be embedded in time is answered from the lexical lists, with
// VectorSearch false and a Notice saying why.
func (s *Service) Search(ctx context.Context, c Caller, in SearchInput) (*SearchResult, error) {
	return s.search.Search(s.scope(ctx, c.OrgID), c, in)
}

// List returns one page of the org's entries, newest first (ties by id).
// Paging is by position (keyset), not by offset: a page is an index range
// scan from the previous page's last entry, as fast at the 1,000th page as
// at the first, and entries stored meanwhile (newer than any page already
// served) neither shift nor repeat the pages after.
func (s *Service) List(ctx context.Context, c Caller, in ListInput) (*ListResult, error) {
	return s.search.List(s.scope(ctx, c.OrgID), c, in)
}

// Complete returns up to MaxCompletions values of what (CompleteEntry,
// CompleteTask, CompleteAgent, CompleteTag) in the caller's org that
// complete prefix, best first (current entries before superseded ones,
// then newest; tags most used first). Ids match by the start of their text
// form (hyphens optional) or by the start of their title (an agent: its
// name), case-insensitively, so an agent can type a few words of a title
// and pick the id. Nothing of another org is ever offered. hasMore says
// more values match than were answered.
func (s *Service) Complete(ctx context.Context, c Caller, what, prefix string) (values []string, hasMore bool, err error) {
	return s.search.Complete(s.scope(ctx, c.OrgID), c, what, prefix)
}

// SearchLists runs s's search of in (its Limit is ignored) with each list
// taken depth deep (1..MaxListDepth) and returns every list and the fusion
// (search.SearchLists). It is a function, not a method: evaluations
// explain a service's ranking with it (apps/eval), and neither the agents'
// and operators' Service nor the worker's Maintenance has a use for it.
func SearchLists(ctx context.Context, s *Service, c Caller, in SearchInput, depth int) (*Lists, error) {
	return search.SearchLists(s.scope(ctx, c.OrgID), s.search, c, in, depth)
}

// SharesAWord tells whether query has a word that the body of some indexed
// entry of org holds (search.SharesAWord).
func SharesAWord(ctx context.Context, s *Service, org uuid.UUID, query string) (bool, error) {
	return search.SharesAWord(s.scope(ctx, org), s.search, org, query)
}

// CountTermsOverBound counts, over queries searched in org, the terms read
// partly (search.CountTermsOverBound).
func CountTermsOverBound(ctx context.Context, s *Service, org uuid.UUID, queries []string) (TermsOverBound, error) {
	return search.CountTermsOverBound(s.scope(ctx, org), s.search, org, queries)
}
