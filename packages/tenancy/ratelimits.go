package tenancy

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy/internal/sqlc"
)

// Rate limit kinds: reads (search, get, resources) and writes (store,
// supersede) are limited separately, so a batch writer cannot spend the
// budget interactive readers of its org need.
const (
	RateRead  = "read"
	RateWrite = "write"
)

// Rate limit scopes.
const (
	// RateScopeOrg limits all agents of an org together.
	RateScopeOrg = "org"
	// RateScopeAgent limits each agent (AgentID nil: every agent of the
	// org that has no limit of its own).
	RateScopeAgent = "agent"
)

// MaxRatePerMinute is the largest limit that can be set (a limit above it
// is "unlimited" in all but name).
const MaxRatePerMinute = 1_000_000

// RateLimit is one operator setting. PerMinute nil means unlimited.
type RateLimit struct {
	Scope     string     `json:"scope"`
	AgentID   *uuid.UUID `json:"agentId,omitempty"`
	Kind      string     `json:"kind"`
	PerMinute *int       `json:"perMinute"`
}

// checkRateLimit is the one place the rules of a rate limit setting live.
func checkRateLimit(l RateLimit) error {
	switch l.Scope {
	case RateScopeOrg:
		if l.AgentID != nil {
			return errs.InvalidArgument("agent", "must not be given for an org-wide limit (scope org)")
		}
	case RateScopeAgent:
	default:
		return errs.InvalidArgument("scope", "must be %s or %s (got %q)", RateScopeOrg, RateScopeAgent, l.Scope)
	}
	if l.Kind != RateRead && l.Kind != RateWrite {
		return errs.InvalidArgument("kind", "must be %s or %s (got %q)", RateRead, RateWrite, l.Kind)
	}
	if l.PerMinute != nil && (*l.PerMinute < 1 || *l.PerMinute > MaxRatePerMinute) {
		return errs.InvalidArgument("perMinute", "must be from 1 to %d calls a minute, or unlimited (got %d)", MaxRatePerMinute, *l.PerMinute)
	}
	return nil
}

// SetRateLimit sets one rate limit of an org (see RateLimit).
func (s *Service) SetRateLimit(ctx context.Context, orgID uuid.UUID, l RateLimit) (_ *RateLimit, err error) {
	defer wrapOp(&err, "tenancy.SetRateLimit")
	ctx = asOrg(ctx, orgID)
	if err := checkRateLimit(l); err != nil {
		return nil, err
	}
	if _, err := s.q().GetOrg(ctx, orgID); err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	var per *int32
	if l.PerMinute != nil {
		v := int32(*l.PerMinute)
		per = &v
	}
	var row sqlc.RateLimit
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		var err error
		if row, err = q.SetRateLimit(ctx, sqlc.SetRateLimitParams{OrgID: orgID, Scope: l.Scope, AgentID: l.AgentID, Kind: l.Kind, PerMinute: per}); err != nil {
			return err
		}
		return q.NotifyRateLimitsChanged(ctx, orgID.String())
	})
	if err != nil {
		what := "org " + orgID.String()
		if l.AgentID != nil {
			what = "agent " + l.AgentID.String() + " of org " + orgID.String()
		}
		return nil, mapErr(err, what)
	}
	out := toRateLimit(row)
	return &out, nil
}

// ClearRateLimit removes a setting, so the server's default applies again.
// It reports whether there was one.
func (s *Service) ClearRateLimit(ctx context.Context, orgID uuid.UUID, l RateLimit) (_ bool, err error) {
	defer wrapOp(&err, "tenancy.ClearRateLimit")
	ctx = asOrg(ctx, orgID)
	l.PerMinute = nil
	if err := checkRateLimit(l); err != nil {
		return false, err
	}
	var n int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		var err error
		if n, err = q.ClearRateLimit(ctx, sqlc.ClearRateLimitParams{OrgID: orgID, Scope: l.Scope, AgentID: l.AgentID, Kind: l.Kind}); err != nil || n == 0 {
			return err
		}
		return q.NotifyRateLimitsChanged(ctx, orgID.String())
	})
	return n > 0, err
}

// RateLimitsChannel is the PostgreSQL notification channel on which every
// change of an org's settings (SetRateLimit, ClearRateLimit) names the org,
// sent in its transaction, so delivered when it commits: a server that
// caches the settings LISTENs on it and reads the org's again (the MCP
// server's rate limiter). ParseRateLimitsChange reads a payload.
const RateLimitsChannel = "knowledge_rate_limits_changed"

// ParseRateLimitsChange reads a RateLimitsChannel payload: the org.
func ParseRateLimitsChange(payload string) (uuid.UUID, error) { return uuid.Parse(payload) }

// RateLimits lists an org's settings (the server's defaults apply to the
// rest).
func (s *Service) RateLimits(ctx context.Context, orgID uuid.UUID) (_ []RateLimit, err error) {
	defer wrapOp(&err, "tenancy.RateLimits")
	ctx = asOrg(ctx, orgID)
	if _, err := s.q().GetOrg(ctx, orgID); err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	return RateLimitsOn(ctx, s.pool, orgID)
}

// RateLimitsFor returns the settings that can apply to one agent's calls:
// the org's own, the org's default for each agent, and the agent's.
func (s *Service) RateLimitsFor(ctx context.Context, orgID, agentID uuid.UUID) (_ []RateLimit, err error) {
	defer wrapOp(&err, "tenancy.RateLimitsFor")
	ctx = asOrg(ctx, orgID)
	rows, err := s.q().RateLimitsFor(ctx, sqlc.RateLimitsForParams{OrgID: orgID, AgentID: &agentID})
	if err != nil {
		return nil, err
	}
	return toRateLimits(rows), nil
}

func toRateLimits(rows []sqlc.RateLimit) []RateLimit {
	out := make([]RateLimit, 0, len(rows))
	for _, r := range rows {
		out = append(out, toRateLimit(r))
	}
	return out
}

func toRateLimit(r sqlc.RateLimit) RateLimit {
	l := RateLimit{Scope: r.Scope, AgentID: r.AgentID, Kind: r.Kind}
	if r.PerMinute != nil {
		v := int(*r.PerMinute)
		l.PerMinute = &v
	}
	return l
}
