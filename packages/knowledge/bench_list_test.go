package knowledge_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// BenchmarkList measures list_knowledge's pages at depth: an org of
// KNOWLEDGE_LIST_BENCH_SIZE entries (default 100,000) beside another org
// of the same size, loaded by one INSERT and never analyzed; the first page
// and the 1,000th page (pages of 20, reached by their cursors), each
// fetched 200 times, with and without a filter.
func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	n := 100000
	if v := os.Getenv("KNOWLEDGE_LIST_BENCH_SIZE"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 25000 {
			b.Fatalf("KNOWLEDGE_LIST_BENCH_SIZE=%q: a number of at least 25000", v)
		}
	}
	d := testenv.Postgres(b)
	svc := knowledge.New(d.Pool, knowledge.Options{})
	var callers []knowledge.Caller
	for _, name := range []string{"big", "neighbour"} {
		a := testfactory.Agent(ctx, b, d.Pool, &testfactory.AgentOpts{OrgID: testfactory.Org(ctx, b, d.Pool, &testfactory.OrgOpts{Name: name}).ID})
		c := knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
		t0 := time.Now()
		if _, err := d.Pool.Exec(ctx, `INSERT INTO knowledge (org_id, title, body, tags, created_by_agent_id, created_at)
			SELECT $1, 'entry ' || i, repeat('words of entry ' || i || ' ', 40),
			       CASE WHEN i % 10 = 0 THEN ARRAY['tenth'] ELSE ARRAY[]::text[] END,
			       $2, now() - make_interval(secs => i)
			FROM generate_series(1, $3::int) i`, c.OrgID, c.AgentID, n); err != nil {
			b.Fatal(err)
		}
		logf("loaded %d entries into org %s in %v", n, name, time.Since(t0).Round(time.Millisecond))
		callers = append(callers, c)
	}
	big := callers[0]
	for _, tc := range []struct {
		name string
		in   knowledge.ListInput
	}{
		{"all", knowledge.ListInput{}},
		{"tag-a-tenth", knowledge.ListInput{Tags: []string{"tenth"}}},
	} {
		cursor := ""
		in := tc.in
		for page := 1; page < 1000; page++ {
			r, err := svc.List(ctx, big, in)
			if err != nil {
				b.Fatal(err)
			}
			in.Cursor = r.NextCursor
		}
		cursor = in.Cursor
		for _, depth := range []struct {
			name   string
			cursor string
		}{{"page-1", ""}, {"page-1000", cursor}} {
			b.Run(tc.name+"/"+depth.name, func(b *testing.B) {
				in := tc.in
				in.Cursor = depth.cursor
				lat := make([]time.Duration, 0, 200)
				for range 200 {
					t0 := time.Now()
					r, err := svc.List(ctx, big, in)
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					if len(r.Hits) != knowledge.DefaultListLimit {
						b.Fatalf("%d hits", len(r.Hits))
					}
				}
				reportLatencies(b, lat)
			})
		}
	}
}
