package knowledge_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// BenchmarkStoreCounters: what the org counters' trigger (migration 00007)
// adds to a store. Service.Store of a ~600-character entry with three tags,
// in blocks of 50 with the counters' triggers enabled and disabled in turns
// (ALTER TABLE ... DISABLE TRIGGER), 600 stores each; p50 and p95.
//
//	go test -run '^$' -bench StoreCounters -benchtime 1x ./packages/knowledge/
func BenchmarkStoreCounters(b *testing.B) {
	bd := setup(b)
	triggers := []string{"knowledge_count_inserts", "knowledge_count_updates", "knowledge_count_deletes"}
	set := func(on bool) {
		verb := "DISABLE"
		if on {
			verb = "ENABLE"
		}
		for _, t := range triggers {
			if _, err := bd.pool.Exec(bd.ctx, "ALTER TABLE knowledge "+verb+" TRIGGER "+t); err != nil {
				b.Fatal(err)
			}
		}
	}
	lat := map[bool][]time.Duration{}
	i := 0
	for block := range 26 {
		on := block%2 == 0
		set(on)
		for range 50 {
			i++
			in := knowledge.StoreInput{Title: fmt.Sprint("entry ", i), Body: fmt.Sprintf("%s %d", benchBody, i),
				Tags: []string{fmt.Sprint("tag-", i%200), fmt.Sprint("area-", i%7), "ops"}}
			t0 := time.Now()
			if _, err := bd.svc.Store(bd.ctx, bd.alice, in); err != nil {
				b.Fatal(err)
			}
			if block >= 2 { // the first two blocks warm up
				lat[on] = append(lat[on], time.Since(t0))
			}
		}
	}
	set(true)
	p := func(l []time.Duration, q float64) float64 {
		slices.Sort(l)
		return float64(l[int(q*float64(len(l)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(lat[true], .5), "p50-ms-counters")
	b.ReportMetric(p(lat[false], .5), "p50-ms-without")
	b.ReportMetric(p(lat[true], .95), "p95-ms-counters")
	b.ReportMetric(p(lat[false], .95), "p95-ms-without")
}

const benchBody = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. " +
	"Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor " +
	"in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat non proident, " +
	"sunt in culpa qui officia deserunt mollit anim id est laborum. Sed ut perspiciatis unde omnis iste natus error sit voluptatem."
