package knowledge

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
)

// Maintenance keeps the knowledge tables searchable: the worker's passes
// (package maintenance says what each does).
type Maintenance = maintenance.Maintenance

// MaintenanceConfig tunes a Maintenance; its zero value is the documented
// defaults.
type MaintenanceConfig = maintenance.Config

// NewMaintenance returns the maintenance of the tables s searches: on its
// pool, with its embedder, text search configuration, clock and logger,
// readying new connections for its searches (WarmConn).
func NewMaintenance(s *Service, cfg MaintenanceConfig) *Maintenance {
	return maintenance.New(s.data, maintenance.Options{
		Embedder: s.opts.Embedder, TextSearchConfig: s.opts.TextSearchConfig,
		Now: s.opts.Now, Logger: s.opts.Logger, Warm: s.search.WarmConn, Config: cfg,
	})
}

// Stats reads org's statistics (docs/operators.md; latency by org size in
// docs/benchmarks.md). The org is not checked: callers pass an org that
// exists (a token's, or one ctl looked up).
func (s *Service) Stats(ctx context.Context, org uuid.UUID, topTags int) (*OrgStats, error) {
	return s.maint.Stats(s.scope(ctx, org), org, topTags)
}

// SearchIndexStatus reports an org's lexical index and its own vector
// indexes.
func (s *Service) SearchIndexStatus(ctx context.Context, org uuid.UUID) (*SearchIndexStatus, error) {
	return s.maint.SearchIndexStatus(s.scope(ctx, org), org)
}

// SetTextSearchConfig moves org's lexical index to another text search
// configuration and queues every entry again (Maintenance's says how); it
// returns how many entries were queued.
func (s *Service) SetTextSearchConfig(ctx context.Context, org uuid.UUID, config string) (int64, error) {
	return s.maint.SetTextSearchConfig(s.scope(ctx, org), org, config)
}

// ModelSwitchCoverage reports every org's progress in the switch to next
// (it reads every entry: for operators, not for every pass).
func (s *Service) ModelSwitchCoverage(ctx context.Context, next embed.Embedder) ([]SwitchCoverage, error) {
	return s.maint.ModelSwitchCoverage(ctx, next)
}

// FinishModelSwitch ends a switch whose orgs have all cut over to next
// (Maintenance's says how); it refuses while an org is not cut over, and
// is safe to run again.
func (s *Service) FinishModelSwitch(ctx context.Context, next VectorSpace) (int64, error) {
	return s.maint.FinishModelSwitch(ctx, next)
}
