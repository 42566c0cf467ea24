package tenancy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

type bundle struct {
	svc   *tenancy.Service
	db    *testenv.Database
	org   *tenancy.Org
	agent *tenancy.Agent
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := testenv.Postgres(t)
	svc := tenancy.New(db.Pool)
	ctx := context.Background()
	org, err := svc.CreateOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := svc.CreateAgent(ctx, org.ID, "scout")
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{svc: svc, db: db, org: org, agent: agent}
}

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	issued, err := b.svc.IssueToken(ctx, b.org.ID, b.agent.ID, []string{"knowledge:read", "knowledge:write", "knowledge:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(issued.Token, "kn_") {
		t.Fatalf("token %q lacks its prefix", issued.Token)
	}
	p, err := b.svc.VerifyToken(ctx, issued.Token)
	if err != nil {
		t.Fatal(err)
	}
	if p.OrgID != b.org.ID || p.AgentID != b.agent.ID || p.TokenID != issued.ID {
		t.Fatalf("principal %+v does not match org %s agent %s", p, b.org.ID, b.agent.ID)
	}
	if !p.HasScope("knowledge:read") || !p.HasScope("knowledge:write") || len(p.Scopes) != 2 {
		t.Fatalf("scopes %v", p.Scopes)
	}
	// The secret is not stored: nothing in the row contains it.
	var stored []byte
	if err := b.db.Pool.QueryRow(ctx, "SELECT secret_hash FROM agent_tokens WHERE id = $1", issued.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 32 || strings.Contains(issued.Token, string(stored)) {
		t.Fatalf("unexpected stored hash %x", stored)
	}
	var used *time.Time
	if err := b.db.Pool.QueryRow(ctx, "SELECT last_used_at FROM agent_tokens WHERE id = $1", issued.ID).Scan(&used); err != nil || used == nil {
		t.Fatalf("last_used_at not recorded: %v %v", used, err)
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	good, err := b.svc.IssueToken(ctx, b.org.ID, b.agent.ID, []string{"knowledge:read"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	revoked, _ := b.svc.IssueToken(ctx, b.org.ID, b.agent.ID, []string{"knowledge:read"}, 0)
	if _, err := b.svc.RevokeToken(ctx, nil, revoked.ID); err != nil {
		t.Fatal(err)
	}
	expired, _ := b.svc.IssueToken(ctx, b.org.ID, b.agent.ID, []string{"knowledge:read"}, time.Hour)
	if _, err := b.db.Pool.Exec(ctx, "UPDATE agent_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", expired.ID); err != nil {
		t.Fatal(err)
	}
	// Same org and id, another secret.
	wrongSecret := good.Token[:len(good.Token)-4] + "AAAA"
	if wrongSecret == good.Token {
		wrongSecret = good.Token[:len(good.Token)-4] + "BBBB"
	}
	cases := map[string]string{
		"empty":        "",
		"no prefix":    strings.TrimPrefix(good.Token, "kn_"),
		"garbage":      "kn_not-base64!!",
		"short":        "kn_AAAA",
		"unknown":      "kn_" + strings.Repeat("A", 86),
		"wrong secret": wrongSecret,
		"revoked":      revoked.Token,
		"expired":      expired.Token,
	}
	for name, raw := range cases {
		if _, err := b.svc.VerifyToken(ctx, raw); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Errorf("%s: got %v, want ErrUnauthenticated", name, err)
		}
	}
	if _, err := b.svc.VerifyToken(ctx, good.Token); err != nil {
		t.Fatalf("good token refused: %v", err)
	}
}

func TestIssueTokenRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	other, err := b.svc.CreateOrg(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	var verr *errs.Error
	if _, err := b.svc.IssueToken(ctx, b.org.ID, b.agent.ID, []string{"knowledge:write_others"}, 0); !errors.As(err, &verr) || verr.Code != errs.CodeInvalidArgument || verr.Field != "scopes" {
		t.Fatalf("future scope issued: %v", err)
	}
	if _, err := b.svc.IssueToken(ctx, b.org.ID, b.agent.ID, nil, 0); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("empty scopes issued: %v", err)
	}
	// The agent exists, but in another org: not found.
	if _, err := b.svc.IssueToken(ctx, other.ID, b.agent.ID, []string{"knowledge:read"}, 0); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("cross-org agent: %v", err)
	}
	var n int
	if err := b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM agent_tokens").Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused issues wrote %d tokens (%v)", n, err)
	}
	if _, err := b.svc.CreateOrg(ctx, "acme"); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate org: %v", err)
	}
	if _, err := b.svc.CreateOrg(ctx, strings.Repeat("é", 201)); !errors.As(err, &verr) || verr.Field != "name" {
		t.Fatalf("long name: %v", err)
	}
	if _, err := b.svc.CreateAgent(ctx, uuid.New(), "x"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("agent in unknown org: %v", err)
	}
}

