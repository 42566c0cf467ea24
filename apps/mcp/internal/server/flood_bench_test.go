package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/ratelimit"
	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// The two benchmarks of issue 10 (figures in docs/benchmarks.md). Run:
//
//	go test -run '^$' -bench 'Flood|Fairness' -benchtime 1x ./apps/mcp/internal/server

// floodCorpus is stored straight through the service (and indexed) so the
// searches of both benchmarks do real work.
const floodCorpus = 1000

func seedCorpus(b *testing.B, bd *bundle, org knowledge.Caller) {
	b.Helper()
	ctx := context.Background()
	for i := range floodCorpus {
		title, body := benchEntry(i)
		if _, err := bd.svc.Store(ctx, org, knowledge.StoreInput{Title: title, Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := knowledge.NewMaintenance(knowledge.New(bd.db.Pool, knowledge.Options{}), knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil { // the worker's, as the owner
		b.Fatal(err)
	}
}

var rawClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}, Timeout: 60 * time.Second}

// rawPost posts body with token and returns the status and the body.
func rawPost(url, token, body string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, url+server.PathMCP, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := rawClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data), nil
}

func searchBody(q string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_knowledge","arguments":{"query":%q,"limit":10}}}`, q)
}

func storeBody(i int) string {
	title, body := benchEntry(floodCorpus + i)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_knowledge","arguments":{"title":%q,"body":%q}}}`, title, body)
}

func pct(lat []time.Duration, p float64) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
}

// sampler records the process's peak heap in use and goroutines while it
// runs (client and server share the process; the client's share is fixed).
type sampler struct {
	stop              chan struct{}
	done              chan struct{}
	peakHeap, peakGor uint64
}

func sample() *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			s.peakHeap = max(s.peakHeap, ms.HeapInuse)
			s.peakGor = max(s.peakGor, uint64(runtime.NumGoroutine()))
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) end() (heapMiB float64, goroutines uint64) {
	close(s.stop)
	<-s.done
	return float64(s.peakHeap) / (1 << 20), s.peakGor
}

// BenchmarkFlood (issue 10, point 4): 256 clients post searches as fast as
// they can for 5 s at a server with MCP_MAX_INFLIGHT 16 (clients retrying
// at once after a 503, then after 100 ms), then without a bound. Reported: calls served and shed, peak heap and goroutines, the
// first call's latency after the flood, against a quiet baseline.
func BenchmarkFlood(b *testing.B) {
	for _, mode := range []struct {
		bound int
		// pause after a 503: 0 is a hostile flood that retries at once;
		// 100 ms models clients elsewhere that back off a little (the
		// benchmark's clients share the server's two cores, so a flood
		// spinning on 503s also starves the server of CPU).
		pause time.Duration
	}{{16, 0}, {16, 100 * time.Millisecond}, {100000, 0}} {
		bound := mode.bound
		b.Run(fmt.Sprintf("max-inflight=%d/pause=%s", bound, mode.pause), func(b *testing.B) {
			bd := setup(b, setupOpts{cacheTTL: 5 * time.Second, rate: &ratelimit.Limits{},
				config: func(c *server.Config) { c.MaxInFlight = bound }})
			org := bd.org("flood")
			ag := bd.agent(org, "a", allScopes, 0)
			seedCorpus(b, bd, knowledge.Caller{OrgID: org, AgentID: ag.id})
			quiet := make([]time.Duration, 0, 50)
			for i := range 50 {
				t0 := time.Now()
				if code, body, err := rawPost(bd.url, ag.token, searchBody(benchQuery(i))); err != nil || code != 200 {
					b.Fatalf("quiet search: %d %v %s", code, err, body)
				}
				quiet = append(quiet, time.Since(t0))
			}
			runtime.GC()
			smp := sample()
			var served, shed, failed atomic.Int64
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var wg sync.WaitGroup
			for c := range 256 {
				wg.Go(func() {
					for i := 0; ctx.Err() == nil; i++ {
						code, _, err := rawPost(bd.url, ag.token, searchBody(benchQuery(c*1000+i)))
						switch {
						case err == nil && code == 200:
							served.Add(1)
						case err == nil && code == 503:
							shed.Add(1)
							if mode.pause > 0 {
								time.Sleep(mode.pause)
							}
						default:
							failed.Add(1)
						}
					}
				})
			}
			// A well-behaved client during the flood: how long until it
			// has an answer (200, or a 503 it can act on).
			var probe []time.Duration
			probeShed := 0
			time.Sleep(500 * time.Millisecond)
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				code, _, err := rawPost(bd.url, ag.token, searchBody(benchQuery(i)))
				if err == nil {
					probe = append(probe, time.Since(t0))
					if code == 503 {
						probeShed++
					}
				}
			}
			wg.Wait()
			cancel()
			heap, gor := smp.end()
			t0 := time.Now()
			code, _, err := rawPost(bd.url, ag.token, searchBody(benchQuery(7)))
			after := time.Since(t0)
			if err != nil || code != 200 {
				b.Fatalf("first call after the flood: %d %v", code, err)
			}
			fmt.Printf("flood max-inflight=%d pause-after-503=%s: quiet p50 %.1f ms p99 %.1f ms; 5 s of 256 clients: %d served (%.0f/s), %d shed (503), %d failed; peak heap %.0f MiB, peak goroutines %d; a probe client's answers during the flood: %d, p50 %.1f ms, p99 %.1f ms, %d of them 503; first call after: %.1f ms\n",
				bound, mode.pause, pct(quiet, .5), pct(quiet, .99), served.Load(), float64(served.Load())/5, shed.Load(), failed.Load(), heap, gor, len(probe), pct(probe, .5), pct(probe, .99), probeShed, float64(after.Microseconds())/1000)
			b.ReportMetric(float64(served.Load())/5, "served/s")
			b.ReportMetric(float64(shed.Load())/5, "shed/s")
			b.ReportMetric(heap, "peak-heap-MiB")
			b.ReportMetric(float64(gor), "peak-goroutines")
			b.ReportMetric(float64(after.Microseconds())/1000, "after-ms")
			b.ReportMetric(pct(probe, .99), "probe-p99-ms")
		})
	}
}

