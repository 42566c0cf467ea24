package knowledge

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
)

// BuiltinRelationTypes is the catalogue every org has (package relations).
var BuiltinRelationTypes = relations.BuiltinRelationTypes

// Link records a typed relation between two live entries of the caller's
// org (link_knowledge): see relations.Relations.Link.
func (s *Service) Link(ctx context.Context, c domain.Caller, in domain.LinkInput) (*domain.RelationChange, error) {
	return s.relations.Link(s.scope(ctx, c.OrgID), c, in)
}

// Unlink closes the open relation fromID -type-> toID (unlink_knowledge):
// see relations.Relations.Unlink.
func (s *Service) Unlink(ctx context.Context, c domain.Caller, fromID, toID uuid.UUID, typ string) (*domain.RelationChange, error) {
	return s.relations.Unlink(s.scope(ctx, c.OrgID), c, fromID, toID, typ)
}

// Relations lists an entry's relations, newest first (list_relations):
// see relations.Relations.Relations.
func (s *Service) Relations(ctx context.Context, c domain.Caller, in domain.RelationsInput) (*domain.RelationsResult, error) {
	return s.relations.Relations(s.scope(ctx, c.OrgID), c, in)
}

// RelationTypes lists the catalogue of the caller's org: the built-in
// types and the org's own.
func (s *Service) RelationTypes(ctx context.Context, c domain.Caller) ([]domain.RelationType, error) {
	return s.relations.RelationTypes(s.scope(ctx, c.OrgID), c)
}
