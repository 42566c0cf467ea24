package search

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// slowProvider is a provider (not in-process) that answers after delay
// and counts its calls.
type slowProvider struct {
	embed.Embedder
	delay time.Duration
	calls atomic.Int64
}

func (p *slowProvider) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	p.calls.Add(1)
	time.Sleep(p.delay)
	return p.Embedder.Embed(ctx, texts)
}

// Searches of one query that arrive while the provider's call for it is in
// flight, and just after it ends, make one call between them: a search
// that missed the caches (its Redis read under way) when the call ended
// finds the vector the call left, instead of asking again.
func TestOneProviderCallPerQueryAcrossTheFlightsEnd(t *testing.T) {
	t.Parallel()
	r := testenv.LeaseRedis(t)
	for round := range 20 {
		p := &slowProvider{Embedder: embed.NewLocal(), delay: 5 * time.Millisecond}
		s := New(data.New(nil), Options{Embedder: p, Redis: r.Client, QueryEmbedBudget: time.Minute})
		query := "connection pool " + string(rune('a'+round))
		// Searches start every 100 µs, before, across and after the
		// call's end: some miss the process cache just before it is
		// filled, and reach the flight just after it ended.
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 80 {
			wg.Go(func() {
				time.Sleep(time.Until(start.Add(time.Duration(i) * 100 * time.Microsecond)))
				if _, err := s.embedQuery(context.Background(), query); err != nil {
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
