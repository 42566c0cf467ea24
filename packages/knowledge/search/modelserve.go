package search

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
)

// servedByTTL is how long an org's serving model is cached: a search
// reads it at most this often per org. A search that read it just before
// the cut-over uses the current model, whose vectors are all still there.
const servedByTTL = time.Second

type servedByCache struct {
	mu sync.Mutex
	m  map[uuid.UUID]servedByEntry
}

type servedByEntry struct {
	next bool
	at   time.Time
}

// servedByNext is the next model's Searcher when the org has cut over to
// it, else nil (no switch configured, or not cut over yet). A failure to
// read it serves the current model, whose vectors are all there.
func (s *Searcher) servedByNext(ctx context.Context, org uuid.UUID) *Searcher {
	if s.next == nil {
		return nil
	}
	c := &s.servedBy
	c.mu.Lock()
	e, ok := c.m[org]
	c.mu.Unlock()
	// Wall time, not the service's clock: the entry's age is how long ago
	// the database was read.
	if !ok || time.Since(e.at) > servedByTTL {
		sp := vecspace.Of(s.opts.NextEmbedder)
		next, err := s.q.OrgServedBy(ctx, sqlc.OrgServedByParams{OrgID: org, Model: sp.Model, Dims: int32(sp.Dims)})
		if err != nil {
			s.log().Warn("knowledge: reading the org's model failed; serving the current model", "org", org, "err", err)
			return nil
		}
		e = servedByEntry{next: next, at: time.Now()}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[uuid.UUID]servedByEntry{}
		}
		c.m[org] = e
		c.mu.Unlock()
	}
	if e.next {
		return s.next
	}
	return nil
}

// ServedBy is the Searcher whose model serves org's queries: the next
// model's once the org has cut over to it, else s. The duplicate check of
// a store embeds and compares with it, as a search of the org would.
func (s *Searcher) ServedBy(ctx context.Context, org uuid.UUID) *Searcher {
	if n := s.servedByNext(ctx, org); n != nil {
		return n
	}
	return s
}
