package knowledge_test

import (
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// BenchmarkRowSecurity measures what row-level security costs a caller's
// store and search: the same calls, on the same database and corpus (an
// org of KNOWLEDGE_RLS_BENCH_SIZE entries, default 5,000, embedded and
// indexed, never vacuumed or analyzed), through a Service connected as
// knowledge_app (the policies apply, db.Scoped sets the org) and one
// connected as the owner (exempt). Calls alternate between the two, and
// which goes first alternates, so both meet the same load and caches: the
// figures compare within one run, whatever else the machine does.
// KNOWLEDGE_RLS_BENCH_SAMPLES sets the calls of each kind (default 400).
func BenchmarkRowSecurity(b *testing.B) {
	n := 5000
	if v := os.Getenv("KNOWLEDGE_RLS_BENCH_SIZE"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("KNOWLEDGE_RLS_BENCH_SIZE=%q: a whole number of at least 100", v)
		}
	}
	samples := 400
	if v := os.Getenv("KNOWLEDGE_RLS_BENCH_SAMPLES"); v != "" {
		var err error
		if samples, err = strconv.Atoi(v); err != nil || samples < 10 {
			b.Fatalf("KNOWLEDGE_RLS_BENCH_SAMPLES=%q: a whole number of at least 10", v)
		}
	}
	bd := setup(b)
	ctx := bd.ctx
	gen := newTextGen()
	rng := mrand.New(mrand.NewPCG(24, 5))
	t0 := time.Now()
	batch := &pgx.Batch{}
	for range n {
		title, body, tags := gen.entry(rng)
		batch.Queue(`INSERT INTO knowledge (org_id, title, body, tags, created_by_agent_id) VALUES ($1, $2, $3, $4, $5)`,
			bd.org, title, body, tags, bd.alice.AgentID)
	}
	if err := bd.pool.SendBatch(ctx, batch).Close(); err != nil {
		b.Fatal(err)
	}
	rows, err := bd.pool.Query(ctx, "SELECT id FROM knowledge WHERE org_id = $1", bd.org)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		b.Fatal(err)
	}
	h := jobs.NewEmbedHandler(bd.pool, embed.NewLocal(), jobs.HandlerOptions{})
	for part := range slices.Chunk(ids, 64) {
		js := make([]knowledge.EmbeddingJob, len(part))
		for i, id := range part {
			js[i] = knowledge.EmbeddingJob{OrgID: bd.org, EntryID: id, Generation: 1}
		}
		if err := h.Process(ctx, js); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := maint(bd.ops).EnsureVectorIndex(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := maint(bd.ops).IndexAll(ctx); err != nil {
		b.Fatal(err)
	}
	logf("row security: %d entries loaded, embedded and indexed in %v; load %s", n, time.Since(t0).Round(time.Millisecond), loadAvg())

	var storeApp, storeOwner, searchApp, searchOwner []time.Duration
	for i := range samples {
		if i%10 == 0 { // the worker's indexer, as often as in a deployment (outside the timings)
			if _, err := maint(bd.ops).IndexAll(ctx); err != nil {
				b.Fatal(err)
			}
		}
		title, body, tags := gen.entry(rng)
		q := gen.query(rng)
		sides := []struct {
			svc           *knowledge.Service
			store, search *[]time.Duration
		}{{bd.svc, &storeApp, &searchApp}, {bd.ops, &storeOwner, &searchOwner}}
		if i%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for k, s := range sides {
			t := time.Now()
			if _, err := s.svc.Store(ctx, bd.alice, knowledge.StoreInput{Title: fmt.Sprintf("%s (%d.%d)", title, i, k), Body: body, Tags: tags}); err != nil {
				b.Fatal(err)
			}
			*s.store = append(*s.store, time.Since(t))
		}
		for _, s := range sides {
			t := time.Now()
			if _, err := s.svc.Search(ctx, bd.alice, knowledge.SearchInput{Query: q, Limit: new(10)}); err != nil {
				b.Fatal(err)
			}
			*s.search = append(*s.search, time.Since(t))
		}
	}
	p50 := func(l []time.Duration) float64 {
		slices.Sort(l)
		return float64(percentile(l, 0.5)) / float64(time.Millisecond)
	}
	sa, so, qa, qo := p50(storeApp), p50(storeOwner), p50(searchApp), p50(searchOwner)
	logf("row security: store p50 %.2f ms (knowledge_app) vs %.2f ms (owner), %+.1f%%; search p50 %.2f ms vs %.2f ms, %+.1f%%; %d calls each; load %s",
		sa, so, 100*(sa/so-1), qa, qo, 100*(qa/qo-1), samples, loadAvg())
	b.ReportMetric(sa, "store-app-p50-ms")
	b.ReportMetric(so, "store-owner-p50-ms")
	b.ReportMetric(qa, "search-app-p50-ms")
	b.ReportMetric(qo, "search-owner-p50-ms")
}
