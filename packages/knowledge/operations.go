package knowledge

import (
	"context"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/google/uuid"
)

// Operations is the operators' calls: statistics, the search index's
// language, an org's own relation types, a model switch's coverage and end
// (and, with them, purge, export and import). They act for the org they
// name, not for an agent: apps/ctl, the worker and the MCP server's stats
// resource call them; an agent's tool never does. They share the Service's
// capabilities and caches, so Operations is reached from a Service.
type Operations struct{ s *Service }

// Operations returns the operators' calls of s.
func (s *Service) Operations() *Operations { return &Operations{s: s} }

// AddRelationType adds an org's own relation type (ctl relation-type add,
// operators): see relations.Relations.AddRelationType.
func (o *Operations) AddRelationType(ctx context.Context, org uuid.UUID, name, inverse string, symmetric bool) (*domain.RelationType, error) {
	return o.s.relations.AddRelationType(o.s.scope(ctx, org), org, name, inverse, symmetric)
}

// Stats reads org's statistics (docs/operators.md; latency by org size in
// docs/benchmarks.md). The org is not checked: callers pass an org that
// exists (a token's, or one ctl looked up).
func (o *Operations) Stats(ctx context.Context, org uuid.UUID, topTags int) (*OrgStats, error) {
	return o.s.maint.Stats(o.s.scope(ctx, org), org, topTags)
}

// SearchIndexStatus reports an org's lexical index and its own vector
// indexes.
func (o *Operations) SearchIndexStatus(ctx context.Context, org uuid.UUID) (*SearchIndexStatus, error) {
	return o.s.maint.SearchIndexStatus(o.s.scope(ctx, org), org)
}

// SetTextSearchConfig moves org's lexical index to another text search
// configuration and queues every entry again (Maintenance's says how); it
// returns how many entries were queued.
func (o *Operations) SetTextSearchConfig(ctx context.Context, org uuid.UUID, config string) (int64, error) {
	return o.s.maint.SetTextSearchConfig(o.s.scope(ctx, org), org, config)
}

// ModelSwitchCoverage reports every org's progress in the switch to next
// (it reads every entry: for operators, not for every pass).
func (o *Operations) ModelSwitchCoverage(ctx context.Context, next embed.Embedder) ([]SwitchCoverage, error) {
	return o.s.maint.ModelSwitchCoverage(ctx, next)
}

// FinishModelSwitch ends a switch whose orgs have all cut over to next
// (Maintenance's says how); it refuses while an org is not cut over, and
// is safe to run again.
func (o *Operations) FinishModelSwitch(ctx context.Context, next VectorSpace) (int64, error) {
	return o.s.maint.FinishModelSwitch(ctx, next)
}
