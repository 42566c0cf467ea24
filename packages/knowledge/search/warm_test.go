package search_test

import (
	"context"
	"testing"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// A connection warmed by WarmConn (db.AfterConnect) holds the ranking
// statement with its generic plan already built, so its first search does
// not plan; a connection whose warm-up fails (no schema) still connects.
func TestWarmConnCachesTheSearchPlan(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "on a cluster the ranking statements are prepared on the org's worker (knowledge_run_org), not on the coordinator's connection")
	ctx := context.Background()
	d := testenv.Postgres(t)
	s := search.New(data.New(d.Pool), search.Options{})
	pool, err := db.Connect(d.URL, db.AfterConnect(s.WarmConn))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var plans int64
	// Both ranking statements (lexical and vector) read the org's
	// statistics row: each is prepared with its generic plan made.
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE generic_plans > 0) FROM pg_prepared_statements
		WHERE statement LIKE '%knowledge_search_stats%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&plans); err != nil {
		t.Fatal(err)
	}
	if plans != 2 {
		t.Fatalf("the new connection holds %d planned search statements, want the lexical and the vector one", plans)
	}
	cold, err := db.Connect(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	if err := cold.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
		WHERE statement LIKE '%knowledge_search_stats%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&plans); err != nil || plans != 0 {
		t.Fatalf("a connection without the hook: %d search statements, %v (the check proves nothing)", plans, err)
	}

	empty := testenv.EmptyPostgres(t)
	bare, err := db.Connect(empty.URL, db.AfterConnect(s.WarmConn))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if err := bare.Ping(ctx); err != nil {
		t.Fatalf("a failed warm-up must not fail the connection: %v", err)
	}
}
