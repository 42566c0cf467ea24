package search_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// countingEmbedder is the local embedder behind a provider's latency,
// counting the calls that reach it.
type countingEmbedder struct {
	embed.Embedder
	delay time.Duration
	calls atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.calls.Add(1)
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.Embedder.Embed(ctx, texts)
}

// A provider slower than the budget does not hold the search: the answer
// comes from the lexical lists at once and says so, and the provider's late
// answer fills the cache, so the same query finds its vector next time
// without asking again.
func TestSearchEmbedBudgetAnswersLexicallyAndCachesTheLateVector(t *testing.T) {
	t.Parallel()
	slow := &countingEmbedder{Embedder: embed.NewLocal(), delay: time.Second}
	b := setup(t, func(o *knowledge.Options) {
		o.Embedder = slow
		o.QueryEmbedBudget = 50 * time.Millisecond
	})
	c := seed(t, b)
	seeded := slow.calls.Load()                                  // the stores' duplicate checks embed their texts
	b.search(t, b.alice, knowledge.SearchInput{Query: "banana"}) // the pool's connections warm
	t0 := time.Now()
	r := b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool"})
	if d := time.Since(t0); d >= time.Second {
		t.Fatalf("the search waited for the provider: %v", d)
	}
	if r.VectorSearch || !strings.Contains(r.Notice, "50ms") {
		t.Fatalf("must answer without vectors and name the budget: %+v", r)
	}
	if len(r.Hits) == 0 || r.Hits[0].ID != c.pool {
		t.Fatalf("the lexical lists must answer: %v", ids(r.Hits))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool"})
		if r.VectorSearch || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !r.VectorSearch || r.Notice != "" || has(r.Hits, c.pool).VectorRank == 0 {
		t.Fatalf("the late vector was not cached: %+v", r)
	}
	if n := slow.calls.Load() - seeded; n != 2 {
		t.Fatalf("the provider was asked %d times for two queries", n)
	}
}

// The cache is shared through Redis by every replica, per model: a second
// Service (another MCP process) does not ask the provider for a query the
// first one embedded; a Service with another model does. Without Redis
// (down, or none), searches still work.
func TestQueryVectorCacheIsSharedPerModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := seed(t, b)
	replica := func(model string, rc *redis.Client) (*knowledge.Service, *countingEmbedder) {
		e := &countingEmbedder{Embedder: namedEmbedder{embed.NewLocal(), model}}
		return knowledge.New(b.pool, knowledge.Options{Embedder: e, Redis: rc, Config: knowledge.Config{VectorCalibration: ptr(knowledge.CalibrationFor("local-hash-v1"))}}), e
	}
	a, ea := replica("m1", b.redis.Client)
	bb, eb := replica("m1", b.redis.Client)
	other, eo := replica("m2", b.redis.Client)
	for _, s := range []*knowledge.Service{a, bb, other} {
		r, err := s.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "connection pool"})
		if err != nil || !r.VectorSearch {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if ea.calls.Load() != 1 || eb.calls.Load() != 0 || eo.calls.Load() != 1 {
		t.Fatalf("provider calls: first replica %d, second %d (want 0: shared), other model %d (want 1)",
			ea.calls.Load(), eb.calls.Load(), eo.calls.Load())
	}
	// Redis unreachable: the cache read fails fast and the provider answers.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 20 * time.Millisecond})
	defer dead.Close()
	s, e := replica("m3", dead)
	r, err := s.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "connection pool"})
	if err != nil || !r.VectorSearch || len(r.Hits) == 0 || r.Hits[0].ID != c.pool || e.calls.Load() != 1 {
		t.Fatalf("without Redis: %+v %v (calls %d)", r, err, e.calls.Load())
	}
}

type namedEmbedder struct {
	embed.Embedder
	model string
}

func (n namedEmbedder) Model() string { return n.model }

// Searches of one query that arrive while the provider's call for it is in
// flight, and just after it ends, make one call between them: a search
// that missed the caches (its Redis read under way) when the call ended
// finds the vector the call left, instead of asking again.
func TestOneProviderCallPerQueryAcrossTheFlightsEnd(t *testing.T) {
	t.Parallel()
	r := testenv.LeaseRedis(t)
	for round := range 20 {
		p := &countingEmbedder{Embedder: embed.NewLocal(), delay: 5 * time.Millisecond}
		s := search.New(data.New(nil), search.Options{Embedder: p, Redis: r.Client, QueryEmbedBudget: time.Minute})
		query := fmt.Sprintf("connection pool %d", round)
		// Searches start every 100 µs, before, across and after the
		// call's end: some miss the process cache just before it is
		// filled, and reach the flight just after it ended.
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 80 {
			wg.Go(func() {
				time.Sleep(time.Until(start.Add(time.Duration(i) * 100 * time.Microsecond)))
				if _, err := s.EmbedQuery(context.Background(), query); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := p.calls.Load(); n != 1 {
			t.Fatalf("round %d: the provider was asked %d times for one query", round, n)
		}
	}
}
