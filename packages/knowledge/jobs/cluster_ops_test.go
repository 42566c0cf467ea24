package jobs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// clusterDatabase makes a database of the test's own on every node of the
// cluster CLUSTER_DATABASE_URL names (the test is skipped without it), as
// scripts/cluster.sh prepares `knowledge`: citus (first), vector and
// pg_trgm on every node, the coordinator and its workers registered, then
// migrated on the coordinator, with 8 shards a table (the cluster's own
// database has 32: fewer make the migration faster and change no rule).
// It is dropped on every node when t ends. It returns the database's URL
// as the schema owner and a pool on it.
func clusterDatabase(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	base := clusterURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	coord, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("CLUSTER_DATABASE_URL: %v", err)
	}
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeport`)
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		host string
		port int
	}
	nodes := []node{{coord.Host, int(coord.Port)}}
	for rows.Next() {
		var n node
		if err := rows.Scan(&n.host, &n.port); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	conn.Close(ctx)
	if rows.Err() != nil || len(nodes) < 2 {
		t.Fatalf("the cluster has no workers (%v)", rows.Err())
	}
	var b [5]byte
	rand.Read(b[:])
	name := "ops_" + hex.EncodeToString(b[:])
	at := func(n node, database string) string {
		u, _ := url.Parse(base)
		u.Host = n.host + ":" + strconv.Itoa(n.port)
		u.Path = "/" + database
		return u.String()
	}
	exec := func(u string, stmts ...string) {
		t.Helper()
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		for _, s := range stmts {
			if _, err := c.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %s: %v", u, s, err)
			}
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range nodes {
			c, err := pgx.Connect(ctx, at(n, "postgres"))
			if err != nil {
				t.Logf("drop %s on %s:%d: %v", name, n.host, n.port, err)
				continue
			}
			if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				t.Logf("drop %s on %s:%d: %v", name, n.host, n.port, err)
			}
			c.Close(ctx)
		}
	})
	for _, n := range nodes {
		exec(at(n, "postgres"), "CREATE DATABASE "+name)
		exec(at(n, name), "CREATE EXTENSION citus", "CREATE EXTENSION vector", "CREATE EXTENSION pg_trgm")
	}
	reg := []string{fmt.Sprintf("SELECT citus_set_coordinator_host('%s', %d)", nodes[0].host, nodes[0].port)}
	for _, n := range nodes[1:] {
		reg = append(reg, fmt.Sprintf("SELECT citus_add_node('%s', %d)", n.host, n.port))
	}
	reg = append(reg, "ALTER DATABASE "+name+" SET citus.shard_count = 8")
	u := at(nodes[0], name)
	exec(u, reg...)
	pool, err := db.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	start := time.Now()
	if _, err := db.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	t.Logf("cluster database %s made and migrated in %.1f s", name, time.Since(start).Seconds())
	return u, pool
}

// shardFigures are knowledge_shard_activity's figures of one shard.
type shardFigures struct {
	live, insSinceVacuum int64
	analyzed             bool
}

func figuresOf(ctx context.Context, t *testing.T, pool *pgxpool.Pool, shard string) shardFigures {
	t.Helper()
	var f shardFigures
	var ok bool
	var errText *string
	err := pool.QueryRow(ctx, `SELECT ok, error, coalesce(live, 0), coalesce(ins_since_vacuum, 0), coalesce(analyzed, false)
		FROM knowledge_shard_activity(ARRAY['knowledge']) WHERE shard = $1`, shard).Scan(&ok, &errText, &f.live, &f.insSinceVacuum, &f.analyzed)
	if err != nil {
		t.Fatalf("figures of %s: %v", shard, err)
	}
	if !ok {
		t.Fatalf("figures of %s: the worker did not answer: %v", shard, *errText)
	}
	return f
}

// Upkeep on a cluster reads the shards' figures on their workers (the
// coordinator's of a distributed table stay at zero), vacuums and analyzes
// the shards that hold a bulk load, on their worker, and nothing once
// nothing changed; shards with nothing to do are never touched.
func TestClusterUpkeepPerShard(t *testing.T) {
	_, pool := clusterDatabase(t)
	ctx := context.Background()
	for _, tbl := range []string{"knowledge", "knowledge_index_queue", "knowledge_count_deltas"} {
		// Autovacuum (on in the cluster's workers) must not do Upkeep's work
		// first; the setting is passed on to every shard.
		if _, err := pool.Exec(ctx, "ALTER TABLE "+tbl+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
	a := testfactory.Agent(ctx, t, pool, nil)
	const n = 3000
	if _, err := pool.Exec(ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'bulk ' || g, 'a bulk load of entries, number ' || g, $2 FROM generate_series(1, $3::int) g`, a.OrgID, a.ID, n); err != nil {
		t.Fatal(err)
	}
	var shard string
	if err := pool.QueryRow(ctx, `SELECT shard FROM knowledge_org_shard($1)`, a.OrgID).Scan(&shard); err != nil {
		t.Fatal(err)
	}
	// The coordinator's own counters of the distributed table: nothing.
	var coordLive int64
	if err := pool.QueryRow(ctx, `SELECT pg_stat_get_live_tuples('knowledge'::regclass)`).Scan(&coordLive); err != nil {
		t.Fatal(err)
	}
	if coordLive != 0 {
		t.Logf("the coordinator counts %d live rows of knowledge (expected 0: a shell)", coordLive)
	}
	// The worker's counters reach its statistics within a second or so.
	deadline := time.Now().Add(15 * time.Second)
	for f := figuresOf(ctx, t, pool, shard); f.live < n; f = figuresOf(ctx, t, pool, shard) {
		if time.Now().After(deadline) {
			t.Fatalf("the org's shard %s counts %d live rows, want %d", shard, f.live, n)
		}
		time.Sleep(200 * time.Millisecond)
	}

	m := knowledge.NewMaintenance(knowledge.New(pool, knowledge.Options{Embedder: embed.NewLocal()}), knowledge.MaintenanceConfig{})
	rep, err := m.Upkeep(ctx)
	if err != nil {
		t.Fatalf("upkeep: %v", err)
	}
	t.Logf("first pass: %+v", rep)
	if !slices.Contains(rep.Vacuumed, shard) {
		t.Errorf("the first pass vacuumed %v, not the org's shard %s", rep.Vacuumed, shard)
	}
	for _, v := range rep.Vacuumed {
		if !strings.HasPrefix(v, "knowledge") {
			t.Errorf("vacuumed %q: not a shard of the module's tables", v)
		}
	}
	if len(rep.Skipped) > 0 {
		t.Errorf("shards skipped with every worker up: %v", rep.Skipped)
	}
	f := figuresOf(ctx, t, pool, shard)
	if !f.analyzed || f.insSinceVacuum != 0 {
		t.Errorf("after the pass the shard's figures are %+v: want analyzed, no row inserted since its vacuum", f)
	}
	// The first pass ended by giving the 3,000 entries their
	// duplicate-check keys (a rewrite of each row): the second vacuums the
	// dead rows that left on the shard, the third has nothing to do.
	if rep.SimilarKeys != n {
		t.Errorf("the first pass gave %d entries their keys, want %d", rep.SimilarKeys, n)
	}
	rep, err = m.Upkeep(ctx)
	if err != nil {
		t.Fatalf("second upkeep: %v", err)
	}
	if !slices.Contains(rep.Vacuumed, shard) {
		t.Errorf("the second pass did not vacuum the rewritten rows of %s: %+v", shard, rep)
	}
	rep, err = m.Upkeep(ctx)
	if err != nil {
		t.Fatalf("third upkeep: %v", err)
	}
	if len(rep.Vacuumed)+len(rep.Analyzed) > 0 {
		t.Errorf("the third pass, with nothing changed, did %+v", rep)
	}
}

