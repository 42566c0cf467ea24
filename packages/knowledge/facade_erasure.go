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
