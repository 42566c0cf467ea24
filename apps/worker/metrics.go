package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// metrics implements jobs.Observer with Prometheus collectors.
type metrics struct {
	reg       *prometheus.Registry
	tasks     *prometheus.CounterVec
	entries   *prometheus.CounterVec
	batch     prometheus.Histogram
	provider  *prometheus.HistogramVec
	lag       prometheus.Histogram
	requeued  prometheus.Counter
	pending   prometheus.Gauge
	oldest    prometheus.Gauge
	backlogOK prometheus.Gauge

	indexed     prometheus.Counter
	indexPasses *prometheus.CounterVec
	indexPass   prometheus.Histogram
	indexOK     prometheus.Gauge
	upkeeps     *prometheus.CounterVec
	upkeepPass  *prometheus.CounterVec
	upkeepTime  prometheus.Histogram

	auditPruned prometheus.Counter

	similarChecks *prometheus.CounterVec

	switchBackfilled prometheus.Counter
	switchCutOver    prometheus.Counter
	switchLastPass   prometheus.Gauge
	switchPasses     *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knowledge_embed_tasks_total", Help: "Embedding tasks handled, by task type and result (done, failed).",
		}, []string{"type", "result"}),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knowledge_embed_entries_total", Help: "Entries by outcome: ready, failed, or stale (the job found the entry gone or moved on).",
		}, []string{"result"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "knowledge_embed_batch_size", Help: "Entries sent to the provider per call.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		provider: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "knowledge_embed_provider_seconds", Help: "Latency of one embedding provider call, by result (ok, error).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"result"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "knowledge_embed_store_to_ready_seconds", Help: "Time from the embedding request (store or re-embed) to the vector written.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
		}),
		requeued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "knowledge_embed_reconciler_requeued_total", Help: "Pending entries the reconciler enqueued again.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "knowledge_embed_pending_entries", Help: "Entries waiting for their embedding (the backlog).",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "knowledge_embed_pending_oldest_seconds", Help: "Age of the oldest pending embedding request.",
		}),
		backlogOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "knowledge_embed_backlog_last_refresh_timestamp_seconds", Help: "When the backlog gauges were last refreshed.",
		}),

		indexed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "knowledge_index_entries_total", Help: "Queued entries the indexer moved into the lexical (BM25) index.",
		}),
		indexPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knowledge_index_passes_total", Help: "Indexer passes, by result (ok, error).",
		}, []string{"result"}),
		indexPass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "knowledge_index_pass_seconds", Help: "Duration of one indexer pass (it drains the whole queue).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		indexOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "knowledge_index_last_success_timestamp_seconds", Help: "When an indexer pass last succeeded.",
		}),
		upkeeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knowledge_upkeep_runs_total", Help: "Maintenance run by the upkeep, by table and operation (vacuum, analyze; a VACUUM (ANALYZE) counts as both).",
		}, []string{"table", "op"}),
		upkeepPass: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knowledge_upkeep_passes_total", Help: "Upkeep passes, by result (ok, error).",
		}, []string{"result"}),
		upkeepTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "knowledge_upkeep_pass_seconds", Help: "Duration of one upkeep pass.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}),
	}
	m.reg.MustRegister(m.tasks, m.entries, m.batch, m.provider, m.lag, m.requeued, m.pending, m.oldest, m.backlogOK,
		m.indexed, m.indexPasses, m.indexPass, m.indexOK, m.upkeeps, m.upkeepPass, m.upkeepTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.auditPruned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "knowledge_audit_records_pruned_total",
		Help: "Audit records dropped by the retention (whole days past AUDIT_RETENTION).",
	})
	m.reg.MustRegister(m.auditPruned)
	m.switchBackfilled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "knowledge_switch_backfilled_entries_total", Help: "Entries given the next model's vectors by this worker's passes (model switch).",
	})
	m.switchCutOver = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "knowledge_switch_orgs_cut_over_total", Help: "Orgs cut over to the next model by this worker's passes (model switch).",
	})
	m.switchLastPass = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "knowledge_switch_last_pass_timestamp_seconds", Help: "When a backfill pass of this worker last ended without error.",
	})
	m.switchPasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "knowledge_switch_passes_total", Help: "Backfill passes run by this worker, by result (ok, error).",
	}, []string{"result"})
	m.reg.MustRegister(m.switchBackfilled, m.switchCutOver, m.switchLastPass, m.switchPasses)
	m.similarChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "knowledge_similar_checks_total",
		Help: "Duplicate checks by meaning finished after embedding (stores that did not wait for the provider), by result: done (recorded), error (left pending for the sweep).",
	}, []string{"result"})
	m.reg.MustRegister(m.similarChecks)
	return m
}

