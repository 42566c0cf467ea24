package search_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// A listing filtered by an entry field reads the entries that pass the
// filter, never the org, on tables never analyzed: kind and exact source
// walk their own index in the page's order; metadata reads the range of
// its key/value pair in knowledge_metadata_pairs (the org's matches only:
// another org's entries with the same metadata are not in it) and a source
// prefix the range of its index, then the page from them by primary key,
// sorted; a document's sections (documentId) are read
// from its section rows, then by primary key, whatever other filter comes
// with it (not the kind's or the source's index, which would read every
// entry of the org of that kind or source).
func TestListFilterPlans(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads a single node's plans of the listing; on a cluster the coordinator's EXPLAIN shows the routed task, not the shard's plan")
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
	conn, notices := testenv.ExplainConn(t, b.pool, "SET auto_explain.log_nested_statements = on")
	ctx := context.Background()
	// A page read from given entries never touches the field indexes: each
	// entry by primary key.
	fieldIndexes := []string{"knowledge_org_kind_idx", "knowledge_org_source_idx", "knowledge_metadata_pairs_pkey"}
	// page reads a page as List does: by a walk (ids nil) or from ids.
	page := func(name string, p sqlc.ListEntriesParams, ids []uuid.UUID, rows int, uses string, avoid ...string) {
		t.Helper()
		*notices = nil
		p.SnippetChars, p.OrgID, p.BeforeAt, p.BeforeID, p.MaxRows = 10, b.org, time.Now().Add(time.Hour), uuid.Max, 21
		p.CreatedAfter, p.Tags = time.Time{}, []string{}
		got, err := search.ListEntriesAs(ctx, conn, p, ids != nil, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != rows {
			t.Fatalf("%s: %d rows, want %d", name, len(got), rows)
		}
		wantPlan(t, name, *notices, uses, avoid...)
	}
	page("kind", sqlc.ListEntriesParams{Kind: ptr("episodic")}, nil, 21, "Index Scan Backward using knowledge_org_kind_idx")
	page("source", sqlc.ListEntriesParams{Source: ptr("https://wiki.example.com/7/407")}, nil, 1, "Index Scan Backward using knowledge_org_source_idx")

	// Metadata and a source prefix: the matches by their own index, then
	// the page from them by the primary key.
	*notices = nil
	ids, err := sqlc.New(conn).MetadataMatches(ctx, sqlc.MetadataMatchesParams{OrgID: b.org, Metadata: []byte(`{"shard": 7}`), Max: 1001})
	if err != nil || len(ids) != 10 {
		t.Fatalf("metadata matches: %d %v", len(ids), err)
	}
	wantPlan(t, "metadata matches", *notices, "Index Only Scan using knowledge_metadata_pairs_pkey", "knowledge_pkey")
	page("metadata", sqlc.ListEntriesParams{Metadata: []byte(`{"shard": 7}`)}, ids, 10, "knowledge_pkey", fieldIndexes...)

	*notices = nil
	prefix := "https://wiki.example.com/7/"
	ids, err = sqlc.New(conn).SourcePrefixMatches(ctx, sqlc.SourcePrefixMatchesParams{OrgID: b.org, Prefix: prefix, PrefixEnd: prefix + "\U0010FFFF", Max: 1001})
	if err != nil || len(ids) != 50 {
		t.Fatalf("prefix matches: %d %v", len(ids), err)
	}
	wantPlan(t, "prefix matches", *notices, "knowledge_org_source_idx")
	page("prefix", sqlc.ListEntriesParams{SourcePrefix: &prefix, SourceEnd: ptr(prefix + "\U0010FFFF")}, ids, 21, "knowledge_pkey", fieldIndexes...)

	// documentId: a few documents (of the kind and with the source a
	// filter may name) among the org's 5,000 entries, and another org's.
	var doc *knowledge.DocumentResult
	for i, c := range []knowledge.Caller{b.eve, b.alice, b.alice, b.bob} {
		doc = b.storeDoc(t, c, knowledge.DocumentInput{Title: fmt.Sprintf("Runbook %d", i), Content: manual(50, same),
			Source: fmt.Sprintf("https://wiki.example.com/runbooks/%d", i), Kind: knowledge.KindReference})
	}
	*notices = nil
	ids, err = sqlc.New(conn).DocumentSectionIDs(ctx, sqlc.DocumentSectionIDsParams{OrgID: b.org, Ids: []uuid.UUID{doc.ID}})
	if err != nil || len(ids) != 51 {
		t.Fatalf("document sections: %d %v", len(ids), err)
	}
	wantPlan(t, "document sections", *notices, "knowledge_sections_document_idx")
	page("document", sqlc.ListEntriesParams{}, ids, 21, "knowledge_pkey", fieldIndexes...)
	page("document and kind", sqlc.ListEntriesParams{Kind: ptr(knowledge.KindReference)}, ids, 21, "knowledge_pkey", fieldIndexes...)
	page("document and source", sqlc.ListEntriesParams{Source: ptr("https://wiki.example.com/runbooks/3")}, ids, 21, "knowledge_pkey", fieldIndexes...)
	runbooks := "https://wiki.example.com/runbooks/"
	page("document and source prefix", sqlc.ListEntriesParams{SourcePrefix: &runbooks, SourceEnd: ptr(runbooks + "\U0010FFFF")}, ids, 21,
		"knowledge_pkey", fieldIndexes...)
	page("document and metadata", sqlc.ListEntriesParams{Metadata: []byte(`{"env": "prod"}`)}, ids, 0, "knowledge_pkey", fieldIndexes...)
}

// wantPlan fails unless the plans use the index named and neither walk the
// org's entries in created order, nor read the table whole, nor use any of
// the indexes to avoid.
func wantPlan(t *testing.T, name string, notices []string, uses string, avoid ...string) {
	t.Helper()
	plan := strings.Join(notices, "\n")
	bad := !strings.Contains(plan, uses)
	for _, x := range append([]string{"knowledge_org_created_idx", "Seq Scan"}, avoid...) {
		bad = bad || strings.Contains(plan, x)
	}
	if bad {
		t.Fatalf("%s: the plan does not read %q only:\n%s", name, uses, plan)
	}
}
