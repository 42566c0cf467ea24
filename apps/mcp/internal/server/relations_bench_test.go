package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

func benchSize(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// BenchmarkRelations measures issue 26's targets over MCP (HTTP, the
// server as knowledge_app, row-level security on), on data loaded by SQL
// and never analyzed:
//
//   - link: link_knowledge between random entries of an org of
//     RELATIONS_BENCH_LINK_ORG entries (default 100,000);
//   - list-1000: list_relations' first page of an entry with 1,000
//     relations;
//   - search hops-0 / hops-2: search_knowledge on an org of
//     RELATIONS_BENCH_SEARCH_ORG entries (default 10,000, embedded and
//     indexed as the worker would) with about 3 relations per entry,
//     interleaved, every call a query not asked before.
func BenchmarkRelations(b *testing.B) {
	bd := setup(b, setupOpts{cacheTTL: 5 * time.Second, rate: &ratelimit.Limits{}})
	ctx := context.Background()
	ops := knowledge.New(bd.db.Pool, knowledge.Options{Embedder: embed.NewLocal()})
	if _, err := knowledge.NewMaintenance(ops, knowledge.MaintenanceConfig{}).EnsureVectorIndex(ctx); err != nil {
		b.Fatal(err)
	}

	load := func(org uuid.UUID, agent uuid.UUID, n int, text func(i int) (string, string)) []uuid.UUID {
		rows := make([][]any, n)
		ids := make([]uuid.UUID, n)
		for i := range n {
			ids[i] = uuid.New()
			t, body := text(i)
			rows[i] = []any{org, ids[i], t, body, agent}
		}
		if _, err := bd.db.Pool.CopyFrom(ctx, pgx.Identifier{"knowledge"}, []string{"org_id", "id", "title", "body", "created_by_agent_id"}, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
		return ids
	}
	relate := func(org uuid.UUID, pairs [][2]uuid.UUID, types []string) {
		rows := make([][]any, 0, len(pairs))
		for i, p := range pairs {
			rows = append(rows, []any{org, p[0], p[1], types[i%len(types)]})
		}
		if _, err := bd.db.Pool.CopyFrom(ctx, pgx.Identifier{"knowledge_relations"}, []string{"org_id", "from_id", "to_id", "type"}, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
	}

	// link_knowledge in a large org.
	linkOrg := bd.org("links")
	linker := bd.agent(linkOrg, "linker", allScopes, 0)
	n := benchSize("RELATIONS_BENCH_LINK_ORG", 100000)
	t0 := time.Now()
	ids := load(linkOrg, linker.id, n, func(i int) (string, string) { return "entry " + strconv.Itoa(i), "body of entry " + strconv.Itoa(i) })
	fmt.Printf("link org: %d entries loaded in %v (load %s)\n", n, time.Since(t0).Round(time.Millisecond), loadAvg())
	cs := bd.session(linker)
	r := rand.New(rand.NewPCG(1, 2))
	types := []string{"RELATES_TO", "DEPENDS_ON", "FIXES", "PART_OF", "CONTRADICTS"}
	// The floor: a primary-key read over the same MCP path (get_knowledge).
	b.Run("get-100k-baseline", func(b *testing.B) {
		lat := make([]time.Duration, 0, benchSamples)
		for i := range benchSamples + 20 {
			start := time.Now()
			res := call(b, cs, kt.ToolGet, map[string]any{"id": ids[r.IntN(n)]})
			if i >= 20 {
				lat = append(lat, time.Since(start))
			}
			if res.IsError {
				b.Fatal(text(res))
			}
		}
		report(b, lat)
	})
	b.Run("link-100k", func(b *testing.B) {
		for range 20 { // warm the session and the server's pool
			call(b, cs, kt.ToolLink, map[string]any{"fromId": ids[r.IntN(n)], "toId": ids[r.IntN(n)], "type": "RELATES_TO"})
		}
		lat := make([]time.Duration, 0, benchSamples)
		for range benchSamples {
			from, to := ids[r.IntN(n)], ids[r.IntN(n)]
			if from == to {
				continue
			}
			start := time.Now()
			res := call(b, cs, kt.ToolLink, map[string]any{"fromId": from, "toId": to, "type": types[r.IntN(len(types))]})
			lat = append(lat, time.Since(start))
			if res.IsError {
				b.Fatal(text(res))
			}
		}
		report(b, lat)
	})

	// list_relations of an entry with 1,000 relations.
	hub := ids[0]
	pairs := make([][2]uuid.UUID, 0, knowledge.MaxRelationsPerEntry)
	for i := 1; len(pairs) < knowledge.MaxRelationsPerEntry-100; i++ {
		pairs = append(pairs, [2]uuid.UUID{ids[i], hub})
	}
	relate(linkOrg, pairs, []string{"PART_OF", "DEPENDS_ON", "FIXES"})
	for i := range 100 { // the last hundred through the tool (validFrom spread)
		res := call(b, cs, kt.ToolLink, map[string]any{"fromId": hub, "toId": ids[n-1-i], "type": "RELATES_TO"})
		if res.IsError {
			b.Fatal(text(res))
		}
	}
	b.Run("list-relations-1000", func(b *testing.B) {
		lat := make([]time.Duration, 0, benchSamples)
		for i := range benchSamples + 20 {
			start := time.Now()
			res := ok[knowledge.RelationsResult](b, call(b, cs, kt.ToolRelations, map[string]any{"id": hub}))
			if i >= 20 {
				lat = append(lat, time.Since(start))
			}
			if len(res.Relations) != knowledge.DefaultRelationsLimit || res.NextCursor == "" {
				b.Fatalf("page of %d", len(res.Relations))
			}
		}
		report(b, lat)
	})

	// search with hops on a 10k-entry org, ~3 relations per entry.
	searchOrg := bd.org("search")
	searcher := bd.agent(searchOrg, "searcher", allScopes, 0)
	m := benchSize("RELATIONS_BENCH_SEARCH_ORG", 10000)
	t0 = time.Now()
	sids := load(searchOrg, searcher.id, m, benchEntry)
	embedPending(b, bd.db.Pool, searchOrg)
	if _, err := knowledge.NewMaintenance(ops, knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil {
		b.Fatal(err)
	}
	seen := map[[2]uuid.UUID]bool{}
	spairs := make([][2]uuid.UUID, 0, 3*m/2)
	for len(spairs) < 3*m/2 { // each relation has two ends: ~3 per entry
		x, y := sids[r.IntN(m)], sids[r.IntN(m)]
		if x == y || seen[[2]uuid.UUID{x, y}] {
			continue
		}
		seen[[2]uuid.UUID{x, y}] = true
		spairs = append(spairs, [2]uuid.UUID{x, y})
	}
	relate(searchOrg, spairs, []string{"DEPENDS_ON", "FIXES", "PART_OF", "DERIVED_FROM", "CAUSED_BY"})
	fmt.Printf("search org: %d entries, %d relations, embedded and indexed in %v (load %s)\n", m, len(spairs), time.Since(t0).Round(time.Millisecond), loadAvg())
	ss := bd.session(searcher)
	lat := map[int][]time.Duration{}
	added := map[int]int{}
	for i := range 20 {
		call(b, ss, kt.ToolSearch, map[string]any{"query": benchQuery(m - 1 - i), "hops": 2})
	}
	for i := range benchSamples {
		for k := range 2 {
			hops := 2 * ((i + k) % 2)
			start := time.Now()
			res := ok[knowledge.SearchResult](b, call(b, ss, kt.ToolSearch, map[string]any{"query": benchQuery((2*i + k) * 31 % m), "limit": 10, "hops": hops}))
			lat[hops] = append(lat[hops], time.Since(start))
			for _, hit := range res.Hits {
				if hit.Via != nil {
					added[hops]++
				}
			}
		}
	}
	for _, hops := range []int{0, 2} {
		b.Run(fmt.Sprintf("search-10k-hops-%d", hops), func(b *testing.B) {
			b.ReportMetric(float64(added[hops])/float64(len(lat[hops])), "added/op")
			report(b, lat[hops])
		})
	}
	p50 := func(l []time.Duration) time.Duration { s := slices.Clone(l); slices.Sort(s); return s[len(s)/2] }
	fmt.Printf("search p50: hops 0 %v, hops 2 %v: %.2fx\n", p50(lat[0]), p50(lat[2]), float64(p50(lat[2]))/float64(p50(lat[0])))
}
