package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// routerFunc is a db.Router.
type routerFunc func(ctx context.Context, org uuid.UUID) (*pgxpool.Pool, func(error) bool)

func (f routerFunc) Route(ctx context.Context, org uuid.UUID) (*pgxpool.Pool, func(error) bool) {
	return f(ctx, org)
}

// On a Citus cluster with a router, WriteAudit writes each worker's
// records in a transaction of its own, on that worker: every record once.
// A worker's transaction that fails leaves its records, and only them, to
// PartialWrite.Rest, the others written; writing Rest completes the trail,
// nothing doubled. A worker that cannot be reached has its records
// written through the coordinator.
func TestWriteAuditPerWorker(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	if !testenv.IsCluster() {
		t.Skip("one transaction per worker on a Citus cluster only")
	}
	ctx := context.Background()
	owner := tenancy.New(d.Pool)
	app := d.AppPool(t)
	// Orgs until one on each of two workers.
	pools := map[uuid.UUID]*pgxpool.Pool{}
	byPort := map[int32]uuid.UUID{}
	for i := 0; len(byPort) < 2; i++ {
		if i == 40 {
			t.Fatal("40 orgs, all on one worker")
		}
		o, err := owner.CreateOrg(ctx, fmt.Sprintf("org %d", i))
		if err != nil {
			t.Fatal(err)
		}
		var host string
		var port int32
		if err := d.Pool.QueryRow(ctx, `SELECT nodename, nodeport FROM pg_dist_shard_placement
			WHERE shardid = get_shard_id_for_distribution_column('audit_events', $1::uuid) LIMIT 1`, o.ID).Scan(&host, &port); err != nil {
			t.Fatal(err)
		}
		if _, ok := byPort[port]; ok {
			continue
		}
		p, err := db.NodePool(app, host, uint16(port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		byPort[port], pools[o.ID] = o.ID, p
	}
	var orgs []uuid.UUID
	for _, o := range byPort {
		orgs = append(orgs, o)
	}
	a, b := orgs[0], orgs[1]
	events := func(tag string) []tenancy.AuditEvent {
		var out []tenancy.AuditEvent
		for i := range 3 {
			for _, org := range orgs {
				out = append(out, tenancy.AuditEvent{OrgID: org, At: time.Now(), Kind: tenancy.AuditTool,
					Name: fmt.Sprintf("%s_%d", tag, i), Outcome: "ok"})
			}
		}
		return out
	}
	count := func(org uuid.UUID, tag string) int {
		t.Helper()
		var n int
		if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE org_id = $1 AND name LIKE $2`, org, tag+"_%").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Each org's records to its worker's pool.
	routed := tenancy.New(app).WithRouter(routerFunc(func(_ context.Context, org uuid.UUID) (*pgxpool.Pool, func(error) bool) {
		return pools[org], nil
	}))
	if err := routed.WriteAudit(ctx, events("both")); err != nil {
		t.Fatal(err)
	}
	for _, org := range orgs {
		if n := count(org, "both"); n != 3 {
			t.Fatalf("org %s: %d records, want 3", org, n)
		}
	}

	// b's worker at an address nothing answers on, and the router saying
	// nothing of it: b's transaction fails, a's is written.
	nowhere, err := db.NodePool(app, "127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nowhere.Close)
	broken := tenancy.New(app).WithRouter(routerFunc(func(_ context.Context, org uuid.UUID) (*pgxpool.Pool, func(error) bool) {
		if org == b {
			return nowhere, nil
		}
		return pools[org], nil
	}))
	err = broken.WriteAudit(ctx, events("part"))
	var pw *tenancy.PartialWrite
	if !errors.As(err, &pw) || len(pw.Rest) != 3 {
		t.Fatalf("a worker's transaction failed: %v, want a PartialWrite of its 3 records", err)
	}
	for _, e := range pw.Rest {
		if e.OrgID != b {
			t.Fatalf("a record of %s among those not written, want only %s's", e.OrgID, b)
		}
	}
	if n := count(a, "part"); n != 3 {
		t.Fatalf("the org whose worker answered: %d records, want 3", n)
	}
	if err := routed.WriteAudit(ctx, pw.Rest); err != nil {
		t.Fatal(err)
	}
	for _, org := range orgs {
		if n := count(org, "part"); n != 3 {
			t.Fatalf("org %s after the rest was written: %d records, want 3", org, n)
		}
	}

	// The router says the worker cannot be reached: through the coordinator.
	fallback := tenancy.New(app).WithRouter(routerFunc(func(_ context.Context, org uuid.UUID) (*pgxpool.Pool, func(error) bool) {
		if org == b {
			return nowhere, func(error) bool { return true }
		}
		return pools[org], nil
	}))
	if err := fallback.WriteAudit(ctx, events("fallback")); err != nil {
		t.Fatal(err)
	}
	for _, org := range orgs {
		if n := count(org, "fallback"); n != 3 {
			t.Fatalf("org %s, its worker unreachable: %d records, want 3", org, n)
		}
	}
}
