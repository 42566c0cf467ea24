package data

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/orgcall"
)

// On a Citus cluster an org's delegated reads (OnWorker, Reads: a search's
// ranking statements and bodies, a store's duplicate check) and the
// transactions marked by OnOrgWorker (db.Router: a store's, which takes no
// advisory lock) are sent straight to the worker that holds the org's
// shards, where they run locally; through the coordinator each statement was planned and
// deparsed there and relayed, a hop a search pays twice in turn and a
// store five times (docs/operators.md, "Search on a cluster").
//
// The route is a hint, never a condition of a right answer: the function
// runs on any node that has Citus's metadata, and a worker that no longer
// holds the org (after a shard move) passes the call on to the one that
// does. A worker the app cannot reach (an address only the coordinator
// resolves, a firewall, the worker down) is left alone for nodeRetry, its
// orgs' calls going through the coordinator as before.

const (
	routeTTL  = time.Minute      // an org's worker is looked up again after this
	nodeRetry = 30 * time.Second // a worker that could not be reached is tried again after this
	maxRoutes = 100_000          // orgs remembered; past it the map starts again
)

// orgNodeSQL names the worker of the org's shard of knowledge (every
// distributed table is colocated with it).
const orgNodeSQL = `SELECT nodename, nodeport FROM pg_dist_shard_placement
WHERE shardid = get_shard_id_for_distribution_column('knowledge', $1::uuid) LIMIT 1`

// routes are the worker pools of one coordinator pool, shared by every DB
// made on it (routesOf).
type routes struct {
	coord *pgxpool.Pool
	log   atomic.Pointer[slog.Logger] // nil: slog's default (DB.WithLogger)

	mu    sync.Mutex
	orgs  map[uuid.UUID]orgRoute
	nodes map[nodeAddr]*node

	shards orgcall.Shards // the orgs' shards and the statements renamed to them (worker.go)
}

type nodeAddr struct {
	host string
	port uint16
}

type orgRoute struct {
	addr nodeAddr
	at   time.Time
}

type node struct {
	pool     *pgxpool.Pool // nil when it could not be made
	badUntil time.Time
}

var (
	routesMu  sync.Mutex
	routesFor = map[*pgxpool.Pool]*routes{}
)

// routesOf is coord's routes, made on first use.
func routesOf(coord *pgxpool.Pool) *routes {
	routesMu.Lock()
	defer routesMu.Unlock()
	r := routesFor[coord]
	if r == nil {
		r = &routes{coord: coord, orgs: map[uuid.UUID]orgRoute{}, nodes: map[nodeAddr]*node{}}
		routesFor[coord] = r
	}
	return r
}

// pool is the pool for org's calls: its worker's, or the
// coordinator's when the worker is unknown or was not reachable lately.
// addr says which worker (zero for the coordinator), for failed.
func (r *routes) pool(ctx context.Context, org uuid.UUID) (*pgxpool.Pool, nodeAddr) {
	now := time.Now()
	r.mu.Lock()
	rt, ok := r.orgs[org]
	r.mu.Unlock()
	if !ok || now.Sub(rt.at) > routeTTL {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var a nodeAddr
		var port int32
		err := r.coord.QueryRow(lctx, orgNodeSQL, org).Scan(&a.host, &port)
		cancel()
		if err != nil {
			return r.coord, nodeAddr{}
		}
		a.port = uint16(port)
		rt = orgRoute{addr: a, at: now}
		r.mu.Lock()
		if len(r.orgs) >= maxRoutes {
			clear(r.orgs)
		}
		r.orgs[org] = rt
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[rt.addr]
	if n == nil {
		n = &node{}
		p, err := db.NodePool(r.coord, rt.addr.host, rt.addr.port)
		if err != nil {
			n.badUntil = now.Add(nodeRetry)
			r.logger().Warn("citus worker: no pool for it; its orgs' calls go through the coordinator",
				"worker", rt.addr.host, "port", rt.addr.port, "err", err)
		}
		n.pool = p
		r.nodes[rt.addr] = n
	}
	if n.pool == nil || now.Before(n.badUntil) {
		return r.coord, nodeAddr{}
	}
	return n.pool, rt.addr
}

// Router is the DB's routes, for another package's db.Scoped (the audit
// trail's writes: tenancy.Service.WithRouter).
func (d *DB) Router() db.Router { return d.routes }

// Route is db.Router's: org's statements go to its worker's pool.
func (r *routes) Route(ctx context.Context, org uuid.UUID) (*pgxpool.Pool, func(error) bool) {
	pool, addr := r.pool(ctx, org)
	if pool == r.coord {
		return pool, nil
	}
	return pool, func(err error) bool { return r.failed(ctx, addr, err) }
}

// failed notes a call sent to the worker at addr that failed with err
// while ctx was live: a worker that cannot be reached is left alone for
// nodeRetry. It says whether the call should be sent again through the
// coordinator: a read (whatever of it ran changed nothing) or a
// transaction that could not begin.
func (r *routes) failed(ctx context.Context, addr nodeAddr, err error) bool {
	if addr == (nodeAddr{}) || ctx.Err() != nil || !db.Unreachable(err) {
		return false
	}
	r.mu.Lock()
	n := r.nodes[addr]
	first := n != nil && !time.Now().Before(n.badUntil)
	if n != nil {
		n.badUntil = time.Now().Add(nodeRetry)
	}
	r.mu.Unlock()
	if first {
		r.logger().Warn("citus worker unreachable from this app: its orgs' calls go through the coordinator for a while",
			"worker", addr.host, "port", addr.port, "retry_in", nodeRetry.String(), "err", err)
	}
	return true
}

func (r *routes) logger() *slog.Logger {
	if l := r.log.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// OrgCall runs fn, one statement Citus delegates to org's worker (a
// distributed function of the org), on the pool of that worker when the
// database is a Citus cluster and the app can reach it, else on the DB's
// own pool; and on the DB's own pool again when the worker could not be
// reached (the statement did not run there).
func (d *DB) OrgCall(ctx context.Context, org uuid.UUID, fn func(*pgxpool.Pool) error) error {
	return d.scoped.CallOnOrgNode(ctx, org, fn)
}

// OrgTx runs fn in a transaction of org (row-level security set to it)
// on the node that holds org's rows: on a Citus cluster its worker, when
// the app can reach it (a transaction that cannot begin there begins on
// the coordinator: db.Router), else the DB's own pool. The caller vouches
// that fn touches org's rows only and takes no advisory lock (db.OnOrgNode
// says why).
func (d *DB) OrgTx(ctx context.Context, org uuid.UUID, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(OnOrgWorker(AsOrg(ctx, org)), d.scoped, fn)
}
