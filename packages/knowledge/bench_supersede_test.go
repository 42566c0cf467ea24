package knowledge_test

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkSupersedeChain measures a supersession as the chain it extends
// grows: one fact corrected again and again (an agent's "current status of
// X"), in an org of 3,000 embedded entries with the model's HNSW index, as
// a fleet's org is. Each supersession points every earlier version's
// cached head at the new one (entries.supersedeTx, MoveHeads), and no
// update of an entry is HOT (docs/embeddings.md, "Storage"), so each
// earlier version costs a new entry in every index of the table. It prints
// the p50 of the supersessions at each tenth of the chain.
func BenchmarkSupersedeChain(b *testing.B) {
	const filler, chain = 3000, 100
	bd := setup(b)
	gen := newTextGen()
	rng := mrand.New(mrand.NewPCG(1, 2))
	for range filler {
		title, body, tags := gen.entry(rng)
		bd.store(b, bd.alice, title, body, tags...)
	}
	versions := make([]uuid.UUID, chain+1)
	for i := range versions {
		versions[i] = bd.store(b, bd.alice, fmt.Sprintf("Status of the deploy pipeline, revision %d", i),
			fmt.Sprintf("The deploy pipeline is at revision %d; its canary stage takes %d minutes.", i, 10+i%7))
	}
	bd.embedPending(b)
	if _, err := maint(bd.ops).EnsureVectorIndex(bd.ctx); err != nil {
		b.Fatal(err)
	}
	logf("supersede chain: %d entries embedded, load %s", filler+chain+1, loadAvg())
	took := make([]time.Duration, chain)
	for i := range chain {
		start := time.Now()
		if _, err := bd.svc.Supersede(bd.ctx, bd.alice, versions[i], versions[i+1]); err != nil {
			b.Fatalf("supersession %d: %v", i+1, err)
		}
		took[i] = time.Since(start)
	}
	for from := 0; from < chain; from += chain / 10 {
		part := slices.Clone(took[from : from+chain/10])
		slices.Sort(part)
		logf("supersede chain: versions %3d-%3d: p50 %.2f ms", from+1, from+chain/10, float64(part[len(part)/2])/1e6)
	}
	b.ReportMetric(float64(took[0])/1e6, "first-ms")
	b.ReportMetric(float64(took[chain-1])/1e6, "last-ms")
	logf("supersede chain: done, load %s", loadAvg())
}
