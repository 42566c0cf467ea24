package knowledge

import (
	"context"
	"io"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/google/uuid"
)

// Operations is the operators' calls: statistics, the search index's
// language, an org's own relation types, a model switch's coverage and end
// (and, with them, purge, the erasure report, export and import). They act
// for the org they name, not for an agent: apps/ctl, the worker and the MCP
// server's stats resource call them; an agent's tool never does. They share the Service's
// capabilities and caches, so Operations is reached from a Service.
type Operations struct{ s *Service }

// Operations returns the operators' calls of s.
func (s *Service) Operations() *Operations { return &Operations{s: s} }

// AddRelationType adds an org's own relation type (ctl relation-type add,
// operators): see relations.Relations.AddRelationType.
func (op *Operations) AddRelationType(ctx context.Context, org uuid.UUID, name, inverse string, symmetric bool) (*domain.RelationType, error) {
	return op.s.relations.AddRelationType(op.s.scope(ctx, org), org, name, inverse, symmetric)
}

// Stats reads org's statistics (docs/operators.md; latency by org size in
// docs/benchmarks.md). The org is not checked: callers pass an org that
// exists (a token's, or one ctl looked up).
func (op *Operations) Stats(ctx context.Context, org uuid.UUID, topTags int) (*OrgStats, error) {
	return op.s.maint.Stats(op.s.scope(ctx, org), org, topTags)
}

// SearchIndexStatus reports an org's lexical index and its own vector
// indexes.
func (op *Operations) SearchIndexStatus(ctx context.Context, org uuid.UUID) (*SearchIndexStatus, error) {
	return op.s.maint.SearchIndexStatus(op.s.scope(ctx, org), org)
}

// SetTextSearchConfig moves org's lexical index to another text search
// configuration and queues every entry again (Maintenance's says how); it
// returns how many entries were queued.
func (op *Operations) SetTextSearchConfig(ctx context.Context, org uuid.UUID, config string) (int64, error) {
	return op.s.maint.SetTextSearchConfig(op.s.scope(ctx, org), org, config)
}

// ModelSwitchCoverage reports every org's progress in the switch to next
// (it reads every entry: for operators, not for every pass).
func (op *Operations) ModelSwitchCoverage(ctx context.Context, next embed.Embedder) ([]SwitchCoverage, error) {
	return op.s.maint.ModelSwitchCoverage(ctx, next)
}

// FinishModelSwitch ends a switch whose orgs have all cut over to next
// (Maintenance's says how); it refuses while an org is not cut over, and
// is safe to run again.
func (op *Operations) FinishModelSwitch(ctx context.Context, next VectorSpace) (int64, error) {
	return op.s.maint.FinishModelSwitch(ctx, next)
}

// Purge erases entries of org for good (ctl purge): see
// erasure.Erasure.Purge.
func (op *Operations) Purge(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, dryRun bool) (*domain.PurgeReport, error) {
	return op.s.erasure.Purge(op.s.scope(ctx, org), org, scope, dryRun)
}

// PurgeWith is Purge with options (progress): see
// erasure.Erasure.PurgeWith.
func (op *Operations) PurgeWith(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, o domain.PurgeOptions) (*domain.PurgeReport, error) {
	return op.s.erasure.PurgeWith(op.s.scope(ctx, org), org, scope, o)
}

// ErasureReport scans every table and the product's Redis keys for a text
// or an entry's id and words, within org (ctl erasure-report): the proof
// that a forget or a purge left no copy. See erasure.Erasure.Report.
func (op *Operations) ErasureReport(ctx context.Context, org uuid.UUID, in domain.ErasureReportInput) (*domain.ErasureReport, error) {
	return op.s.erasure.Report(op.s.scope(ctx, org), org, in)
}

// Export writes org's knowledge to w (ctl export): see
// transfer.Transfer.Export.
func (op *Operations) Export(ctx context.Context, org uuid.UUID, w io.Writer, o domain.ExportOptions) (*domain.ExportReport, error) {
	return op.s.transfer.Export(op.s.scope(ctx, org), org, w, o)
}

// Import reads an export into org, all of it or nothing (ctl import): see
// transfer.Transfer.Import.
func (op *Operations) Import(ctx context.Context, org uuid.UUID, open func() (io.ReadCloser, error), o domain.ImportOptions) (*domain.ImportReport, error) {
	return op.s.transfer.Import(op.s.scope(ctx, org), org, open, o)
}
