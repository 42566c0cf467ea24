package orgcall

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
)

// Shards is what QueryShards keeps between calls for one Citus database:
// the shard of knowledge that holds each org (which names the org's shard
// group), and each statement's text renamed to each shard group's shards.
// Its zero value is empty and ready.
type Shards struct {
	mu    sync.Mutex
	orgs  map[uuid.UUID]int64
	texts map[shardText]string
}

type shardText struct {
	name  string
	shard int64
}

// maxShardOrgs bounds Shards' orgs: past it they are forgotten at once and
// learnt again, a statement each.
const maxShardOrgs = 100_000

// Org is the shard of knowledge learnt to hold org.
func (s *Shards) Org(org uuid.UUID) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	shard, ok := s.orgs[org]
	return shard, ok
}

// SetOrg notes that shard holds org.
func (s *Shards) SetOrg(org uuid.UUID, shard int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orgs == nil || len(s.orgs) >= maxShardOrgs {
		s.orgs = map[uuid.UUID]int64{}
	}
	s.orgs[org] = shard
}

func (s *Shards) forget(org uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.orgs, org)
}

// Text is statement name's text renamed to the shards of shard's group.
func (s *Shards) Text(name string, shard int64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.texts[shardText{name, shard}]
	return t, ok
}

// SetText notes statement name's text renamed to shard's group.
func (s *Shards) SetText(name string, shard int64, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.texts == nil {
		s.texts = map[shardText]string{}
	}
	s.texts[shardText{name, shard}] = text
}

// PostgreSQL's SQLSTATEs for a relation and a function that do not exist.
const (
	undefinedTable    = "42P01"
	undefinedFunction = "42883"
)

// shardGuardSQL sets the call's settings and its org (row-level security),
// local to the batch's implicit transaction, and says which shard of
// knowledge holds the org and whether this node holds it.
const shardGuardSQL = `SELECT s.shard,
       EXISTS (SELECT 1 FROM pg_dist_placement p
               WHERE p.shardid = s.shard AND p.groupid = (SELECT groupid FROM pg_dist_local_group)) AS local,
       (SELECT count(set_config(x.name, x.value, true)) FROM unnest($2::text[], $3::text[]) AS x (name, value)) AS settings
FROM (SELECT get_shard_id_for_distribution_column('knowledge', $1::uuid) AS shard) s`

// QueryShards is Query on pool, a pool of the Citus worker that holds
// org's shards (a route that may be stale), without knowledge_run_org in
// between: the statement itself, renamed to the org's shards once per
// shard group (knowledge_org_sql, on the worker) and prepared by each
// connection (pgx's statement cache), follows a first statement that sets
// the settings and the org in the same batch (one implicit transaction,
// one round trip). knowledge_run_org's plpgsql, its arguments' text and
// the rows it hands back through a tuplestore cost 0.5-0.7 ms of a 2.0 ms
// lexical statement (docs/benchmarks.md, "Cluster").
//
// The first statement also says which shard holds the org now and whether
// this node holds it. A shard split since the org was learnt (ctl
// isolate-org) or moved (a rebalance: the route is then stale too) makes
// the renamed text another shard's, possibly one left behind on this node
// for a while: then the second statement's rows are dropped unread, the
// org is learnt again on its next call, and this call goes through Query
// (knowledge_run_org, which Citus delegates to the node that holds the
// shard).
func (s *Statement) QueryShards(ctx context.Context, pool *pgxpool.Pool, sh *Shards, org uuid.UUID, settings []string, args []any) (pgx.Rows, error) {
	shard, ok := sh.Org(org)
	if !ok {
		if err := pool.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('knowledge', $1::uuid)`, org).Scan(&shard); err != nil {
			return nil, err
		}
		sh.SetOrg(org, shard)
	}
	text, ok := sh.Text(s.name, shard)
	if !ok {
		if err := pool.QueryRow(ctx, `SELECT knowledge_org_sql($1::uuid, $2::text)`, org, s.sql).Scan(&text); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == undefinedFunction {
				// A schema from before migration 00043.
				return s.Query(ctx, pool, org, settings, args)
			}
			return nil, err
		}
		sh.SetText(s.name, shard, text)
	}
	names := make([]string, 0, len(settings)/2+1)
	values := make([]string, 0, len(settings)/2+1)
	for i := 0; i+1 < len(settings); i += 2 {
		names, values = append(names, settings[i]), append(values, settings[i+1])
	}
	names, values = append(names, "app.org_id"), append(values, org.String())
	b := &pgx.Batch{}
	b.Queue(shardGuardSQL, org, names, values)
	b.Queue(text, args...)
	br := pool.SendBatch(ctx, b)
	var (
		now   int64
		local bool
		n     int64
	)
	if err := br.QueryRow().Scan(&now, &local, &n); err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != undefinedTable {
			br.Close()
			return nil, err
		}
		// A connection prepares the text before the batch runs: the
		// shards it names are not on this node (a stale route or shard).
		local = false
	}
	if now != shard || !local {
		br.Close()
		sh.forget(org)
		return s.Query(ctx, pool, org, settings, args)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return db.NewBatchRows(rows, br), nil
}
