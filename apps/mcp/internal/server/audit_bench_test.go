package server_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// BenchmarkAuditOverhead: what the audit trail adds to a call. Two servers,
// each with its own database holding the same org of 1,000 long entries
// (indexed), one with the audit trail and one without; the same calls go to
// both in turns (A B, then B A, so drift and noise fall on both alike), 600
// of each kind (AUDIT_BENCH_SAMPLES) after 50 warm-up calls. The overhead is the difference of
// the p50s; it includes the writer's COPYs running on the same two cores
// and the same PostgreSQL.
//
//	go test -run '^$' -bench AuditOverhead -benchtime 1x ./apps/mcp/internal/server
func BenchmarkAuditOverhead(b *testing.B) {
	const corpus = 1000
	samples := 600
	if v, err := strconv.Atoi(os.Getenv("AUDIT_BENCH_SAMPLES")); err == nil && v > 0 {
		samples = v
	}
	type side struct {
		bd   *bundle
		cs   *mcp.ClientSession
		ids  []uuid.UUID
		name string
	}
	ctx := context.Background()
	mk := func(audit bool, name string) *side {
		bd := setup(b, setupOpts{cacheTTL: 5 * time.Second, rate: &ratelimit.Limits{}, audit: audit})
		org := bd.org("bench")
		ag := bd.agent(org, "bench", allScopes, 0)
		s := &side{bd: bd, cs: bd.session(ag), name: name}
		author := knowledge.Caller{OrgID: org, AgentID: ag.id}
		for i := range corpus {
			title, body := benchEntry(i)
			r, err := bd.svc.Store(ctx, author, knowledge.StoreInput{Title: title, Body: body})
			if err != nil {
				b.Fatal(err)
			}
			s.ids = append(s.ids, r.ID)
		}
		if _, err := knowledge.NewMaintenance(knowledge.New(bd.db.Pool, knowledge.Options{}), knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil { // the worker's, as the owner
			b.Fatal(err)
		}
		return s
	}
	sides := []*side{mk(false, "without"), mk(true, "with")}
	calls := []struct {
		name string
		args func(s *side, i int) (string, map[string]any)
	}{
		{"get_knowledge", func(s *side, i int) (string, map[string]any) {
			return kt.ToolGet, map[string]any{"id": s.ids[i%corpus].String()}
		}},
		{"search_knowledge", func(s *side, i int) (string, map[string]any) {
			return kt.ToolSearch, map[string]any{"query": benchQuery(i * 31 % corpus), "limit": 10}
		}},
		{"store_knowledge", func(s *side, i int) (string, map[string]any) {
			title, body := benchEntry(corpus + i)
			return kt.ToolStore, map[string]any{"title": title, "body": body, "tags": []string{"topic-" + fmt.Sprint(i%20)}}
		}},
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			lat := [2][]time.Duration{}
			for i := range 50 + samples {
				order := []int{0, 1}
				if i%2 == 1 {
					order = []int{1, 0}
				}
				for _, k := range order {
					s := sides[k]
					tool, args := c.args(s, i)
					start := time.Now()
					res := call(b, s.cs, tool, args)
					d := time.Since(start)
					if res.IsError {
						b.Fatal(text(res))
					}
					if i >= 50 {
						lat[k] = append(lat[k], d)
					}
				}
			}
			p := func(l []time.Duration, q float64) float64 {
				l = slices.Clone(l)
				slices.Sort(l)
				return float64(l[int(q*float64(len(l)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(p(lat[0], .5), "p50-ms-without")
			b.ReportMetric(p(lat[1], .5), "p50-ms-with")
			b.ReportMetric(p(lat[1], .5)-p(lat[0], .5), "p50-overhead-ms")
			b.ReportMetric(p(lat[0], .95), "p95-ms-without")
			b.ReportMetric(p(lat[1], .95), "p95-ms-with")
			fmt.Printf("%s: load average %s\n", c.name, loadAvg())
		})
	}
	// Every call of the audited side is recorded once its writer drains.
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sides[1].bd.srv.Shutdown(ctx2); err != nil {
		b.Fatal(err)
	}
	var n int
	if err := sides[1].bd.db.Pool.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n); err != nil {
		b.Fatal(err)
	}
	if want := len(calls) * (50 + samples); n != want {
		b.Fatalf("%d audit records, want %d", n, want)
	}
	fmt.Printf("audit records written: %d\n", n)
}
