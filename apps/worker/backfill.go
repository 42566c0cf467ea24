package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// switchConfig is a model switch's part of the worker's environment
// (docs/embeddings.md, "Model switch").
type switchConfig struct {
	rate     float64       // EMBEDDINGS_BACKFILL_RATE: entries a second, this worker
	interval time.Duration // WORKER_BACKFILL_INTERVAL: between passes that found nothing
}

// backfillLoop gives entries the next model's vectors and cuts covered orgs
// over (knowledge.Service.Backfill), until ctx ends: a pass runs until no
// entry is left, paced to cfg.rate entries a second, then the loop waits
// cfg.interval. A failed pass (the provider down) is logged and retried
// after the interval; nothing is lost, as the work list is the data.
func backfillLoop(ctx context.Context, pool *pgxpool.Pool, current, next embed.Embedder, batch int, cfg switchConfig, m *metrics, log *slog.Logger) {
	backfilled := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "knowledge_switch_backfilled_entries_total", Help: "Entries given the next model's vectors (model switch).",
	})
	cutOver := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "knowledge_switch_orgs_cut_over_total", Help: "Orgs cut over to the next model (model switch).",
	})
	lastPass := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "knowledge_switch_last_pass_timestamp_seconds", Help: "When a backfill pass last ended without error.",
	})
	m.reg.MustRegister(backfilled, cutOver, lastPass)
	svc := knowledge.New(pool, knowledge.Options{Embedder: current, Logger: log})
	pace := func(ctx context.Context, n int) error {
		t := time.NewTimer(time.Duration(float64(n) / cfg.rate * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		rep, err := svc.Backfill(ctx, next, knowledge.BackfillOptions{Batch: batch, Wait: pace})
		backfilled.Add(float64(rep.Embedded))
		cutOver.Add(float64(len(rep.CutOver)))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Error("model switch: backfill pass failed; retrying", "next_model", next.Model(), "embedded", rep.Embedded, "err", err)
		default:
			lastPass.SetToCurrentTime()
			if rep.Embedded > 0 || len(rep.CutOver) > 0 {
				log.Info("model switch: backfill pass", "next_model", next.Model(), "embedded", rep.Embedded,
					"stale", rep.Stale, "cut_over", len(rep.CutOver))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(cfg.interval):
		}
	}
}
