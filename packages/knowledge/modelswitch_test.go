package knowledge_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// bagEmbedder is a second model: 384 dimensions, words hashed to
// coordinates (so its neighbours differ from the local embedder's).
type bagEmbedder struct{ calls atomic.Int64 }

func (*bagEmbedder) Model() string   { return "bag-384" }
func (*bagEmbedder) Dimensions() int { return 384 }
func (e *bagEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float64, 384)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%384] += 1
			v[(h.Sum32()>>9)%384] -= 0.5
		}
		var n float64
		for _, x := range v {
			n += x * x
		}
		out[i] = make([]float32, 384)
		for j, x := range v {
			out[i][j] = float32(x/math.Sqrt(n+1e-9)) + 1e-3
		}
	}
	return out, nil
}

// A model switch under live traffic: while the next model's vectors are
// backfilled and the org is cut over, searches never get an empty vector
// list nor one that mixes the models: every list is the current model's
// list or, once cut over, the next model's.
func TestModelSwitchUnderLiveTraffic(t *testing.T) {
	t.Parallel()
	next := &bagEmbedder{}
	b := setup(t, func(o *knowledge.Options) { o.NextEmbedder = next })
	for i := 0; i < 60; i++ {
		b.store(t, b.alice, fmt.Sprintf("note %d about %s", i, []string{"postgres", "redis", "kafka", "vacuum"}[i%4]),
			fmt.Sprintf("entry %d: %s tuning, %s", i, []string{"pool sizes", "eviction", "partitions", "dead rows"}[i%4], strings.Repeat("detail ", i%7)))
	}
	b.embedPending(t)
	b.indexAll(t)
	ctx := context.Background()
	const query = "postgres pool sizes"
	vectorList := func(svc *knowledge.Service) string {
		t.Helper()
		l, err := knowledge.SearchLists(ctx, svc, b.alice, knowledge.SearchInput{Query: query}, 20)
		if err != nil {
			t.Fatal(err)
		}
		if !l.VectorSearch || len(l.Vector) == 0 {
			t.Fatalf("empty vector list: %+v", l)
		}
		return fmt.Sprint(l.Vector)
	}
	before := vectorList(b.svc)

	var mu sync.Mutex
	seen := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := knowledge.SearchLists(ctx, b.svc, b.alice, knowledge.SearchInput{Query: query}, 20)
				key := "error"
				if err == nil {
					key = fmt.Sprint(l.Vector)
					if !l.VectorSearch || len(l.Vector) == 0 {
						key = "empty"
					}
				}
				mu.Lock()
				seen[key]++
				mu.Unlock()
			}
		}()
	}
	// The backfill, a few entries a pass as a rate limit would have it.
	var cut bool
	for pass := 0; pass < 100 && !cut; pass++ {
		// A pass stopped by Max cuts nothing over; one that ran out of
		// entries cuts over what is covered.
		rep, err := maint(b.ops).Backfill(ctx, next, knowledge.BackfillOptions{Batch: 8, Max: 16})
		if err != nil {
			t.Fatal(err)
		}
		for _, org := range rep.CutOver {
			cut = cut || org == b.org
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !cut {
		t.Fatal("the org was never cut over")
	}
	time.Sleep(1500 * time.Millisecond) // past the serving cache
	close(stop)
	wg.Wait()

	// After: what a Service of the next model alone answers.
	after := vectorList(knowledge.New(b.pool, knowledge.Options{Embedder: next}))
	if after == before {
		t.Fatal("the two models give the same list: the test cannot tell them apart")
	}
	if got := vectorList(b.svc); got != after {
		t.Fatalf("served after the cut-over:\n%s\nwant the next model's\n%s", got, after)
	}
	for k, n := range seen {
		if k != before && k != after {
			t.Fatalf("%d searches got a vector list of neither model (%s):\n%s\nbefore %s\nafter  %s", n, k, k, before, after)
		}
	}
	if seen[before] == 0 || seen[after] == 0 {
		t.Fatalf("searches saw before %d times, after %d times: the traffic did not span the switch", seen[before], seen[after])
	}
	// The other org, with no entries, was cut over too; coverage says so.
	cov, err := b.ops.Operations().ModelSwitchCoverage(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(cov) != 1 || cov[0].OrgID != b.org || cov[0].WithVector != 60 || cov[0].Covered != 60 || !cov[0].CutOver {
		t.Fatalf("coverage %+v", cov)
	}
	t.Logf("searches: %d with the current model's list, %d with the next's", seen[before], seen[after])

	// Finished with the next model configured as the current one: the
	// entries hold its vectors, the old model's are gone, searches agree.
	svcNext := knowledge.New(b.pool, knowledge.Options{Embedder: next})
	if _, err := svcNext.Operations().FinishModelSwitch(ctx, knowledge.SpaceOf(next)); err != nil {
		t.Fatal(err)
	}
	var own, old, switched int
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM knowledge WHERE embedding_model = 'bag-384' AND vector_dims(embedding) = 384),
		(SELECT count(*) FROM knowledge_chunks WHERE embedding_model <> 'bag-384' OR chunk = 0),
		(SELECT count(*) FROM knowledge_org_spaces)`).Scan(&own, &old, &switched); err != nil {
		t.Fatal(err)
	}
	if own != 60 || old != 0 || switched != 0 {
		t.Fatalf("after finishing: %d entries hold the next model's vector, %d other vectors left, %d serving rows", own, old, switched)
	}
	if got := vectorList(svcNext); got != after {
		t.Fatalf("after finishing:\n%s\nwant\n%s", got, after)
	}
	if err := knowledge.CheckModelSwitch(embed.NewLocal(), embed.NewLocal()); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Fatalf("the same model twice: %v", err)
	}
}
