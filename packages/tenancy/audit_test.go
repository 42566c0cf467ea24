package tenancy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// TestPruneAuditKeepsTheRetention: the retention drops every org's days
// that ended before its bound, whole: nothing younger than the retention
// leaves, nothing a day older stays.
func TestPruneAuditKeepsTheRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	other, err := b.svc.CreateOrg(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var events []tenancy.AuditEvent
	for i := range 25 {
		for _, org := range []uuid.UUID{b.org.ID, other.ID} {
			age := time.Duration(i) * 24 * time.Hour * 5 // 0 to 120 days
			events = append(events, tenancy.AuditEvent{OrgID: org, At: now.Add(-age), AgentID: &b.agent.ID,
				Kind: tenancy.AuditTool, Name: "search_knowledge", Outcome: "ok"})
		}
	}
	if err := b.svc.WriteAudit(ctx, events); err != nil {
		t.Fatal(err)
	}
	// 90 days: ages 0..90 stay (19 a org: the 90-day-old record's day is
	// not over 90 days ago), 95..120 go (6 a org).
	n, err := b.svc.PruneAudit(ctx, now.Add(-tenancy.DefaultAuditRetention+time.Minute))
	if err != nil || n != 12 {
		t.Fatalf("pruned %d, %v; want 12", n, err)
	}
	for _, org := range []uuid.UUID{b.org.ID, other.ID} {
		got, err := b.svc.Audit(ctx, org, tenancy.AuditFilter{Limit: 1000})
		if err != nil || len(got) != 19 {
			t.Fatalf("org %v kept %d, %v; want 19", org, len(got), err)
		}
		if oldest := got[len(got)-1].At; now.Sub(oldest) > tenancy.DefaultAuditRetention+24*time.Hour {
			t.Fatalf("a record of %v is left", oldest)
		}
	}
	if n, err := b.svc.PruneAudit(ctx, now.Add(-tenancy.DefaultAuditRetention+time.Minute)); err != nil || n != 0 {
		t.Fatalf("second pass pruned %d, %v", n, err)
	}
}

// TestAuditFilterRules: bad filters are refused naming the field.
func TestAuditFilterRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Now()
	for field, f := range map[string]tenancy.AuditFilter{
		"limit": {Limit: tenancy.MaxAuditLimit + 1},
		"until": {Since: &now, Until: &now},
		"name":  {Name: " store_knowledge"},
	} {
		_, err := b.svc.Audit(ctx, b.org.ID, f)
		var ve *errs.Error
		if !errors.As(err, &ve) || ve.Code != errs.CodeInvalidArgument || ve.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
	if _, err := b.svc.Audit(ctx, uuid.New(), tenancy.AuditFilter{}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown org: %v", err)
	}
}
