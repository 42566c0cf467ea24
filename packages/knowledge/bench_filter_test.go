package knowledge_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// benchMetadata is the metadata of the i-th entry of a bench org: env
// holds for half of the entries, team for a tenth, shard for a hundredth.
func benchMetadata(i int) string {
	env := "staging"
	if i%2 == 0 {
		env = "prod"
	}
	return `{"env":"` + env + `","team":"t` + strconv.Itoa(i%10) + `","shard":` + strconv.Itoa(i%100) + `}`
}

// BenchmarkSearchFiltered compares search with a metadata filter to the
// same search without it, in the big org of the bench load (bench_test.go;
// KNOWLEDGE_BENCH_SIZES, default 20000): first never analyzed (the tables
// as the load and the product's indexer leave them), then after
// Maintenance.Upkeep. The filters match half, a tenth and a hundredth of
// the org. Between the two, the pairs the searches filtered by get an HNSW
// index of their own where Upkeep's rule gives one (the tenth's and the
// hundredth's; maintenance/upkeep.go), and the never-analyzed state is
// measured again with them: every path below walks a pair's index once it
// exists. Each filtered search runs on three paths (filtersearch.go):
// "auto", the product's (the matches ranked alone when at most
// FilterMatchMax pass, else the lists' own walks testing the filter);
// "lists", every filter tested on the lists' candidates
// (Testing.FilterMatches -1); and, for the selective filters, "ids", the
// matches always ranked alone (the cost of the exact ranking by the
// number of matches, which sets FilterMatchMax). Each query is run without
// and with every filter and path, in an order shuffled per query, so that
// neither load drift nor a cache one search warms for the next favours a
// path; the "ratio" metric is the filtered p50 over the unfiltered p50,
// and the log ends with the selective filters' ratios of each state.
// KNOWLEDGE_BENCH_LISTS=1 also times each list's statement alone (modes
// semantic and lexical), to show which of the two a filter lengthens.
//
//	KNOWLEDGE_BENCH_SIZES=100000 KNOWLEDGE_BENCH_SAMPLES=200 go test -run '^$' -bench SearchFiltered -benchtime 1x -timeout 0 ./packages/knowledge/
func BenchmarkSearchFiltered(b *testing.B) {
	e := readBenchEnv(b)
	if len(e.sizes) == 2 && e.sizes[0] == 10000 && e.sizes[1] == 100000 && e.reuse == "" {
		e.sizes = []int{20000} // the package default is for BenchmarkSearch
	}
	type variant struct {
		name, path string
		meta       map[string]any
		mode       string // "" (hybrid) or one list's mode (KNOWLEDGE_BENCH_LISTS)
	}
	variants := []variant{{"none", "", nil, ""}}
	for _, f := range []struct {
		name      string
		meta      map[string]any
		selective bool
	}{
		{"half", map[string]any{"env": "prod"}, false},
		{"tenth", map[string]any{"team": "t3"}, true},
		{"hundredth", map[string]any{"shard": 42}, true},
	} {
		variants = append(variants, variant{f.name, "auto", f.meta, ""}, variant{f.name, "lists", f.meta, ""})
		if f.selective {
			variants = append(variants, variant{f.name, "ids", f.meta, ""})
		}
	}
	// KNOWLEDGE_BENCH_LISTS=1: also each list alone (mode semantic: the
	// vector statement; lexical: the full-text and title statement), without
	// a filter and with each selective one on the product's path, to see
	// which statement a filter makes longer (their ratios are over the
	// list's own unfiltered p50).
	if os.Getenv("KNOWLEDGE_BENCH_LISTS") == "1" {
		for _, mode := range []string{knowledge.ModeSemantic, knowledge.ModeLexical} {
			variants = append(variants, variant{"none", "", nil, mode},
				variant{"tenth", "auto", map[string]any{"team": "t3"}, mode},
				variant{"hundredth", "auto", map[string]any{"shard": 42}, mode})
		}
	}
	for _, n := range e.sizes {
		bd := loadBench(b, e, n)
		ctx := context.Background()
		var summary []string
		measure := func(state string) {
			// Services of their own per state: a filter's verdict
			// (commonFilters) is learned again, as after a restart.
			paths := map[string]*knowledge.Service{
				"":      knowledge.New(bd.pool, knowledge.Options{}),
				"lists": knowledge.New(bd.pool, knowledge.Options{Testing: knowledge.TestingKnobs{FilterMatches: -1}}),
				"ids":   knowledge.New(bd.pool, knowledge.Options{Testing: knowledge.TestingKnobs{FilterMatches: 1 << 30}}),
			}
			paths["auto"] = paths[""]
			rng := mrand.New(mrand.NewPCG(21, 21))
			lat := make([][]time.Duration, len(variants))
			hits := make([]int, len(variants))
			order := make([]int, len(variants))
			for i := range order {
				order[i] = i
			}
			search := func(q string, i int) time.Duration {
				t0 := time.Now()
				r, err := paths[variants[i].path].Search(ctx, bd.big, knowledge.SearchInput{Query: q, Mode: variants[i].mode, Filters: knowledge.Filters{Metadata: variants[i].meta}})
				if err != nil {
					b.Fatal(err)
				}
				hits[i] += len(r.Hits)
				return time.Since(t0)
			}
			for range 20 { // warm-up
				q := bd.gen.query(rng)
				for i := range variants {
					search(q, i)
				}
			}
			clear(hits)
			load := loadAvg()
			start := time.Now()
			samples := 0
			for samples < e.samples && time.Since(start) < e.budget {
				q := bd.gen.query(rng)
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				for _, i := range order {
					lat[i] = append(lat[i], search(q, i))
				}
				samples++
			}
			logf("n=%d %s: %d queries, load average %s -> %s", n, state, samples, load, loadAvg())
			base := p50(lat[0])
			bases := map[string]time.Duration{} // each mode's unfiltered p50
			for i, v := range variants {
				if v.meta == nil {
					bases[v.mode] = p50(lat[i])
				}
			}
			ratios := map[string]float64{}
			for i, v := range variants {
				name := fmt.Sprintf("n=%d/%s/metadata=%s", n, state, v.name)
				if v.path != "" {
					name += "/" + v.path
				}
				if v.mode != "" {
					name += "/mode=" + v.mode
				}
				ratio := float64(p50(lat[i])) / float64(bases[v.mode])
				if v.mode == "" {
					ratios[v.name+"/"+v.path] = ratio
				}
				b.Run(name, func(b *testing.B) {
					reportLatencies(b, lat[i])
					b.ReportMetric(ratio, "ratio")
					b.ReportMetric(float64(hits[i])/float64(samples), "hits/query")
				})
			}
			summary = append(summary, fmt.Sprintf("n=%d %s: unfiltered p50 %.2f ms; filtered p50 / unfiltered p50: 1/10 %.2f, 1/100 %.2f (target <= 1.2), 1/2 %.2f",
				n, state, float64(base)/float64(time.Millisecond), ratios["tenth/auto"], ratios["hundredth/auto"], ratios["half/auto"]))
		}
		state := "never-analyzed"
		if bd.analyzed(b) {
			state = "analyzed"
		}
		measure(state)
		// The searches recorded their filters' pairs (after their
		// answers): Upkeep's index builds give the selective ones an HNSW
		// index of their own (maintenance/upkeep.go), one a pass.
		time.Sleep(time.Second)
		t0 := time.Now()
		var built []string
		for {
			rep, err := maint(bd.svc).UpkeepVectorIndexes(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if len(rep.Built) == 0 {
				break
			}
			built = append(built, rep.Built...)
		}
		logf("Maintenance.UpkeepVectorIndexes in %v: built %v", time.Since(t0).Round(time.Millisecond), built)
		if len(built) > 0 {
			measure(state + "-pair-indexes")
			// What walking a pair's graph costs the vector list in recall,
			// against its exact plan restricted to the filter (which the
			// ids plan is), and what walking the org's (or the space's)
			// graph testing the filter did.
			sp := knowledge.SpaceOf(embed.NewLocal())
			for _, f := range []struct{ name, meta string }{{"tenth", `{"team": "t3"}`}, {"hundredth", `{"shard": 42}`}} {
				logf("n=%d recall@10 of the vector list filtered to a %s (ef_search 64), against its exact plan: the pair's index %.3f, the org's walk testing the filter %.3f",
					n, f.name, filteredRecall(b, bd, f.meta, sp.PairIndexPrefix()), filteredRecall(b, bd, f.meta, ""))
			}
		}
		t0 = time.Now()
		rep, err := maint(bd.svc).Upkeep(ctx)
		if err != nil {
			b.Fatal(err)
		}
		logf("Maintenance.Upkeep in %v: vacuumed %v, analyzed %v, built %v, dropped %v",
			time.Since(t0).Round(time.Millisecond), rep.Vacuumed, rep.Analyzed, rep.Built, rep.Dropped)
		measure("after-upkeep")
		for _, l := range summary {
			logf("%s", l)
		}
	}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// filteredRecall is the recall@10 of the vector list's HNSW plan filtered
// by meta (knowledge_vector_hnsw, as the statement runs it: iterative
// scan, relaxed order, 40 candidates, the pairs' indexes when prefix is
// given, else the org's or the space's walk testing the filter) against
// its exact plan with the same filter, over 60 queries of the big org.
func filteredRecall(b *testing.B, bd *benchDB, meta, prefix string) float64 {
	ctx := context.Background()
	local := embed.NewLocal()
	rng := mrand.New(mrand.NewPCG(9, 9))
	var found, total int
	for range 60 {
		vs, _ := local.Embed(ctx, []string{bd.gen.query(rng)})
		vec := pgvector.NewVector(vs[0])
		exact := vectorTop10(b, bd, "knowledge_vector_exact", vec, 64, meta, "")
		found += shared(exact, vectorTop10(b, bd, "knowledge_vector_hnsw", vec, 64, meta, prefix))
		total += len(exact)
	}
	if total == 0 {
		b.Fatal("the exact plan found nothing")
	}
	return float64(found) / float64(total)
}
