package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// On a Citus cluster every org shares its shards with the other orgs
// whose ids hash into the same range. A big org can be given a shard of
// its own (Citus's isolate_tenant_to_new_shard, CASCADE: the same range
// of every co-located table, so the org's rows of every table stay
// together): its tables are then its alone on their worker, vacuumed and
// analyzed on their own by Upkeep (upkeepshards.go), and the shard can be
// moved to a worker of its own (citus_move_shard_placement). Its own HNSW
// index follows: it is an index of the distributed table, so the split
// builds it on the new shards with the others; IsolateOrg checks it is
// there and valid on the org's new shard.

// Shard transfer modes of IsolateOrg (Citus's citus.shard_transfer_mode):
// IsolateAuto copies with logical replication (writes go on; every table
// has a primary key), IsolateBlockWrites blocks the shard's writes while
// it copies, IsolateForceLogical is logical replication or an error.
const (
	IsolateAuto         = "auto"
	IsolateBlockWrites  = "block_writes"
	IsolateForceLogical = "force_logical"
)

// IsolateReport says what IsolateOrg did.
type IsolateReport struct {
	OrgID uuid.UUID `json:"orgId"`
	// AlreadyIsolated: the org's shard held it alone already; nothing moved.
	AlreadyIsolated bool    `json:"alreadyIsolated"`
	FromShard       int64   `json:"fromShard,omitempty"` // the shard it shared
	Shard           int64   `json:"shard"`               // its own, of knowledge
	ShardName       string  `json:"shardName"`
	Node            string  `json:"node"` // host:port of its worker
	Seconds         float64 `json:"seconds"`
	// VectorIndexes are the org's own HNSW indexes on its shard, as the
	// worker has them (none for an org Upkeep gave none).
	VectorIndexes []domain.VectorIndexState `json:"vectorIndexes"`
}

// IsolateOrg gives org a shard of its own on a Citus cluster (see above),
// copying its rows with mode (IsolateAuto when empty). It refuses on a
// single node, and names an unknown org as not found. An org isolated
// already is reported as such. The Cluster's pool must be the schema
// owner's: Citus requires the tables' owner.
func (c *Cluster) IsolateOrg(ctx context.Context, org uuid.UUID, mode string) (_ IsolateReport, err error) {
	defer data.WrapOp(&err, "knowledge.IsolateOrg")
	rep := IsolateReport{OrgID: org}
	switch mode {
	case "":
		mode = IsolateAuto
	case IsolateAuto, IsolateBlockWrites, IsolateForceLogical:
	default:
		return rep, errs.InvalidArgument("transferMode", "must be %s, %s or %s", IsolateAuto, IsolateBlockWrites, IsolateForceLogical)
	}
	citus, err := c.data.Citus(ctx)
	if err != nil {
		return rep, err
	}
	if !citus {
		return rep, &errs.Error{Code: errs.CodeInvalidArgument, Message: "this database is a single PostgreSQL, not a Citus cluster " +
			"(no citus extension): every org already shares the same tables and there is no shard to isolate (docs/scale-out.md)"}
	}
	known, err := c.data.Q().OrgKnown(ctx, org)
	if err != nil {
		return rep, err
	}
	if !known {
		return rep, &errs.Error{Code: errs.CodeNotFound, Field: "org", Message: "no such org"}
	}
	before, err := c.orgShard(ctx, org)
	if err != nil {
		return rep, err
	}
	if before.Isolated {
		rep.AlreadyIsolated = true
	} else {
		rep.FromShard = before.ShardID
		start := time.Now()
		// Not through sqlc: Citus's functions are not in the schema sqlc
		// reads. CASCADE: every co-located table's range moves with it.
		if _, err := c.data.Scoped().Exec(ctx, "SELECT isolate_tenant_to_new_shard('knowledge', $1::uuid, 'CASCADE', shard_transfer_mode => $2::citus.shard_transfer_mode)",
			org, mode); err != nil {
			if strings.Contains(err.Error(), "may not be used as an output plugin") {
				err = fmt.Errorf("%w (the workers must allow citus as a logical decoding output plugin: "+
					"add it to output_plugin_libraries, docs/scale-out.md; or copy with transfer mode %s)", err, IsolateBlockWrites)
			}
			return rep, fmt.Errorf("isolate_tenant_to_new_shard: %w", err)
		}
		rep.Seconds = time.Since(start).Seconds()
		if before, err = c.orgShard(ctx, org); err != nil {
			return rep, err
		}
	}
	rep.Shard, rep.ShardName, rep.Node = before.ShardID, before.Shard, fmt.Sprintf("%s:%d", before.Node, before.Port)
	ixs, err := c.data.Q().ShardIndexes(ctx, before.ShardID)
	if err != nil {
		return rep, err
	}
	rep.VectorIndexes = []domain.VectorIndexState{}
	for _, ix := range ixs {
		// The org's own HNSW indexes, known by their predicate: Citus
		// shortens a name as long as theirs on the shards.
		if strings.Contains(ix.Definition, "USING hnsw") && strings.Contains(ix.Definition, "'"+org.String()+"'::uuid") {
			rep.VectorIndexes = append(rep.VectorIndexes, domain.VectorIndexState{Name: ix.Name, Valid: ix.Valid})
		}
	}
	for _, ix := range rep.VectorIndexes {
		if !ix.Valid {
			return rep, fmt.Errorf("the org's vector index %s is not valid on its new shard %s: drop it (DROP INDEX CONCURRENTLY on the coordinator) and Upkeep builds it again", ix.Name, rep.ShardName)
		}
	}
	return rep, nil
}

// orgShard is the org's shard of knowledge and its worker.
func (c *Cluster) orgShard(ctx context.Context, org uuid.UUID) (sqlc.OrgShardRow, error) {
	rows, err := c.data.Q().OrgShard(ctx, org)
	if err != nil {
		return sqlc.OrgShardRow{}, err
	}
	if len(rows) != 1 {
		return sqlc.OrgShardRow{}, fmt.Errorf("the org's shard has %d placements: isolation needs exactly one (no shard replication)", len(rows))
	}
	return rows[0], nil
}
