package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// The end-to-end benchmark: one go-sdk client calling the server over real
// HTTP (loopback), the server calling real Postgres and Redis. It measures
// what an agent sees per call: JSON-RPC encoding, auth (cached), edge
// checks, the domain call, and the answer.
//
//	go test -run '^$' -bench . ./apps/mcp/...

// words is a vocabulary of 3,000 pseudo-words, so full-text and title
// matches are selective as in real text (a tiny vocabulary would make every
// entry match every query and measure ts_rank over the whole org).
var words = func() []string {
	syl := []string{"ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "da", "gu", "zo", "fi", "be", "xu"}
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]string, 3000)
	for i := range out {
		w := ""
		for n := 2 + r.IntN(3); n > 0; n-- {
			w += syl[r.IntN(len(syl))]
		}
		out[i] = w
	}
	return out
}()

// sentence is n pseudo-random words, the same for the same i.
func sentence(i, n int) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	ws := make([]string, n)
	for k := range ws {
		ws[k] = words[r.IntN(len(words))]
	}
	return strings.Join(ws, " ")
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

func BenchmarkMCPEndToEnd(b *testing.B) {
	bd := setup(b, setupOpts{cacheTTL: 5 * time.Second})
	org := bd.org("bench")
	cs := bd.session(bd.agent(org, "bench", allScopes, 0))

	b.Run("store", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			start := time.Now()
			res := call(b, cs, kt.ToolStore, map[string]any{
				"title": fmt.Sprintf("%s %d", sentence(i, 4), i),
				"body":  sentence(i, 120),
				"tags":  []string{words[i%len(words)], words[(i+3)%len(words)]},
			})
			lat = append(lat, time.Since(start))
			if res.IsError {
				b.Fatal(text(res))
			}
			i++
		}
		report(b, lat)
	})

	// Make the corpus what search sees in production: 2,000 entries with
	// embeddings from the local embedder, as the worker would write them.
	ctx := context.Background()
	var n int
	bd.db.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge").Scan(&n)
	for i := n; i < 2000; i++ {
		bd.store(cs, map[string]any{"title": fmt.Sprintf("%s %d", sentence(i, 4), i), "body": sentence(i, 120)})
	}
	emb := embed.NewLocal()
	rows, err := bd.db.Pool.Query(ctx, "SELECT id, title || ' ' || body FROM knowledge WHERE embedding_status = 'pending'")
	if err != nil {
		b.Fatal(err)
	}
	type item struct {
		id   any
		text string
	}
	var items []item
	for rows.Next() {
		var it item
		rows.Scan(&it.id, &it.text)
		items = append(items, it)
	}
	rows.Close()
	for _, it := range items {
		v, err := emb.Embed(ctx, []string{it.text})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bd.db.Pool.Exec(ctx, `UPDATE knowledge SET embedding = $1, embedding_status = 'ready', embedding_model = $2, embedded_at = now() WHERE id = $3`,
			pgvector.NewVector(v[0]), emb.Model(), it.id); err != nil {
			b.Fatal(err)
		}
	}
	bd.db.Pool.Exec(ctx, "ANALYZE knowledge")

	b.Run("search", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			start := time.Now()
			// Two words of the title of a stored entry, as an agent would ask.
			q := strings.Join(strings.Fields(sentence(i*31%2000, 4))[1:3], " ")
			res := call(b, cs, kt.ToolSearch, map[string]any{"query": q, "limit": 10})
			lat = append(lat, time.Since(start))
			if res.IsError {
				b.Fatal(text(res))
			}
			i++
		}
		report(b, lat)
	})

	// The same searches straight on the domain service, to tell what MCP
	// over HTTP adds from what the search itself costs.
	b.Run("search-direct", func(b *testing.B) {
		caller := knowledge.Caller{OrgID: org}
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			q := strings.Join(strings.Fields(sentence(i*31%2000, 4))[1:3], " ")
			start := time.Now()
			if _, err := bd.svc.Search(ctx, caller, knowledge.SearchInput{Query: q, Limit: 10}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
			i++
		}
		report(b, lat)
	})
}
