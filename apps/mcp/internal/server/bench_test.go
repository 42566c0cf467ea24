package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"

	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// The end-to-end benchmark: one go-sdk client calling the server over real
// HTTP (loopback), the server calling real Postgres and Redis. It measures
// what an agent sees per call: JSON-RPC encoding, auth (cached), edge
// checks, the domain call, and the answer.
//
//	go test -run '^$' -bench . ./apps/mcp/...

var words = []string{"postgres", "redis", "migration", "deploy", "latency", "queue", "index", "vector", "token", "quota",
	"timeout", "retry", "cache", "schema", "shard", "replica", "backup", "alert", "metric", "trace"}

func sentence(i, n int) string {
	s := ""
	for k := 0; k < n; k++ {
		if k > 0 {
			s += " "
		}
		s += words[(i*7+k*13+k*k)%len(words)]
	}
	return s
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
			res := call(b, cs, kt.ToolSearch, map[string]any{"query": sentence(i, 3), "limit": 10})
			lat = append(lat, time.Since(start))
			if res.IsError {
				b.Fatal(text(res))
			}
			i++
		}
		report(b, lat)
	})
}
