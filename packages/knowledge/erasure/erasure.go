package erasure

import (
	"cmp"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Erasure erases entries for good: Forget (an agent's call, one entry,
// leaving a tombstone) and Purge (an operator's, by entry, agent or
// whole org). Every method's ctx carries the org erased in (data.AsOrg:
// the facade puts it there). It is safe for concurrent use.
type Erasure struct {
	data             *data.DB
	q                *sqlc.Queries
	redis            redis.UniversalClient
	log              *slog.Logger
	textSearchConfig string
}

// Options are what an Erasure is made with; every zero value is the
// documented default.
type Options struct {
	// Redis holds the store's idempotence records, which an erasure
	// deletes when they name an erased entry. Default: none (nothing to
	// delete).
	Redis redis.UniversalClient
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// TextSearchConfig is the configuration an org's lexical index
	// statistics row is created with when an erasure locks it first (the
	// service's Config.TextSearchConfig). Default: "english".
	TextSearchConfig string
}

// New returns the erasure of d's database.
func New(d *data.DB, o Options) *Erasure {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Erasure{data: d, q: d.Q(), redis: o.Redis, log: o.Logger,
		textSearchConfig: cmp.Or(o.TextSearchConfig, "english")}
}
