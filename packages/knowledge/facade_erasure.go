package knowledge

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// Forget erases one entry of the caller's org at once and leaves a
// tombstone (forget_knowledge): see erasure.Erasure.Forget.
func (s *Service) Forget(ctx context.Context, c domain.Caller, id uuid.UUID, reason string, othersAllowed bool) (*domain.ForgetResult, error) {
	return s.erasure.Forget(s.scope(ctx, c.OrgID), c, id, reason, othersAllowed)
}

// Purge erases entries of org for good (ctl purge): see
// erasure.Erasure.Purge.
func (s *Service) Purge(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, dryRun bool) (*domain.PurgeReport, error) {
	return s.erasure.Purge(s.scope(ctx, org), org, scope, dryRun)
}

// PurgeWith is Purge with options (progress): see
// erasure.Erasure.PurgeWith.
func (s *Service) PurgeWith(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, o domain.PurgeOptions) (*domain.PurgeReport, error) {
	return s.erasure.PurgeWith(s.scope(ctx, org), org, scope, o)
}
