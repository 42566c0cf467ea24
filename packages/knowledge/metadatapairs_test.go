package knowledge_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// lookupDrift lists what a table kept by triggers on knowledge holds
// that the entries do not say (extra), and what it lacks (missing), each
// named by its entry: want is the rows the entries say, in the columns
// cols of table, the entry's id among them as entry_id.
func (b *bundle) lookupDrift(t *testing.T, table, cols, want string) []string {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, `
		WITH want AS (`+want+`)
		(SELECT 'extra ' || entry_id::text FROM (SELECT `+cols+` FROM `+table+` EXCEPT ALL SELECT * FROM want) x)
		UNION ALL
		(SELECT 'missing ' || entry_id::text FROM (SELECT * FROM want EXCEPT ALL SELECT `+cols+` FROM `+table+`) y)`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// metadataPairsDrift: knowledge_metadata_pairs is exactly the pairs of the
// entries that exist, in every org (db/migrations/00041).
func (b *bundle) metadataPairsDrift(t *testing.T) []string {
	t.Helper()
	return b.lookupDrift(t, "knowledge_metadata_pairs", "org_id, pair, entry_id", `SELECT k.org_id, p AS pair, k.id AS entry_id
		FROM knowledge k CROSS JOIN LATERAL unnest(knowledge_metadata_pair_keys(k.metadata)) AS p`)
}

// similarKeysDrift: knowledge_similar_keys is exactly the keys of the
// entries that have them, in every org (db/migrations/00042).
func (b *bundle) similarKeysDrift(t *testing.T) []string {
	t.Helper()
	return b.lookupDrift(t, "knowledge_similar_keys", "org_id, entry_id, keys",
		"SELECT k.org_id, k.id AS entry_id, k.similar_keys AS keys FROM knowledge k WHERE k.similar_keys IS NOT NULL")
}

// wantLookupTablesTrue fails t unless the tables kept by triggers on
// knowledge (the metadata pairs, the duplicate check's keys) are exactly
// what the entries say.
func (b *bundle) wantLookupTablesTrue(t *testing.T, when string) {
	t.Helper()
	if drift := b.metadataPairsDrift(t); len(drift) > 0 {
		t.Fatalf("%s: knowledge_metadata_pairs differs from the entries' metadata (%d rows): %v", when, len(drift), drift[:min(len(drift), 10)])
	}
	if drift := b.similarKeysDrift(t); len(drift) > 0 {
		t.Fatalf("%s: knowledge_similar_keys differs from the entries' keys (%d rows): %v", when, len(drift), drift[:min(len(drift), 10)])
	}
}

// The pairs a metadata filter reads its matches from, and the keys the
// duplicate check reads, follow the entries through every way an entry is
// written and erased: store, correct,
// supersede, documents' sections (and their replacement), import, forget
// and purge. After each step the tables are exactly the pairs and keys of
// the entries that exist; the filters find what the entries' metadata says
// (a number however written: 2, 2.0 and 2.00 are one value to a filter).
func TestLookupTablesFollowEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	meta := func(i int) map[string]any {
		return map[string]any{"env": []string{"prod", "staging"}[i%2], "shard": i % 3, "ratio": json.Number(fmt.Sprintf("%d.50", i%2)), "paged": i%2 == 0}
	}
	var mine []uuid.UUID
	for i := range 6 {
		r, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: fmt.Sprintf("note %d", i), Body: fmt.Sprintf("pump %d valve", i), Metadata: meta(i)})
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, r.ID)
	}
	plain := b.store(t, b.alice, "no metadata", "nothing to pair")
	theirs, err := b.svc.Store(b.ctx, b.eve, knowledge.StoreInput{Title: "eve's note", Body: "pump valve", Metadata: meta(0)})
	if err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after stores")

	corr, err := b.svc.Correct(b.ctx, b.alice, mine[0], knowledge.StoreInput{Title: "note 0, corrected", Body: "pump 0 valve, corrected",
		Metadata: map[string]any{"env": "dev", "shard": 9}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Supersede(b.ctx, b.alice, mine[1], mine[2]); err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after correct and supersede")

	doc := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(3, same), Metadata: map[string]any{"env": "prod", "manual": true}})
	b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(4, func(i int) string { return same(i) + " v2" }),
		Metadata: map[string]any{"env": "prod", "manual": true}})
	b.wantLookupTablesTrue(t, "after a document and its replacement")

	exported, _ := b.export(t, b.svc, b.org, false)
	imported := b.mkOrg(t, "imported")
	if _, err := b.ops.Operations().Import(b.ctx, imported, opener(exported), knowledge.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after an import")
	if n := b.count(t, "SELECT count(*) FROM knowledge_metadata_pairs WHERE org_id = $1", imported); n == 0 {
		t.Fatal("the imported entries have no pairs")
	}

	// The filters read the pairs: a number matches however written, each
	// key and value is its own pair, another org's entries never come.
	for _, tc := range []struct {
		f    map[string]any
		want []uuid.UUID
	}{
		{map[string]any{"shard": json.Number("2.00")}, []uuid.UUID{mine[2], mine[5]}},
		{map[string]any{"ratio": 1.5}, []uuid.UUID{mine[1], mine[3], mine[5]}},
		{map[string]any{"ratio": json.Number("0.5"), "paged": true}, []uuid.UUID{mine[0], mine[2], mine[4]}},
		{map[string]any{"env": "dev"}, []uuid.UUID{corr.Stored.ID}},
		{map[string]any{"env": "prod", "shard": 1}, []uuid.UUID{mine[4]}},
		{map[string]any{"paged": "true"}, nil}, // a string is not the boolean
	} {
		l, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Filters: knowledge.Filters{Metadata: tc.f}, IncludeSuperseded: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []uuid.UUID
		for _, h := range l.Hits {
			got = append(got, h.ID)
		}
		sortIDs(got)
		want := slices.Clone(tc.want)
		sortIDs(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list %v: got %v, want %v", tc.f, got, want)
		}
	}

	if _, err := b.svc.Forget(b.ctx, b.alice, mine[3], "wrong", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Forget(b.ctx, b.alice, doc.ID, "replaced", false); err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after forget")
	if n := b.count(t, "SELECT count(*) FROM knowledge_metadata_pairs WHERE org_id = $1 AND entry_id = ANY($2)", b.org, []uuid.UUID{mine[3], doc.ID}); n != 0 {
		t.Fatalf("%d pairs of forgotten entries left", n)
	}
	if _, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.alice.AgentID}, false); err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after purge --agent")
	if n := b.count(t, "SELECT count(*) FROM knowledge_metadata_pairs WHERE org_id = $1", b.org); n != 0 {
		t.Fatalf("%d pairs of the purged agent's entries left (%s had none)", n, plain)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_metadata_pairs WHERE org_id = $1 AND entry_id = $2", b.other, theirs.ID); n != 4 {
		t.Fatalf("the other org's entry has %d pairs, want 4", n)
	}
	if _, err := b.ops.Operations().Purge(b.ctx, imported, knowledge.PurgeScope{All: true}, false); err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after purge --all")
	if n := b.count(t, "SELECT count(*) FROM knowledge_metadata_pairs WHERE org_id = $1", imported); n != 0 {
		t.Fatalf("%d pairs of the purged org left", n)
	}
}

