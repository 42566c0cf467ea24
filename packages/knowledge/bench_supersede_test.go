package knowledge_test

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// BenchmarkSupersedeChain measures a supersession as the chain it extends
// grows: one fact corrected again and again (an agent's "current status of
// X"), in an org of 3,000 embedded and indexed entries with the model's HNSW
// index, as a fleet's org is. Each supersession points every earlier version's
// cached head at the new one (entries.supersedeTx, MoveHeads), and no
// update of an entry is HOT (docs/embeddings.md, "Storage"), so each
// earlier version costs a new entry in every index of the table but the
// HNSW ones, which hold heads only (internal/vecspace). It prints
// the p50 of the supersessions at each tenth of the chain, then of the
// org's searches with and without superseded entries.
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
	bd.indexAll(b)
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
	// The superseded versions are in no HNSW index (internal/vecspace): a
	// search asking for them ranks them exactly beside the index's heads.
	without, with := bd.searchSuperseded(b, 80, func(int) string { return "deploy pipeline canary stage revision" })
	logf("supersede chain: search p50 %.2f ms, with includeSuperseded %.2f ms", without, with)
	b.ReportMetric(float64(took[0])/1e6, "first-ms")
	b.ReportMetric(float64(took[chain-1])/1e6, "last-ms")
	logf("supersede chain: done, load %s", loadAvg())
}

// BenchmarkSearchSuperseded measures the searches of an org that has
// superseded much of what it knew: 4,000 embedded and indexed entries, the
// first 2,000 each superseded by one of the others. A search asking for
// superseded entries ranks the org's superseded versions exactly (they are
// in no HNSW index: internal/vecspace), so it costs in proportion to how
// many there are. It prints the p50 of searches without and with
// includeSuperseded, alternated.
func BenchmarkSearchSuperseded(b *testing.B) {
	const entries = 4000
	bd := setup(b)
	gen := newTextGen()
	rng := mrand.New(mrand.NewPCG(3, 4))
	ids := make([]uuid.UUID, entries)
	for i := range ids {
		title, body, tags := gen.entry(rng)
		ids[i] = bd.store(b, bd.alice, title, body, tags...)
	}
	bd.embedPending(b)
	bd.indexAll(b)
	for i := range entries / 2 {
		if _, err := bd.svc.Supersede(bd.ctx, bd.alice, ids[i], ids[entries/2+i]); err != nil {
			b.Fatalf("supersession %d: %v", i+1, err)
		}
	}
	if _, err := maint(bd.ops).EnsureVectorIndex(bd.ctx); err != nil {
		b.Fatal(err)
	}
	logf("search superseded: %d entries, %d superseded, load %s", entries, entries/2, loadAvg())
	without, with := bd.searchSuperseded(b, 200, func(int) string { return gen.query(rng) })
	logf("search superseded: search p50 %.2f ms, with includeSuperseded %.2f ms; load %s", without, with, loadAvg())
	b.ReportMetric(with, "superseded-p50-ms")
}

// searchSuperseded runs n searches of alice's org, query(i) the i-th, every
// other one with includeSuperseded, and answers the p50 in ms of those
// without and of those with.
func (bd *bundle) searchSuperseded(b *testing.B, n int, query func(i int) string) (without, with float64) {
	b.Helper()
	took := [2][]time.Duration{}
	for i := range n {
		in := knowledge.SearchInput{Query: query(i), IncludeSuperseded: i%2 == 1}
		start := time.Now()
		if _, err := bd.svc.Search(bd.ctx, bd.alice, in); err != nil {
			b.Fatal(err)
		}
		took[i%2] = append(took[i%2], time.Since(start))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e6
	}
	return p50(took[0]), p50(took[1])
}