func (m *metrics) SimilarChecked(n int, err error) {
	m.similarChecks.WithLabelValues("done").Add(float64(n))
	if err != nil {
		m.similarChecks.WithLabelValues("error").Inc()
	}
}

func (m *metrics) SwitchPass(rep knowledge.BackfillReport, err error) {
	m.switchBackfilled.Add(float64(rep.Embedded))
	m.switchCutOver.Add(float64(len(rep.CutOver)))
	m.switchPasses.WithLabelValues(result(err)).Inc()
	if err == nil {
		m.switchLastPass.SetToCurrentTime()
	}
}

func (m *metrics) TaskDone(t string)            { m.tasks.WithLabelValues(t, "done").Inc() }
func (m *metrics) TaskFailed(t string, _ error) { m.tasks.WithLabelValues(t, "failed").Inc() }
func (m *metrics) Batch(n int)                  { m.batch.Observe(float64(n)) }
func (m *metrics) ProviderCall(d time.Duration, err error) {
	m.provider.WithLabelValues(result(err)).Observe(d.Seconds())
}
func (m *metrics) EntryReady(lag time.Duration) {
	m.entries.WithLabelValues("ready").Inc()
	m.lag.Observe(lag.Seconds())
}
func (m *metrics) EntryFailed()    { m.entries.WithLabelValues("failed").Inc() }
func (m *metrics) JobsStale(n int) { m.entries.WithLabelValues("stale").Add(float64(n)) }
func (m *metrics) Requeued(n int)  { m.requeued.Add(float64(n)) }

func (m *metrics) Indexed(n int, d time.Duration, err error) {
	m.indexed.Add(float64(n))
	m.indexPass.Observe(d.Seconds())
	m.indexPasses.WithLabelValues(result(err)).Inc()
	if err == nil {
		m.indexOK.SetToCurrentTime()
	}
}

func (m *metrics) Upkeep(rep knowledge.UpkeepReport, d time.Duration, err error) {
	for _, t := range rep.Vacuumed {
		m.upkeeps.WithLabelValues(t, "vacuum").Inc()
	}
	for _, t := range rep.Analyzed {
		m.upkeeps.WithLabelValues(t, "analyze").Inc()
	}
	// Per-org vector indexes, labelled by index name (one per large org).
	for _, ix := range rep.Built {
		m.upkeeps.WithLabelValues(ix, "build_vector_index").Inc()
	}
	for _, ix := range rep.Dropped {
		m.upkeeps.WithLabelValues(ix, "drop_invalid_index").Inc()
	}
	m.upkeepTime.Observe(d.Seconds())
	m.upkeepPass.WithLabelValues(result(err)).Inc()
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

var _ jobs.Observer = (*metrics)(nil)

// refreshBacklog sets the backlog gauges every interval until ctx is done.
// A query per interval, not per scrape: scrapes stay cheap whatever their rate.
func (m *metrics) refreshBacklog(ctx context.Context, pool *pgxpool.Pool, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	outbox := knowledge.NewOutbox(pool)
	for {
		b, err := outbox.Backlog(ctx)
		if err == nil {
			m.pending.Set(float64(b.Pending))
			m.oldest.Set(b.Oldest.Seconds())
			m.backlogOK.SetToCurrentTime()
		} else if ctx.Err() == nil {
			log.Warn("backlog refresh failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
