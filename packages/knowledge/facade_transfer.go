package knowledge

import (
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