// BenchmarkRateLimitFairness (issue 10, point 9): one agent floods stores
// at 10x its write limit while another agent of the same org searches;
// the searcher's p50/p99 quiet, during the flood with the limit, and
// during the same flood with the batch agent unlimited.
func BenchmarkRateLimitFairness(b *testing.B) {
	const limit = 120 // stores a minute: 2/s
	const floodRate = 10 * limit / 60
	bd := setup(b, setupOpts{cacheTTL: 5 * time.Second, rate: &ratelimit.Limits{}})
	ctx := context.Background()
	org := bd.org("fair")
	searcher := bd.agent(org, "interactive", allScopes, 0)
	limited := bd.agent(org, "batch", allScopes, 0)
	unlimited := bd.agent(org, "batch-unlimited", allScopes, 0)
	if _, err := bd.tenancy.SetRateLimit(ctx, org, tenancy.RateLimit{Scope: tenancy.RateScopeAgent, AgentID: &limited.id, Kind: tenancy.RateWrite, PerMinute: perMinute(limit)}); err != nil {
		b.Fatal(err)
	}
	seedCorpus(b, bd, knowledge.Caller{OrgID: org, AgentID: searcher.id})
	searches := func(n int) []time.Duration {
		lat := make([]time.Duration, 0, n)
		for i := range n {
			t0 := time.Now()
			code, body, err := rawPost(bd.url, searcher.token, searchBody(benchQuery(i*31%floodCorpus)))
			if err != nil || code != 200 || strings.Contains(body, `"isError":true`) {
				b.Fatalf("search: %d %v %s", code, err, body)
			}
			lat = append(lat, time.Since(t0))
		}
		return lat
	}
	searches(20) // warm
	quiet := searches(300)
	// flood posts stores as floodRate a second from 8 goroutines (each
	// paced, none waiting for another) until stop.
	flood := func(token string) (stop func() (ok, limitedN int64)) {
		fctx, cancel := context.WithCancel(ctx)
		var okN, limN atomic.Int64
		var wg sync.WaitGroup
		var seq atomic.Int64
		for range 8 {
			wg.Go(func() {
				t := time.NewTicker(time.Second * 8 / floodRate)
				defer t.Stop()
				for {
					select {
					case <-fctx.Done():
						return
					case <-t.C:
					}
					_, body, err := rawPost(bd.url, token, storeBody(int(seq.Add(1))))
					switch {
					case err != nil:
					case strings.Contains(body, "rate_limited"):
						limN.Add(1)
					case !strings.Contains(body, `"isError":true`):
						okN.Add(1)
					}
				}
			})
		}
		return func() (int64, int64) { cancel(); wg.Wait(); return okN.Load(), limN.Load() }
	}
	stop := flood(limited.token)
	time.Sleep(2 * time.Second) // past the burst
	during := searches(300)
	okL, limL := stop()
	stop = flood(unlimited.token)
	time.Sleep(2 * time.Second)
	duringUnlimited := searches(300)
	okU, limU := stop()
	fmt.Printf("fairness: searcher quiet p50 %.1f ms p99 %.1f ms; with the batch agent flooding at %d stores/s (10x its %d/min): p50 %.1f ms p99 %.1f ms (p99 %.2fx quiet; %d stores done, %d rate_limited); same flood unlimited: p50 %.1f ms p99 %.1f ms (p99 %.2fx; %d stores done, %d rate_limited)\n",
		pct(quiet, .5), pct(quiet, .99), floodRate, limit, pct(during, .5), pct(during, .99), pct(during, .99)/pct(quiet, .99), okL, limL,
		pct(duringUnlimited, .5), pct(duringUnlimited, .99), pct(duringUnlimited, .99)/pct(quiet, .99), okU, limU)
	b.ReportMetric(pct(quiet, .99), "quiet-p99-ms")
	b.ReportMetric(pct(during, .99), "flood-p99-ms")
	b.ReportMetric(pct(during, .99)/pct(quiet, .99), "p99-ratio")
	b.ReportMetric(pct(duringUnlimited, .99)/pct(quiet, .99), "unlimited-p99-ratio")
}