// vectorLoad stores n entries in org through the service and embeds them
// (the worker's handler), returning their ids.
func vectorLoad(ctx context.Context, t *testing.T, pool *pgxpool.Pool, c knowledge.Caller, n int, topic string) []uuid.UUID {
	t.Helper()
	emb := embed.NewLocal()
	enq := &clusterEnqueuer{}
	svc := knowledge.New(pool, knowledge.Options{Embedder: emb, Enqueuer: enq})
	var ids []uuid.UUID
	for i := range n {
		r, err := svc.Store(ctx, c, knowledge.StoreInput{
			Title: fmt.Sprintf("%s note %d", topic, i),
			Body:  fmt.Sprintf("About %s: observation %d of the fleet, with its own words w%d and %s details.", topic, i, i, topic),
			Tags:  []string{topic},
		})
		if err != nil {
			t.Fatalf("store: %v", err)
		}
		ids = append(ids, r.ID)
	}
	if err := jobs.NewEmbedHandler(pool, emb, jobs.HandlerOptions{}).Process(ctx, enq.take()); err != nil {
		t.Fatalf("embed: %v", err)
	}
	return ids
}

// ctl isolate-org's domain call: a big org gets a shard of its own (every
// co-located table's range with it), its rows and its own HNSW index
// follow (the index is valid on the new shard, as its worker says), its
// search still finds its entries, and a second call says it is isolated
// already. An unknown org is not found.
func TestClusterIsolateOrg(t *testing.T) {
	_, pool := clusterDatabase(t)
	ctx := context.Background()
	big := testfactory.Agent(ctx, t, pool, nil)
	other := testfactory.Agent(ctx, t, pool, nil)
	bc := knowledge.Caller{OrgID: big.OrgID, AgentID: big.ID}
	ids := vectorLoad(ctx, t, pool, bc, 40, "glacier")
	vectorLoad(ctx, t, pool, knowledge.Caller{OrgID: other.OrgID, AgentID: other.ID}, 45, "volcano")

	svc := knowledge.New(pool, knowledge.Options{Embedder: embed.NewLocal()})
	m := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{OrgVectorIndexMinDocs: 30})
	if _, err := m.IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	// The space's indexes, then one org's own a pass (the larger first).
	own := knowledge.SpaceOf(embed.NewLocal()).OrgIndexName(big.OrgID)
	for range 3 {
		if _, err := m.UpkeepVectorIndexes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var before int64
	if err := pool.QueryRow(ctx, `SELECT shard_id FROM knowledge_org_shard($1)`, big.OrgID).Scan(&before); err != nil {
		t.Fatal(err)
	}
	// Writes to the org's shard wait during the copy: the loopback
	// cluster's servers do not allow citus as a logical decoding output
	// plugin (output_plugin_libraries), which the default mode needs.
	rep, err := m.IsolateOrg(ctx, big.OrgID, knowledge.IsolateBlockWrites)
	if err != nil {
		t.Fatalf("isolate: %v", err)
	}
	t.Logf("isolated: %+v", rep)
	if rep.AlreadyIsolated || rep.FromShard != before || rep.Shard == before {
		t.Errorf("report %+v: want a move from shard %d to a new one", rep, before)
	}
	var present bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = $1)`, own).Scan(&present); err != nil || !present {
		t.Fatalf("Upkeep built no index of the org's own (%s): %v", own, err)
	}
	if len(rep.VectorIndexes) != 1 || !rep.VectorIndexes[0].Valid {
		t.Errorf("the org's own index %s on its new shard: %+v, want one, valid", own, rep.VectorIndexes)
	}
	var minv, maxv string
	var rowsOnShard int
	if err := pool.QueryRow(ctx, `SELECT shardminvalue, shardmaxvalue FROM pg_dist_shard WHERE shardid = $1`, rep.Shard).Scan(&minv, &maxv); err != nil {
		t.Fatal(err)
	}
	if minv != maxv {
		t.Errorf("the new shard covers %s..%s: not one org's hash", minv, maxv)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM knowledge WHERE org_id = $1 AND embedding IS NOT NULL`, big.OrgID).Scan(&rowsOnShard); err != nil {
		t.Fatal(err)
	}
	if rowsOnShard != len(ids) {
		t.Errorf("%d of the org's %d embedded entries after the move", rowsOnShard, len(ids))
	}
	res, err := svc.Search(ctx, bc, knowledge.SearchInput{Query: "glacier observation"})
	if err != nil {
		t.Fatalf("search after the move: %v", err)
	}
	if len(res.Hits) == 0 {
		t.Error("the org's search finds nothing after the move")
	}
	again, err := m.IsolateOrg(ctx, big.OrgID, "")
	if err != nil || !again.AlreadyIsolated || again.Shard != rep.Shard {
		t.Errorf("second isolate: %+v, %v: want already isolated in shard %d", again, err, rep.Shard)
	}
	if _, err := m.IsolateOrg(ctx, uuid.New(), ""); errs.CodeOf(err) != errs.CodeNotFound {
		t.Errorf("unknown org: %v, want not found", err)
	}
}