func TestRevokeIsIdempotentAndScopedByOrg(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tok, _ := b.svc.IssueToken(ctx, b.org.ID, b.agent.ID, []string{"knowledge:read"}, 0)
	other, _ := b.svc.CreateOrg(ctx, "other")
	if _, err := b.svc.RevokeToken(ctx, &other.ID, tok.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("revoke through another org: %v", err)
	}
	first, err := b.svc.RevokeToken(ctx, &b.org.ID, tok.ID)
	if err != nil || first.RevokedAt == nil {
		t.Fatal(err)
	}
	second, err := b.svc.RevokeToken(ctx, nil, tok.ID)
	if err != nil || !second.RevokedAt.Equal(*first.RevokedAt) {
		t.Fatalf("second revoke moved the time: %v %v", second, err)
	}
	if _, err := b.svc.RevokeToken(ctx, nil, uuid.New()); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
}

// TestConsumeQuotaRace proves the conditional upsert: k units left, many
// concurrent transactions, exactly k commit a unit and used never passes the limit.
func TestConsumeQuotaRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	limit := int64(7)
	if _, err := b.svc.SetQuota(ctx, b.org.ID, tenancy.ResourceKnowledgeStored, &limit); err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
				return tenancy.ConsumeQuota(ctx, tx, b.org.ID, tenancy.ResourceKnowledgeStored)
			})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, errs.ErrQuotaExceeded):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != limit || refused.Load() != 30-limit {
		t.Fatalf("ok %d refused %d, want %d and %d", ok.Load(), refused.Load(), limit, 30-limit)
	}
	qs, err := b.svc.Quotas(ctx, b.org.ID)
	if err != nil || len(qs) != 1 || qs[0].Used != limit {
		t.Fatalf("quotas %+v %v", qs, err)
	}
}

func TestConsumeQuotaRolledBackConsumesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	limit := int64(1)
	if _, err := b.svc.SetQuota(ctx, b.org.ID, tenancy.ResourceKnowledgeStored, &limit); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("insert failed")
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		if err := tenancy.ConsumeQuota(ctx, tx, b.org.ID, tenancy.ResourceKnowledgeStored); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	// The unit is still there.
	if err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		return tenancy.ConsumeQuota(ctx, tx, b.org.ID, tenancy.ResourceKnowledgeStored)
	}); err != nil {
		t.Fatalf("rolled-back unit was consumed: %v", err)
	}
	// An org without a quota row is unlimited and its usage is counted.
	other, _ := b.svc.CreateOrg(ctx, "unlimited")
	for i := 0; i < 3; i++ {
		if err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
			return tenancy.ConsumeQuota(ctx, tx, other.ID, tenancy.ResourceKnowledgeStored)
		}); err != nil {
			t.Fatal(err)
		}
	}
	qs, _ := b.svc.Quotas(ctx, other.ID)
	if qs[0].Limit != nil || qs[0].Used != 3 {
		t.Fatalf("unlimited org quota %+v", qs[0])
	}
	if _, err := b.svc.SetQuota(ctx, b.org.ID, "bananas", &limit); err == nil {
		t.Fatal("unknown resource accepted")
	}
}
