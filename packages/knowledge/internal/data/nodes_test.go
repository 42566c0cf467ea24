package data

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/orgcall"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// TestReadsGoToTheOrgsWorker: on a Citus cluster an org's delegated reads,
// and its transactions marked for it, are sent to the worker that holds
// its shards, and the route is only a hint: a route to the other worker (a shard moved since) and a route to
// an address nothing answers on (a worker the app cannot reach) give the
// same rows, the latter through the coordinator, the worker then left
// alone for a while.
func TestReadsGoToTheOrgsWorker(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	if !testenv.IsCluster() {
		t.Skip("routes exist on a Citus cluster only")
	}
	ctx := context.Background()
	e := testfactory.Entry(ctx, t, d.Pool, &testfactory.EntryOpts{Title: "routed", Body: "read on the org's worker"})
	var host string
	var port int32
	if err := d.Pool.QueryRow(ctx, orgNodeSQL, e.OrgID).Scan(&host, &port); err != nil {
		t.Fatal(err)
	}
	var other nodeAddr
	var otherPort int32
	if err := d.Pool.QueryRow(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE noderole = 'primary' AND shouldhaveshards AND groupid <> 0 AND (nodename, nodeport) <> ($1, $2) LIMIT 1`,
		host, port).Scan(&other.host, &otherPort); err != nil {
		t.Fatal(err)
	}
	other.port = uint16(otherPort)

	app := d.AppPool(t)
	db := New(app)
	read := func(what string) {
		t.Helper()
		q, err := db.Reads(ctx, e.OrgID)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := q.SearchBodies(ctx, sqlc.SearchBodiesParams{OrgID: e.OrgID, Ids: []uuid.UUID{e.ID}})
		if err != nil || len(rows) != 1 || rows[0].Body != "read on the org's worker" {
			t.Fatalf("%s: %d rows, %v; want the entry's body", what, len(rows), err)
		}
	}
	read("first read")
	r := db.routes
	pool, addr := r.pool(ctx, e.OrgID)
	if pool == app || addr != (nodeAddr{host, uint16(port)}) {
		t.Fatalf("the org's reads go to %v (coordinator: %v), want its worker %s:%d", addr, pool == app, host, port)
	}

	// A transaction goes to the worker only when its caller marks it so
	// (it takes no advisory lock); the others begin on the coordinator.
	var coordPort int32
	if err := app.QueryRow(ctx, "SELECT inet_server_port()").Scan(&coordPort); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		ctx  context.Context
		want int32
	}{
		{"marked for the org's worker", OnOrgWorker(AsOrg(ctx, e.OrgID)), port},
		{"not marked", AsOrg(ctx, e.OrgID), coordPort},
	} {
		tx, err := db.Scoped().Begin(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got int32
		err = tx.QueryRow(c.ctx, "SELECT inet_server_port()").Scan(&got)
		tx.Rollback(ctx)
		if err != nil || got != c.want {
			t.Errorf("a transaction %s ran on port %d (%v), want %d", c.what, got, err, c.want)
		}
	}

	// The embeddings' writes of one org (OrgTx) begin there too.
	orgTxPort := func() int32 {
		t.Helper()
		var got int32
		if err := db.OrgTx(ctx, e.OrgID, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT inet_server_port()").Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// And its delegated functions' calls (OrgCall: the indexer's batch).
	orgCallPort := func() int32 {
		t.Helper()
		var got int32
		if err := db.OrgCall(ctx, e.OrgID, func(p *pgxpool.Pool) error {
			return p.QueryRow(ctx, "SELECT inet_server_port()").Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := orgTxPort(); got != port {
		t.Errorf("an org's transaction (OrgTx) ran on port %d, want its worker's %d", got, port)
	}
	if got := orgCallPort(); got != port {
		t.Errorf("an org's call (OrgCall) ran on port %d, want its worker's %d", got, port)
	}

	// The read ran on the worker as the statement itself, renamed to the
	// org's shards (orgcall.Shards learnt the org's shard and the text).
	var shard int64
	if err := app.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('knowledge', $1::uuid)`, e.OrgID).Scan(&shard); err != nil {
		t.Fatal(err)
	}
	var bodiesSQL, name string
	db.calls.m.Range(func(k, v any) bool {
		bodiesSQL, name = k.(string), v.(*orgcall.Statement).Name()
		return false
	})
	if got, ok := r.shards.Org(e.OrgID); !ok || got != shard {
		t.Fatalf("the org's shard learnt: %d, %v; want %d", got, ok, shard)
	}
	if text, ok := r.shards.Text(name, shard); !ok || !strings.Contains(text, fmt.Sprintf("knowledge_%d", shard)) {
		t.Fatalf("the statement renamed to the org's shards: %q, %v", text, ok)
	}
	// A shard split or moved since it was learnt: the text held for the
	// org is another shard group's (here another org's on the same
	// worker). The rows are still the org's, through knowledge_run_org,
	// and the org is learnt again.
	var stranger uuid.UUID
	var otherShard int64
	for range 1000 {
		stranger = uuid.New()
		var onNode bool
		if err := app.QueryRow(ctx, `SELECT s, EXISTS (SELECT 1 FROM pg_dist_shard_placement p WHERE p.shardid = s AND p.nodeport = $2)
			FROM get_shard_id_for_distribution_column('knowledge', $1::uuid) AS s`, stranger, port).Scan(&otherShard, &onNode); err != nil {
			t.Fatal(err)
		}
		if onNode && otherShard != shard {
			break
		}
	}
	var otherText string
	if err := d.Pool.QueryRow(ctx, `SELECT result FROM run_command_on_workers(format('SELECT knowledge_org_sql(%L::uuid, %L)', $1::text, $2::text))
		WHERE success LIMIT 1`, stranger, bodiesSQL).Scan(&otherText); err != nil || !strings.Contains(otherText, fmt.Sprintf("knowledge_%d", otherShard)) {
		t.Fatalf("the statement renamed to another shard group: %v", err)
	}
	r.shards.SetOrg(e.OrgID, otherShard)
	r.shards.SetText(name, otherShard, otherText)
	read("with its shard learnt before a split")
	if got, ok := r.shards.Org(e.OrgID); ok && got != shard {
		t.Fatalf("after the read the org's shard is still the stale %d", got)
	}
	read("after its shard was learnt again")
	if got, ok := r.shards.Org(e.OrgID); !ok || got != shard {
		t.Fatalf("the org's shard learnt again: %d, %v; want %d", got, ok, shard)
	}

	route := func(a nodeAddr) {
		r.mu.Lock()
		r.orgs[e.OrgID] = orgRoute{addr: a, at: time.Now()}
		r.mu.Unlock()
	}
	route(other)
	read("routed to the other worker")

	nowhere := nodeAddr{"127.0.0.1", 1}
	route(nowhere)
	read("routed to an address nothing answers on")
	if pool, _ := r.pool(ctx, e.OrgID); pool != app {
		t.Fatal("after a worker could not be reached, its orgs' reads still go to it, want the coordinator for a while")
	}
	// An OrgTx that cannot begin on the worker begins on the coordinator,
	// and an OrgCall that cannot reach it runs there.
	for what, onPort := range map[string]func() int32{"OrgTx": orgTxPort, "OrgCall": orgCallPort} {
		r.mu.Lock()
		r.nodes[nowhere].badUntil = time.Time{} // tried again
		r.mu.Unlock()
		route(nowhere)
		if got := onPort(); got != coordPort {
			t.Errorf("an %s whose worker cannot be reached ran on port %d, want the coordinator's %d", what, got, coordPort)
		}
	}
}
