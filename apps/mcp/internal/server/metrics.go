package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series, on a registry of its own so
// several servers (tests) never collide.
type metrics struct {
	reg           *prometheus.Registry
	toolCalls     *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	resReads      *prometheus.CounterVec
	resDuration   *prometheus.HistogramVec
	httpRequests  *prometheus.CounterVec
	inflightCalls prometheus.Gauge
	shed          prometheus.Counter
	unavailable   *prometheus.CounterVec
	rateLimited   *prometheus.CounterVec
	rateFailOpen  *prometheus.CounterVec
}

// Limited and FailedOpen make metrics a ratelimit.Observer.
func (m *metrics) Limited(level, kind string) { m.rateLimited.WithLabelValues(level, kind).Inc() }
func (m *metrics) FailedOpen(reason string)   { m.rateFailOpen.WithLabelValues(reason).Inc() }

var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_tool_calls_total",
			Help: "MCP tool calls by tool and outcome (ok or an error code).",
		}, []string{"tool", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_tool_call_duration_seconds",
			Help:    "Latency of MCP tool calls by tool and outcome.",
			Buckets: latencyBuckets,
		}, []string{"tool", "outcome"}),
		resReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_resource_reads_total",
			Help: "MCP resource reads by resource and outcome.",
		}, []string{"resource", "outcome"}),
		resDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_resource_read_duration_seconds",
			Help:    "Latency of MCP resource reads by resource and outcome.",
			Buckets: latencyBuckets,
		}, []string{"resource", "outcome"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_http_requests_total",
			Help: "HTTP requests by route and status code (401: refused tokens, 403: missing scopes, 413: bodies too large).",
		}, []string{"route", "code"}),
		inflightCalls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcp_inflight_calls",
			Help: "Tool calls and resource reads in progress.",
		}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_requests_shed_total",
			Help: "MCP requests answered 503 at once because MCP_MAX_INFLIGHT requests were in flight.",
		}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_dependency_unavailable_total",
			Help: "Requests answered 503 (HTTP) because a dependency failed or did not answer in time, by dependency.",
		}, []string{"dependency"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_rate_limited_total",
			Help: "Calls refused by a rate limit, by the limit that refused them (agent or org) and kind (read or write).",
		}, []string{"level", "kind"}),
		rateFailOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_rate_limit_fail_open_total",
			Help: "Calls let through unchecked because the rate limiter could not read Redis (redis) or its settings (settings) in time.",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(m.rateLimited, m.rateFailOpen, m.toolCalls, m.toolDuration, m.resReads, m.resDuration, m.httpRequests, m.inflightCalls, m.shed, m.unavailable,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
