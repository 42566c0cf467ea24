package search_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// The snippet look-up of a search (SearchBodiesNear: each hit's chunk
// nearest the query) reads the hits' own chunks by the primary key, in the
// plan a connection keeps for it (generic), on tables never analyzed:
// with the model and width as index conditions, the planner took the
// space index (org, model, width) and read every chunk of the org for each
// hit. It still centres a hit on its nearer chunk, and on no chunk of
// another model or width.
func TestSnippetLookUpReadsOnlyTheHitsChunks(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "EXPLAINs the statement's generic plan, which Citus cannot route (could not create distributed plan)")
	b := setup(t)
	const model, dims = "snippet-model", 64
	if _, err := b.pool.Exec(b.ctx, `
		INSERT INTO knowledge (org_id, title, body, created_by_agent_id, embedding, embedding_status, embedding_model, embedded_at)
		SELECT $1, 'note ' || i, repeat('body ', 100), $2,
		       (SELECT array_agg(CASE WHEN d = 1 THEN 1 ELSE 0 END)::real[] FROM generate_series(1, $3::int) d WHERE i > 0)::vector,
		       'ready', $4, now()
		FROM generate_series(1, 300) i`, b.org, b.alice.AgentID, dims, model); err != nil {
		t.Fatal(err)
	}
	// Three chunks of every entry: chunk 1 points where the query does
	// (nearer than the entry's own vector), chunk 2 elsewhere, and chunk 3
	// is of another model, pointing where the query does too.
	if _, err := b.pool.Exec(b.ctx, `
		INSERT INTO knowledge_chunks (org_id, entry_id, chunk, start_char, end_char, embedding_model, embedding)
		SELECT k.org_id, k.id, c, c * 100, c * 100 + 100, CASE WHEN c = 3 THEN 'other-model' ELSE $2 END,
		       (SELECT array_agg(CASE WHEN d = CASE c WHEN 2 THEN 3 ELSE 2 END THEN 1 ELSE 0 END)::real[]
		        FROM generate_series(1, $3::int) d WHERE c > 0)::vector
		FROM knowledge k CROSS JOIN generate_series(1, 3) c
		WHERE k.org_id = $1`, b.org, model, dims); err != nil {
		t.Fatal(err)
	}
	ids := queryIDs(b.ctx, t, b.pool, "SELECT id FROM knowledge WHERE org_id = $1 ORDER BY id LIMIT 10", b.org)

	ctx := context.Background()
	conn, notices := testenv.ExplainConn(t, b.pool, "SET auto_explain.log_analyze = on", "SET plan_cache_mode = force_generic_plan")
	q := make([]float32, dims)
	q[1] = 1 // where chunk 1 points
	got, err := sqlc.New(conn).SearchBodiesNear(ctx, sqlc.SearchBodiesNearParams{
		OrgID: b.org, Ids: ids, QueryVec: pgvector.NewVector(q), Model: model,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("%d bodies for %d hits", len(got), len(ids))
	}
	for _, r := range got {
		if r.StartChar != 100 || r.EndChar != 200 {
			t.Fatalf("hit %s centred on [%d, %d), want chunk 1's [100, 200)", r.ID, r.StartChar, r.EndChar)
		}
	}
	plan := strings.Join(*notices, "\n")
	if !strings.Contains(plan, "knowledge_chunks_pkey") || strings.Contains(plan, "knowledge_chunks_space_idx") {
		t.Fatalf("the snippet look-up does not read the hits' chunks by the primary key:\n%s", plan)
	}
}

// A search with a query vector reads its hits' bodies (SearchBodiesNear)
// with the generic plan each connection makes once, not a plan made for
// every search (plan_cache_mode auto kept custom plans: 1.25 ms a search
// for a statement that runs in 0.1). Every connection of the service's
// pool is asked what it planned for the statement.
func TestSnippetLookUpKeepsOneGenericPlan(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "the bodies are read on the org's worker, not on the coordinator's connections")
	b := setup(t)
	for i := range 6 {
		b.store(t, b.alice, fmt.Sprintf("Connection pool note %d", i), "Size the connection pool to twice the cores of the database host.")
	}
	b.embedPending(t)
	b.indexAll(t)
	const conns = 2
	pool, err := db.Connect(b.db.AppURL() + fmt.Sprintf("&pool_max_conns=%d", conns))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	svc := knowledge.New(pool, b.opts)
	const searches = 8
	for range searches {
		res, err := svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "connection pool size"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) == 0 {
			t.Fatal("the search found nothing: no bodies were read")
		}
	}
	var generic, custom int64
	held := make([]*pgxpool.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range conns {
		c, err := pool.Acquire(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		var g, cu int64
		if err := c.QueryRow(b.ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements
			WHERE statement LIKE '%name: SearchBodiesNear%'`).Scan(&g, &cu); err != nil {
			t.Fatal(err)
		}
		generic, custom = generic+g, custom+cu
	}
	if generic+custom < searches {
		t.Fatalf("the pool's connections ran the bodies' statement %d times for %d searches (the check proves nothing)", generic+custom, searches)
	}
	if custom != 0 {
		t.Fatalf("the bodies' statement was planned for %d of its %d runs (custom plans); want the connection's generic plan", custom, generic+custom)
	}
}
