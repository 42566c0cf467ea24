package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestReadyAsTheHandler prepares one org's entries twice, in two copies
// of one database: by ready, and by the worker's embeddings handler
// (jobs.EmbedHandler.Process, 64 entries a batch, as the worker takes
// them) then IndexAll. The two must end alike in everything the handler
// writes and a search reads: each entry's embedding columns and vector,
// the chunks of a long entry, the org's counts, the vector indexes and the
// catalog's counters the never-analyzed planner reads, and the top hits.
func TestReadyAsTheHandler(t *testing.T) {
	ctx := context.Background()
	base := testenv.DatabaseURL()
	stamp := randomHex(3)
	a, err := createDatabase(ctx, base, "mcpbench_check_ready_"+stamp, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.drop(context.Background(), base) })
	if err := a.bulkStore(ctx, 0, 200, nil); err != nil {
		t.Fatal(err)
	}
	// A long entry, cut in chunks: written by the handler's own write.
	_, body, _ := note(1)
	long := strings.Repeat(body+"\n\n", 12000/len(body)+1)
	if _, err := a.service().Store(ctx, knowledge.Caller{OrgID: a.org, AgentID: a.agent},
		knowledge.StoreInput{Title: "A long note", Body: long}); err != nil {
		t.Fatal(err)
	}
	b, err := createDatabase(ctx, base, "mcpbench_check_handler_"+stamp, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.drop(context.Background(), base) })

	ea, ia, err := a.ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eb, ib, err := readyByHandler(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if ea != 201 || eb != 201 || ia != ib {
		t.Fatalf("embedded %d (ready) and %d (handler), want 201 each; indexed %d and %d", ea, eb, ia, ib)
	}

	// On a Citus coordinator the tables are empty shells whose pg_class
	// counters an index build sets from the shards or not, by Citus's
	// timing (the comparison failed one run in two), and the search's plans
	// are made on the workers from the shards' (knowledge_run_org): there
	// the indexes are compared by name and validity only.
	catalog := `SELECT c.relname, c.reltuples, c.relpages, c.relallvisible, i.indisvalid
			FROM pg_class c LEFT JOIN pg_index i ON i.indexrelid = c.oid
			WHERE c.relname IN ('knowledge', 'knowledge_chunks') OR c.relname LIKE '%hnsw%' ORDER BY 1`
	if testenv.IsCluster() {
		catalog = `SELECT c.relname, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
			WHERE c.relname LIKE '%hnsw%' ORDER BY 1`
	}
	for _, c := range []struct{ what, sql string }{
		{"entries", `SELECT id, embedding_status, embedding_model, embedding_generation, coalesce(embedding_error, ''),
			embedded_at IS NOT NULL, embedding FROM knowledge ORDER BY id`},
		{"chunks", `SELECT entry_id, embedding_model, chunk, start_char, end_char, embedding FROM knowledge_chunks ORDER BY 1, 2, 3`},
		{"counts", `SELECT kind, key, sum(n)::bigint FROM (SELECT kind, key, n FROM knowledge_counts
			UNION ALL SELECT kind, key, delta FROM knowledge_count_deltas) x GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2`},
		{"index queue and postings", `SELECT (SELECT count(*) FROM knowledge_index_queue), (SELECT count(*) FROM knowledge_postings)`},
		{"vector indexes and catalog counters", catalog},
	} {
		ra, rb := dump(t, a, c.sql), dump(t, b, c.sql)
		if len(ra) == 0 {
			t.Errorf("%s: no rows", c.what)
		}
		if !slices.Equal(ra, rb) {
			t.Errorf("%s differ:\nready:   %.600v\nhandler: %.600v", c.what, ra, rb)
		}
	}
	var chunks int
	if err := a.owner.QueryRow(ctx, "SELECT count(*) FROM knowledge_chunks").Scan(&chunks); err != nil || chunks == 0 {
		t.Errorf("the long entry has %d chunks (%v), want some", chunks, err)
	}

	c := knowledge.Caller{OrgID: a.org, AgentID: a.agent}
	limit := 10
	for i := range 10 {
		q := knowledge.SearchInput{Query: query(i * 19), Limit: &limit}
		ha, hb := hits(t, a, c, q), hits(t, b, c, q)
		if len(ha) == 0 || !slices.Equal(ha, hb) {
			t.Errorf("search %q: ready %v, handler %v", q.Query, ha, hb)
		}
	}

	// -base-index-versions: b's index of the entries over every version,
	// valid, the catalog's counters as they were; asked again, nothing of
	// heads only is left to replace.
	before := dump(t, b, catalog)
	if err := b.indexAllVersions(ctx); err != nil {
		t.Fatal(err)
	}
	defs := dump(t, b, `SELECT i.indexdef, x.indisvalid FROM pg_indexes i JOIN pg_index x ON x.indexrelid = to_regclass(i.indexname)
		WHERE i.tablename = 'knowledge' AND i.indexname LIKE 'knowledge_hnsw%'`)
	if len(defs) != 1 || strings.Contains(defs[0], "head_id") || !strings.HasSuffix(defs[0], "true]") {
		t.Errorf("the index of every version: %v", defs)
	}
	if after := dump(t, b, catalog); !slices.Equal(before, after) {
		t.Errorf("catalog counters changed:\nbefore: %v\nafter:  %v", before, after)
	}
	if err := b.indexAllVersions(ctx); err == nil || !strings.Contains(err.Error(), "no HNSW index of heads only") {
		t.Errorf("asked again: %v", err)
	}
}

// readyByHandler is what ready stands in for: the worker's handler, then
// its indexer.
func readyByHandler(ctx context.Context, d *database) (embedded, indexed int, err error) {
	js, err := d.pendingJobs(ctx)
	if err != nil {
		return 0, 0, err
	}
	h := jobs.NewEmbedHandler(d.owner, embed.NewLocal(), jobs.HandlerOptions{})
	for batch := range slices.Chunk(js, 64) {
		if err := h.Process(ctx, batch); err != nil {
			return 0, 0, err
		}
	}
	n, err := knowledge.NewMaintenance(d.service(), knowledge.MaintenanceConfig{}).IndexAll(ctx)
	return len(js), int(n), err
}

// dump is sql's rows, each printed; vectors by their values.
func dump(t *testing.T, d *database, sql string) []string {
	t.Helper()
	rows, err := d.owner.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vs, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vs {
			if pv, ok := v.(pgvector.Vector); ok {
				vs[i] = pv.Slice()
			}
		}
		out = append(out, fmt.Sprint(vs))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func hits(t *testing.T, d *database, c knowledge.Caller, q knowledge.SearchInput) []string {
	t.Helper()
	res, err := d.service().Search(context.Background(), c, q)
	if err != nil {
		t.Fatal(err)
	}
	if !res.VectorSearch {
		t.Fatalf("search %q: no vector search (%s)", q.Query, res.Notice)
	}
	var out []string
	for _, h := range res.Hits {
		out = append(out, fmt.Sprintf("%s %.6f", h.ID, h.Score))
	}
	return out
}
