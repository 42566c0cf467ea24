package knowledge_test

import (
	"context"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// BenchmarkStoreSimilar measures what store_knowledge's duplicate check
// costs a store: an org of KNOWLEDGE_SIMILAR_BENCH_SIZE entries (default
// 100,000; topical pseudo-text, indexed, keys filled in by Upkeep), then 400 stores,
// alternately with the check and without it (Options.Testing.SkipSimilar), half of
// them reworded copies of stored entries and half new text. Prints p50 and
// p99 of each and how many copies found their source.
func BenchmarkStoreSimilar(b *testing.B) {
	ctx := context.Background()
	n := 100000
	if v := os.Getenv("KNOWLEDGE_SIMILAR_BENCH_SIZE"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("KNOWLEDGE_SIMILAR_BENCH_SIZE=%q: a number of at least 1000", v)
		}
	}
	d := testenv.Postgres(b)
	svc := knowledge.New(d.Pool, knowledge.Options{})
	plain := knowledge.New(d.Pool, knowledge.Options{Testing: knowledge.TestingKnobs{SkipSimilar: true}})
	a := testfactory.Agent(ctx, b, d.Pool, nil)
	c := knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
	gen := newTextGen()
	rng := mrand.New(mrand.NewPCG(3, 4))
	type entry struct{ title, body string }
	stored := make([]entry, n)
	rows := make([][]any, n)
	for i := range n {
		title, body, tags := gen.entry(rng)
		stored[i] = entry{title, body}
		rows[i] = []any{c.OrgID, title, body, tags, c.AgentID}
	}
	t0 := time.Now()
	if _, err := d.Pool.CopyFrom(ctx, pgx.Identifier{"knowledge"}, []string{"org_id", "title", "body", "tags", "created_by_agent_id"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, "UPDATE org_quotas SET used = $2 WHERE org_id = $1", c.OrgID, n); err != nil {
		b.Fatal(err)
	}
	indexed, err := maint(svc).IndexAll(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// Entries loaded by COPY have no duplicate-check keys: the worker's
	// Upkeep fills them in (and vacuums what changed).
	for keyed := 0; keyed < n; {
		rep, err := maint(svc).Upkeep(ctx)
		if err != nil || rep.SimilarKeys == 0 {
			b.Fatalf("upkeep: %+v %v", rep, err)
		}
		keyed += rep.SimilarKeys
	}
	logf("loaded and indexed %d entries in %v (load average %s)", indexed, time.Since(t0).Round(time.Second), loadAvg())

	const probes = 400
	var with, without []time.Duration
	found, copies := 0, 0
	for i := range probes {
		var in knowledge.StoreInput
		var src string
		if i%4 < 2 {
			e := stored[rng.IntN(n)]
			w := strings.Fields(e.body)
			rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
			in = knowledge.StoreInput{Title: e.title, Body: strings.Join(w[:len(w)*8/10], " ")}
			src = e.title
		} else {
			title, body, _ := gen.entry(rng)
			in = knowledge.StoreInput{Title: title, Body: body}
		}
		s := svc
		if i%2 == 1 {
			s = plain
		}
		start := time.Now()
		r, err := s.Store(ctx, c, in)
		el := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if s == svc {
			with = append(with, el)
			if src != "" {
				copies++
				if slices.ContainsFunc(r.Similar, func(x knowledge.Similar) bool { return x.Title == src }) {
					found++
				}
			}
		} else {
			without = append(without, el)
		}
		if _, err := svc.Forget(ctx, c, r.ID, "benchmark probe", false); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(with)
	slices.Sort(without)
	p := percentile // bench_test.go
	logf("org of %d: store with the check p50 %v p99 %v; without p50 %v p99 %v; copies whose source was listed: %d of %d (load average %s)",
		n, p(with, 0.5).Round(time.Microsecond), p(with, 0.99).Round(time.Microsecond),
		p(without, 0.5).Round(time.Microsecond), p(without, 0.99).Round(time.Microsecond), found, copies, loadAvg())
	b.ReportMetric(float64(p(with, 0.5)-p(without, 0.5))/1e6, "added-p50-ms")
}