// On a single PostgreSQL there is no shard to isolate: a clear refusal,
// nothing changed.
func TestIsolateOrgRefusedOnSingleNode(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "its subject is a single PostgreSQL's refusal (TestClusterIsolateOrg is the cluster's)")
	pg := testenv.Postgres(t)
	ctx := context.Background()
	a := testfactory.Agent(ctx, t, pg.Pool, nil)
	m := knowledge.NewMaintenance(knowledge.New(pg.Pool, knowledge.Options{}), knowledge.MaintenanceConfig{})
	_, err := m.IsolateOrg(ctx, a.OrgID, "")
	if errs.CodeOf(err) != errs.CodeInvalidArgument || !strings.Contains(err.Error(), "not a Citus cluster") {
		t.Errorf("isolate on a single node: %v, want a refusal naming the missing cluster", err)
	}
	if _, err := m.IsolateOrg(ctx, a.OrgID, "copy_everything"); errs.CodeOf(err) != errs.CodeInvalidArgument || !strings.Contains(err.Error(), "transferMode") {
		t.Errorf("a bad transfer mode: %v, want invalid transferMode", err)
	}
}

// loadToMigrate gives three orgs of pool entries with their vectors,
// relations, a supersession and a document replaced once (its sections,
// their PART_OF relations, the section superseded), all embedded and
// lexically indexed; it returns the orgs' callers.
func loadToMigrate(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []knowledge.Caller {
	t.Helper()
	var orgs []knowledge.Caller
	for i, topic := range []string{"glacier", "volcano", "reef"} {
		a := testfactory.Agent(ctx, t, pool, nil)
		c := knowledge.Caller{OrgID: a.OrgID, AgentID: a.ID}
		orgs = append(orgs, c)
		ids := vectorLoad(ctx, t, pool, c, 10+5*i, topic)
		enq := &clusterEnqueuer{}
		svc := knowledge.New(pool, knowledge.Options{Embedder: embed.NewLocal(), Enqueuer: enq})
		for j := 1; j < len(ids); j += 3 {
			if _, err := svc.Link(ctx, c, knowledge.LinkInput{FromID: ids[j], ToID: ids[j-1], Type: "DEPENDS_ON"}); err != nil {
				t.Fatalf("link: %v", err)
			}
		}
		if _, err := svc.Supersede(ctx, c, ids[0], ids[2]); err != nil {
			t.Fatalf("supersede: %v", err)
		}
		for _, last := range []string{"Restart the " + topic + " worker.", "Restart it, then check its shards."} {
			if _, err := svc.StoreDocument(ctx, c, routerPlanDocument(last)); err != nil {
				t.Fatalf("store document: %v", err)
			}
		}
		if err := jobs.NewEmbedHandler(pool, embed.NewLocal(), jobs.HandlerOptions{}).Process(ctx, enq.take()); err != nil {
			t.Fatalf("embed the document: %v", err)
		}
	}
	if _, err := knowledge.NewMaintenance(knowledge.New(pool, knowledge.Options{Embedder: embed.NewLocal()}), knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	return orgs
}

// A single node's database moved into a cluster with
// scripts/cluster-migrate.sh keeps every row of every table, byte for
// byte: entries and their vectors, relations, documents and their
// sections, the lexical index and its statistics, the org counters,
// tokens' secrets; the orgs' statistics read the same through the service,
// and search finds the same entries.
func TestClusterMigrateSingleNode(t *testing.T) {
	targetURL, target := clusterDatabase(t)
	single := testenv.Postgres(t)
	ctx := context.Background()
	orgs := loadToMigrate(ctx, t, single.Pool)
	single1 := knowledge.New(single.Pool, knowledge.Options{Embedder: embed.NewLocal()})

	out, err := exec.CommandContext(ctx, "bash", "../../../scripts/cluster-migrate.sh", single.URL, targetURL).CombinedOutput()
	t.Logf("cluster-migrate.sh:\n%s", out)
	if err != nil {
		t.Fatalf("cluster-migrate.sh: %v", err)
	}

	// Every table, row for row: a digest of its rows' text, in order.
	var tables []string
	rows, err := single.Pool.Query(ctx, `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND c.relname <> 'goose_db_version' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	digest := func(p *pgxpool.Pool, tbl string) (n int64, sum string) {
		t.Helper()
		q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(r, E'\n' ORDER BY r)), '') FROM (SELECT t::text AS r FROM %s t) x`, pgx.Identifier{tbl}.Sanitize())
		if err := p.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: %v", tbl, err)
		}
		return n, sum
	}
	nonEmpty := 0
	for _, tbl := range tables {
		sn, ss := digest(single.Pool, tbl)
		cn, cs := digest(target, tbl)
		if sn != cn || ss != cs {
			t.Errorf("%s: %d rows (digest %s) on the single node, %d (%s) on the cluster", tbl, sn, ss, cn, cs)
		}
		if sn > 0 {
			nonEmpty++
		}
	}
	t.Logf("%d tables compared, %d of them with rows", len(tables), nonEmpty)

	cluster1 := knowledge.New(target, knowledge.Options{Embedder: embed.NewLocal()})
	for _, c := range orgs {
		want, err := single1.Operations().Stats(ctx, c.OrgID, 10)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cluster1.Operations().Stats(ctx, c.OrgID, 10)
		if err != nil {
			t.Fatalf("stats on the cluster: %v", err)
		}
		want.ElapsedMs, got.ElapsedMs = 0, 0
		if fmt.Sprintf("%+v", *want) != fmt.Sprintf("%+v", *got) {
			t.Errorf("org %s's statistics:\n single  %+v\n cluster %+v", c.OrgID, *want, *got)
		}
		ws, err := single1.Search(ctx, c, knowledge.SearchInput{Query: "observation of the fleet details"})
		if err != nil {
			t.Fatal(err)
		}
		gs, err := cluster1.Search(ctx, c, knowledge.SearchInput{Query: "observation of the fleet details"})
		if err != nil {
			t.Fatalf("search on the cluster: %v", err)
		}
		if len(ws.Hits) == 0 || len(gs.Hits) != len(ws.Hits) {
			t.Errorf("org %s: %d hits on the single node, %d on the cluster", c.OrgID, len(ws.Hits), len(gs.Hits))
		}
	}
}
