package knowledge

import (
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
