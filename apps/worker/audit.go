package main

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// The audit trail's retention (docs/operators.md, "Audit trail"): the
// worker drops the days of records older than AUDIT_RETENTION (default 90
// days; a day leaves once all of it is older) at start and then every
// AUDIT_PRUNE_INTERVAL (default 1 h), and makes the days ahead
// (tenancy.AuditDaysAhead) that the MCP servers will write into.

type auditConfig struct {
	retention, interval time.Duration
}

func parseAuditConfig(e *appenv.Env) auditConfig {
	c := auditConfig{retention: tenancy.DefaultAuditRetention}
	if v := strings.TrimSpace(e.Raw("AUDIT_RETENTION")); v != "" {
		d, err := parseDays(v)
		if err != nil || d < time.Hour {
			e.Fail("AUDIT_RETENTION", "must be a duration of at least 1h, in days (90d) or as a Go duration (2160h)")
		} else {
			c.retention = d
		}
	}
	c.interval = e.Duration("AUDIT_PRUNE_INTERVAL", time.Hour, time.Second, 0)
	return c
}

// parseDays reads "90d" or any Go duration.
func parseDays(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

// pruneAudit runs the retention until ctx ends.
func pruneAudit(ctx context.Context, ten *tenancy.Service, c auditConfig, m *metrics, log *slog.Logger) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		now := time.Now()
		n, err := ten.PruneAudit(pctx, now.Add(-c.retention))
		if err == nil {
			_, err = ten.EnsureAuditDays(pctx, now, now.Add(tenancy.AuditDaysAhead*24*time.Hour))
		}
		cancel()
		m.auditPruned.Add(float64(n))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("audit retention pass failed", "dropped", n, "err", err)
		case n > 0:
			log.Info("audit retention", "dropped", n, "retention", c.retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
