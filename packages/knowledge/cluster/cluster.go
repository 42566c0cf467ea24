package cluster

import "github.com/agentfleet/orchestrator/packages/knowledge/internal/data"

// Cluster runs the Citus-only operations on a database. It holds no state
// of its own and is safe for concurrent use.
type Cluster struct {
	data *data.DB
}

// New returns the cluster operations of d. The statements that cross orgs
// (the shards' figures, the isolation) need d's pool to be a role exempt
// from row-level security: the worker's, or the schema owner's.
func New(d *data.DB) *Cluster { return &Cluster{data: d} }
