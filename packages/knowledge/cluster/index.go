package cluster

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
)

// IndexOrg runs one indexer batch of org on the org's worker when the
// database is a Citus cluster, and returns how many entries it moved;
// delegated is false on a single node, where the caller runs the batch
// itself. batch is the indexer's statement with positional parameters
// ($1 org, $2 max, $3 k1, $4 b), config the text search configuration a
// new org's statistics row is made with.
//
// On a Citus cluster the two statements of a batch (the org's statistics
// row locked, then the batch) go as one call of knowledge_index_org
// (migration 00029), sent to the org's worker (data.OrgCall: it runs there
// without the coordinator's planning and relay): the batch statement's
// data-modifying CTEs are never one routed query. Sent on its own (not in
// a transaction block, which Citus 13.2 fails to delegate into after a
// propagated SET LOCAL; ctx must not carry an org): the function runs as
// the schema's owner, whom the policies do not filter, and names the org
// in every statement.
func (c *Cluster) IndexOrg(ctx context.Context, org uuid.UUID, batch string, max int, k1, b float64, config string) (n int, delegated bool, err error) {
	citus, err := c.data.Citus(ctx)
	if err != nil {
		return 0, false, data.MapErr(err, "")
	}
	if !citus {
		return 0, false, nil
	}
	err = c.data.OrgCall(ctx, org, func(p *pgxpool.Pool) error {
		return p.QueryRow(ctx, "SELECT knowledge_index_org($1, $2, $3, $4, $5, $6::regconfig)",
			org, batch, max, k1, b, config).Scan(&n)
	})
	if err != nil {
		return 0, true, data.MapErr(err, "")
	}
	return n, true, nil
}
