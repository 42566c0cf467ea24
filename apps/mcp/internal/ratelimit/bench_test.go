package ratelimit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// BenchmarkAllow is what the limiter adds to every MCP call in production:
// the MCP benchmark (server.BenchmarkMCPEndToEnd) runs without limits, so
// that one agent calling as fast as it can is not refused. Here one agent's
// calls, one after the other, under limits too high to refuse any: the
// agent's GCRA, then the org's, two round trips to a real Redis on
// loopback, with the settings cached (as after an agent's first call).
//
//	go test -run '^$' -bench BenchmarkAllow -benchtime 5000x ./apps/mcp/internal/ratelimit
func BenchmarkAllow(b *testing.B) {
	r := testenv.LeaseRedis(b)
	huge := 1 << 30
	l := New(r.Client, nil, Options{Defaults: Limits{&huge, &huge, &huge, &huge}})
	ctx := context.Background()
	org, agent := uuid.New(), uuid.New()
	for range 100 { // warm: connections, the scripts loaded
		if d := l.Allow(ctx, org, agent, tenancy.RateRead); !d.Allowed {
			b.Fatalf("refused: %+v", d)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		d := l.Allow(ctx, org, agent, tenancy.RateRead)
		lat = append(lat, time.Since(t0))
		if !d.Allowed {
			b.Fatalf("refused: %+v", d)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	us := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(us(0.50), "p50-us")
	b.ReportMetric(us(0.99), "p99-us")
}