// Migration 00041 gives the entries that exist their pairs: entries stored
// before it are found by a metadata filter after it.
func TestMigrationBackfillsMetadataPairs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := db.MigrateDownTo(b.ctx, b.pool, 40); err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for i := range 4 {
		var id uuid.UUID
		if err := b.pool.QueryRow(b.ctx, `INSERT INTO knowledge (org_id, title, body, metadata) VALUES ($1, $2, 'body', $3) RETURNING id`,
			b.org, fmt.Sprintf("old %d", i), fmt.Sprintf(`{"env": "%s", "n": %d.0}`, []string{"prod", "dev"}[i%2], i)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := db.Migrate(b.ctx, b.pool); err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after the migration")
	l, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Filters: knowledge.Filters{Metadata: map[string]any{"env": "dev", "n": 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Hits) != 1 || l.Hits[0].ID != ids[3] {
		t.Fatalf("an entry stored before the migration, filtered after it: %+v", l.Hits)
	}
}

// Migration 00051 gives the postings that exist their entry's metadata
// signature (0 for an entry without metadata): entries indexed before it
// are found by a metadata-filtered search after it, by words, and no
// other entry is.
func TestMigrationSignsPostings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []uuid.UUID
	for i, md := range []map[string]any{{"env": "prod", "n": 1}, {"env": "dev"}, {"env": "prod"}, nil, {"team": "ops", "env": "prod"}} {
		r, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: fmt.Sprintf("ledger %d", i), Body: "the ledger reconciles nightly", Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		if md["env"] == "prod" {
			want = append(want, r.ID)
		}
	}
	b.indexAll(t)
	// The postings as a build before 00051 left them: without the column.
	if err := db.MigrateDownTo(b.ctx, b.pool, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(b.ctx, b.pool); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_postings p JOIN knowledge k ON k.org_id = p.org_id AND k.id = p.entry_id
		WHERE p.org_id = $1 AND p.msig IS DISTINCT FROM knowledge_metadata_sig(k.metadata)`, b.org); n != 0 {
		t.Fatalf("%d postings without their entry's signature after the migration", n)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_postings WHERE org_id = $1 AND msig <> 0`, b.org); n == 0 {
		t.Fatal("no posting signed")
	}
	l, err := knowledge.SearchLists(b.ctx, b.svc, b.alice, knowledge.SearchInput{Query: "ledger", Mode: knowledge.ModeLexical,
		Filters: knowledge.Filters{Metadata: map[string]any{"env": "prod"}}}, knowledge.MaxListDepth)
	if err != nil {
		t.Fatal(err)
	}
	var got []uuid.UUID
	for _, h := range l.FullText {
		got = append(got, h.ID)
	}
	sortIDs(got)
	sortIDs(want)
	if !slices.Equal(got, want) {
		t.Fatalf("filtered by env prod after the migration: %v, want %v", got, want)
	}
}

// Migration 00042 gives the entries that have keys their rows in the
// duplicate check's table, and takes the look-up there: entries stored
// before it are found by their keys after it (and Down puts the look-up
// back on the entries' table, which finds them as well).
func TestMigrationMovesSimilarKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Only common words: the keys find this, the rare terms cannot
	// (nothing is indexed).
	note := knowledge.StoreInput{Title: "common words entry 0", Body: "service config error timeout retry queue worker"}
	found := func(when string, want uuid.UUID) {
		t.Helper()
		r, err := b.svc.Store(b.ctx, b.bob, note)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !slices.ContainsFunc(r.Similar, func(s knowledge.Similar) bool { return s.ID == want }) {
			t.Fatalf("%s: a copy's similar list %+v misses %s", when, r.Similar, want)
		}
		if _, err := b.svc.Forget(b.ctx, b.bob, r.ID, "test copy", false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.MigrateDownTo(b.ctx, b.pool, 41); err != nil {
		t.Fatal(err)
	}
	orig := b.store(t, b.alice, note.Title, note.Body)
	found("before the migration", orig)
	// As ctl migrate does: the migrations, then the roles' grants (the
	// application writes the new table through the triggers).
	if _, err := db.Migrate(b.ctx, b.pool); err != nil {
		t.Fatal(err)
	}
	if err := db.EnsureRoles(b.ctx, b.pool, db.DefaultRoles()); err != nil {
		t.Fatal(err)
	}
	b.wantLookupTablesTrue(t, "after the migration")
	if n := b.count(t, "SELECT count(*) FROM knowledge_similar_keys WHERE org_id = $1", b.org); n != 1 {
		t.Fatalf("the look-up's table holds %d entries of the org, want the one stored before", n)
	}
	found("after the migration", orig)
}
