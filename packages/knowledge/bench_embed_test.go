package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// BenchmarkSearchRemoteEmbedder measures what a provider behind HTTP costs
// a search, and what the query vector cache and the embedding budget give
// back: 3,000 entries in one org, searched through Service.Search with
//
//   - local: the local embedder (the reference);
//   - remote/cold: an OpenAI-compatible provider (httptest, the local
//     embedder's vectors) answering in 100 ms, every query new;
//   - remote/warm: the same queries again (the cache in this process);
//   - remote/warm-replica: the same queries on a second Service sharing
//     only Redis (another MCP replica);
//   - remote/over-budget: a provider answering in 3 s, budget 1 s (the
//     default): every search answers from the lexical lists.
func BenchmarkSearchRemoteEmbedder(b *testing.B) {
	ctx := context.Background()
	db := testenv.Postgres(b)
	rd := testenv.LeaseRedis(b)
	a := testfactory.Agent(ctx, b, db.Pool, nil)
	c := knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
	local := embed.NewLocal()
	gen := newTextGen()
	rng := mrand.New(mrand.NewPCG(1, 2))
	svc := knowledge.New(db.Pool, knowledge.Options{})
	storeEmbedded(b, db.Pool, svc, c, 3000, gen, rng)
	provider := func(delay time.Duration) embed.Embedder {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Input []string `json:"input"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			vs, _ := local.Embed(r.Context(), req.Input)
			type item struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			}
			out := struct {
				Data []item `json:"data"`
			}{}
			for i, v := range vs {
				out.Data = append(out.Data, item{i, v})
			}
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
			json.NewEncoder(w).Encode(out)
		}))
		b.Cleanup(srv.Close)
		e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL, Model: local.Model(), MaxAttempts: 1})
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	// Same model name as the entries' vectors: the calibration and the
	// cache key are the local embedder's.
	cal := knowledge.CalibrationFor(local.Model())
	fast := provider(100 * time.Millisecond)
	remote := knowledge.New(db.Pool, knowledge.Options{Embedder: fast, Redis: rd.Client, Config: knowledge.Config{VectorCalibration: &cal}})
	replica := knowledge.New(db.Pool, knowledge.Options{Embedder: fast, Redis: rd.Client, Config: knowledge.Config{VectorCalibration: &cal}})
	slow := knowledge.New(db.Pool, knowledge.Options{Embedder: provider(3 * time.Second), Config: knowledge.Config{VectorCalibration: &cal}})
	queries := make([]string, 200)
	qrng := mrand.New(mrand.NewPCG(3, 4))
	for i := range queries {
		queries[i] = fmt.Sprintf("%s %d", gen.query(qrng), i) // distinct
	}
	run := func(name string, s *knowledge.Service, qs []string, wantVector bool) {
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, len(qs))
			for _, q := range qs {
				t0 := time.Now()
				r, err := s.Search(ctx, c, knowledge.SearchInput{Query: q})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				if r.VectorSearch != wantVector {
					b.Fatalf("%q: vectorSearch %v, want %v (%s)", q, r.VectorSearch, wantVector, r.Notice)
				}
			}
			reportLatencies(b, lat)
		})
	}
	for range 20 { // warm the pool's connections
		if _, err := svc.Search(ctx, c, knowledge.SearchInput{Query: uuid.NewString()}); err != nil {
			b.Fatal(err)
		}
	}
	run("local", svc, queries, true)
	run("remote/cold", remote, queries, true)
	run("remote/warm", remote, queries, true)
	run("remote/warm-replica", replica, queries, true)
	run("remote/over-budget", slow, queries[:20], false)
}

// storeEmbedded stores n generated entries through svc as c, each
// embedded by the local embedder at once (as the worker would), then
// indexes and upkeeps the org: a small searchable org for the benchmarks
// that compare providers around one search.
func storeEmbedded(b *testing.B, pool *pgxpool.Pool, svc *knowledge.Service, c knowledge.Caller, n int, gen *textGen, rng *mrand.Rand) {
	b.Helper()
	ctx := context.Background()
	local := embed.NewLocal()
	for range n {
		title, body, tags := gen.entry(rng)
		r, err := svc.Store(ctx, c, knowledge.StoreInput{Title: title, Body: body, Tags: tags})
		if err != nil {
			b.Fatal(err)
		}
		vs, err := local.Embed(ctx, []string{title + "\n\n" + body})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE knowledge SET embedding = $3, embedding_status = 'ready',
			embedding_model = $4, embedded_at = now() WHERE org_id = $1 AND id = $2`,
			c.OrgID, r.ID, pgvector.NewVector(vs[0]), local.Model()); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := maint(svc).IndexAll(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := maint(svc).Upkeep(ctx); err != nil {
		b.Fatal(err)
	}
}
