package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// TestPruneAuditLoop: the worker's retention drops the days past
// AUDIT_RETENTION at its first pass (at start), keeps the younger ones,
// counts what it deleted, and stops with its context.
func TestPruneAuditLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testenv.Postgres(t)
	ten := tenancy.New(d.Pool)
	org := testfactory.Org(ctx, t, d.Pool, nil)
	agent := uuid.New()
	var events []tenancy.AuditEvent
	for _, age := range []time.Duration{time.Minute, 47 * time.Hour, 73 * time.Hour, 300 * 24 * time.Hour} {
		events = append(events, tenancy.AuditEvent{OrgID: org.ID, At: time.Now().Add(-age), AgentID: &agent,
			Kind: tenancy.AuditTool, Name: "get_knowledge", Outcome: "ok"})
	}
	if err := ten.WriteAudit(ctx, events); err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pruneAudit(cctx, ten, auditConfig{retention: 48 * time.Hour, interval: time.Hour}, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(m.auditPruned) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("pruned %v records, want 2", testutil.ToFloat64(m.auditPruned))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	left, err := ten.Audit(ctx, org.ID, tenancy.AuditFilter{})
	if err != nil || len(left) != 2 {
		t.Fatalf("%d records left, %v; want the two younger than 48 h", len(left), err)
	}
}
