package knowledge

import (
	"context"
	"io"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/transferfmt"
)

// ExportFormat and ExportVersion name the file format
// (internal/transferfmt). An import refuses a newer version: its meaning
// may have changed.
const (
	ExportFormat  = transferfmt.Format
	ExportVersion = transferfmt.Version
)

// ErrNewerFormat is returned for a file of a format version this code does
// not know.
var ErrNewerFormat = transferfmt.ErrNewerFormat

// The settings and reports of Export and Import (package domain).
type (
	ExportOptions = domain.ExportOptions
	ExportReport  = domain.ExportReport
	ImportOptions = domain.ImportOptions
	ImportReport  = domain.ImportReport
)

// Export writes org's knowledge to w (ctl export): see
// transfer.Transfer.Export.
func (s *Service) Export(ctx context.Context, org uuid.UUID, w io.Writer, o domain.ExportOptions) (*domain.ExportReport, error) {
	return s.transfer.Export(s.scope(ctx, org), org, w, o)
}

// Import reads an export into org, all of it or nothing (ctl import): see
// transfer.Transfer.Import.
func (s *Service) Import(ctx context.Context, org uuid.UUID, open func() (io.ReadCloser, error), o domain.ImportOptions) (*domain.ImportReport, error) {
	return s.transfer.Import(s.scope(ctx, org), org, open, o)
}
