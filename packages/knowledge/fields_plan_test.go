package knowledge_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// A listing filtered by an entry field reads the entries that pass the
// filter, never the org, on tables never analyzed: kind and exact source
// walk their own index in the page's order; metadata and a source prefix
// read the bitmap of their index (the org's matches only: another org's
// entries with the same metadata are not in it) and sort it.
func TestListFilterPlans(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, org := range []uuid.UUID{b.org, b.other} {
		if _, err := b.pool.Exec(b.ctx, `
			INSERT INTO knowledge (org_id, title, body, kind, source, metadata, created_at)
			SELECT $1, 'note ' || i, 'body ' || i,
			       (ARRAY['semantic','episodic','procedural','reference'])[1 + i % 4],
			       'https://wiki.example.com/' || (i % 100) || '/' || i,
			       jsonb_build_object('env', CASE WHEN i % 2 = 0 THEN 'prod' ELSE 'staging' END, 'shard', i % 500),
			       now() - i * interval '1 second'
			FROM generate_series(1, 5000) i`, org); err != nil {
			t.Fatal(err)
		}
	}
	conn, notices := explainConn(t, b.pool, "SET auto_explain.log_nested_statements = on")
	ctx := context.Background()
	page := func(name string, p sqlc.ListEntriesParams, rows int, uses string) {
		t.Helper()
		*notices = nil
		p.SnippetChars, p.OrgID, p.BeforeAt, p.BeforeID, p.MaxRows = 10, b.org, time.Now().Add(time.Hour), uuid.Max, 21
		p.CreatedAfter, p.Tags = time.Time{}, []string{}
		q := sqlc.New(pgbatch.New(conn))
		if err := q.ListConfig(ctx, p.ByIds); err != nil {
			t.Fatal(err)
		}
		got, err := q.ListEntries(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != rows {
			t.Fatalf("%s: %d rows, want %d", name, len(got), rows)
		}
		wantPlan(t, name, *notices, uses)
	}
	page("kind", sqlc.ListEntriesParams{Kind: ptr("episodic")}, 21, "Index Scan Backward using knowledge_org_kind_idx")
	page("source", sqlc.ListEntriesParams{Source: ptr("https://wiki.example.com/7/407")}, 1, "Index Scan Backward using knowledge_org_source_idx")

	// Metadata and a source prefix: the matches by their own index, then
	// the page from them by the primary key.
	*notices = nil
	ids, err := sqlc.New(conn).MetadataMatches(ctx, sqlc.MetadataMatchesParams{OrgID: b.org, Metadata: []byte(`{"shard": 7}`), Max: 1001})
	if err != nil || len(ids) != 10 {
		t.Fatalf("metadata matches: %d %v", len(ids), err)
	}
	wantPlan(t, "metadata matches", *notices, "Bitmap Index Scan on knowledge_metadata_idx")
	page("metadata", sqlc.ListEntriesParams{Metadata: []byte(`{"shard": 7}`), ByIds: true, Ids: ids}, 10, "knowledge_pkey")

	*notices = nil
	prefix := "https://wiki.example.com/7/"
	ids, err = sqlc.New(conn).SourcePrefixMatches(ctx, sqlc.SourcePrefixMatchesParams{OrgID: b.org, Prefix: prefix, PrefixEnd: prefix + "\U0010FFFF", Max: 1001})
	if err != nil || len(ids) != 50 {
		t.Fatalf("prefix matches: %d %v", len(ids), err)
	}
	wantPlan(t, "prefix matches", *notices, "knowledge_org_source_idx")
	page("prefix", sqlc.ListEntriesParams{SourcePrefix: &prefix, SourceEnd: ptr(prefix + "\U0010FFFF"), ByIds: true, Ids: ids}, 21, "knowledge_org_source_idx")
}

// wantPlan fails unless the plans use the index named and neither walk the
// org's entries in created order nor read the table whole.
func wantPlan(t *testing.T, name string, notices []string, uses string) {
	t.Helper()
	plan := strings.Join(notices, "\n")
	if !strings.Contains(plan, uses) || strings.Contains(plan, "knowledge_org_created_idx") || strings.Contains(plan, "Seq Scan") {
		t.Fatalf("%s: the plan does not read %q only:\n%s", name, uses, plan)
	}
}
