package transfer

import (
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
)

// Transfer exports an org's knowledge to a file and imports one. Every
// method's ctx carries the org (data.AsOrg: the facade puts it there). It
// is safe for concurrent use.
type Transfer struct {
	data *data.DB
	now  func() time.Time
}

// Options are what a Transfer is made with; every zero value is the
// documented default.
type Options struct {
	// Now stamps an imported vector that carries no embedding time.
	// Default: time.Now.
	Now func() time.Time
}

// New returns the transfer of d's database.
func New(d *data.DB, o Options) *Transfer {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Transfer{data: d, now: o.Now}
}
