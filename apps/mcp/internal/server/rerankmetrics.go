package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RerankMetrics are the reranker's series (packages/knowledge/rerank's
// Observer): made before the knowledge service, which reports to them,
// and registered on the server's registry by New (Deps.RerankMetrics).
type RerankMetrics struct {
	wait       *prometheus.HistogramVec
	candidates prometheus.Histogram
	fallbacks  *prometheus.CounterVec
}

// NewRerankMetrics makes the reranker's series.
func NewRerankMetrics() *RerankMetrics {
	return &RerankMetrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "knowledge_rerank_seconds",
			Help:    "How long a search waited for the reranker, by outcome (ok, timeout, error, breaker_open).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .2, .3, .5, 1, 2.5},
		}, []string{"outcome"}),
		candidates: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "knowledge_rerank_candidates",
			Help:    "Fused candidates sent to the reranker per search (at most RERANK_TOP_N).",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 50, 100},
		}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knowledge_rerank_fallbacks_total",
			Help: "Searches answered in the fused order although a reranker is configured, by reason (timeout, error, breaker_open).",
		}, []string{"reason"}),
	}
}

// Reranked records one search's rerank.
func (m *RerankMetrics) Reranked(_ string, candidates int, wait time.Duration, outcome string) {
	m.wait.WithLabelValues(outcome).Observe(wait.Seconds())
	m.candidates.Observe(float64(candidates))
	if outcome != "ok" {
		m.fallbacks.WithLabelValues(outcome).Inc()
	}
}

func (m *RerankMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wait, m.candidates, m.fallbacks}
}
