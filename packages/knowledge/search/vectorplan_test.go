package search_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// widthEmbedder names a model of a given width; these tests never embed.
type widthEmbedder struct {
	model string
	dims  int
}

func (w widthEmbedder) Model() string   { return w.model }
func (w widthEmbedder) Dimensions() int { return w.dims }
func (w widthEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, fmt.Errorf("not for embedding")
}

// fillSpaces stores, in b's org, n entries of emb's space, 20 of its model
// at another width (a changed EMBEDDINGS_DIMENSIONS) and 20 of another
// model at its width, with random vectors; and two chunks for each entry
// of the model (both widths).
func fillSpaces(t *testing.T, b *bundle, emb widthEmbedder, n int) {
	t.Helper()
	for _, r := range []struct {
		model string
		dims  int
		n     int
	}{{emb.model, emb.dims, n}, {emb.model, 256, 20}, {"other-model", emb.dims, 20}} {
		if _, err := b.pool.Exec(b.ctx, `
			INSERT INTO knowledge (org_id, title, body, created_by_agent_id, embedding, embedding_status, embedding_model, embedded_at)
			SELECT $1, 'note ' || i, 'body ' || i, $2,
			       (SELECT array_agg(random() - 0.5)::real[] FROM generate_series(1, $3::int) WHERE i > 0)::vector,
			       'ready', $4, now()
			FROM generate_series(1, $5::int) i`, b.org, b.alice.AgentID, r.dims, r.model, r.n); err != nil {
			t.Fatal(err)
		}
	}
	for _, dims := range []int{emb.dims, 256} {
		if _, err := b.pool.Exec(b.ctx, `
			INSERT INTO knowledge_chunks (org_id, entry_id, chunk, start_char, end_char, embedding_model, embedding)
			SELECT k.org_id, k.id, c, c * 10, c * 10 + 10, $2,
			       (SELECT array_agg(random() - 0.5)::real[] FROM generate_series(1, $3::int) WHERE c > 0)::vector
			FROM knowledge k CROSS JOIN generate_series(1, 2) c
			WHERE k.org_id = $1 AND k.embedding_model = $2 AND vector_dims(k.embedding) = $3`, b.org, emb.model, dims); err != nil {
			t.Fatal(err)
		}
	}
}

// The vector list's HNSW plan uses the HNSW index of the configured model
// and width, at every width: vector(N) up to 2,000 dimensions, halfvec(N)
// past them; rows of another model or width in the same table neither
// break the cast nor reach the list.
func TestVectorListUsesTheModelsIndexAtEveryWidth(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads the vector function's plan through the session's auto_explain; on a cluster the function runs on the org's worker")
	for _, dims := range []int{384, 1536, 3072} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			t.Parallel()
			emb := widthEmbedder{"wide-model's-" + fmt.Sprint(dims), dims} // a quote in the name, on purpose
			b := setup(t, func(o *knowledge.Options) { o.Embedder = emb })
			fillSpaces(t, b, emb, 60)
			built, err := maint(b.ops).EnsureVectorIndex(b.ctx)
			if err != nil || !built {
				t.Fatalf("ensure: %v %v", built, err)
			}
			name := knowledge.SpaceOf(emb).IndexName()
			var def string
			if err := b.pool.QueryRow(b.ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = $1", name).Scan(&def); err != nil {
				t.Fatal(err)
			}
			cast := fmt.Sprintf("vector(%d)", dims)
			if dims > 2000 {
				cast = fmt.Sprintf("halfvec(%d)", dims)
			}
			if !strings.Contains(def, cast) || !strings.Contains(def, "head_id IS NULL") {
				t.Fatalf("want an index on %s of heads only: %s", cast, def)
			}
			q := make([]float32, dims)
			q[0] = 1
			plan := vectorPlan(t, b.pool, "knowledge_vector_hnsw", b.org, emb.model, q)
			for _, ix := range []string{name, knowledge.SpaceOf(emb).ChunkIndexName()} {
				if !strings.Contains(plan, "Index Scan using "+ix) {
					t.Fatalf("the HNSW plan does not use %s:\n%s", ix, plan)
				}
			}
			// Both plans answer only the model's vectors at its width.
			for _, fn := range []string{"knowledge_vector_hnsw", "knowledge_vector_exact"} {
				var n int
				tx, err := b.pool.Begin(b.ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(b.ctx)
				if _, err := tx.Exec(b.ctx, "SET LOCAL hnsw.ef_search = 200"); err != nil {
					t.Fatal(err)
				}
				if err := tx.QueryRow(b.ctx, "SELECT count(*) FROM "+fn+"($1, $2, $3, '{}', false, false, 200, NULL, NULL, NULL, NULL)",
					b.org, pgvector.NewVector(q), emb.model).Scan(&n); err != nil {
					t.Fatalf("%s: %v", fn, err)
				}
				if n != 60 {
					t.Fatalf("%s answered %d entries, want the model's 60", fn, n)
				}
			}
		})
	}
}

// The vector list's statement (sql/search_vector.sql) runs the plan the
// org's size and indexes call for, on a never-analyzed table, at every
// width (vector(N) and halfvec(N)) and with a quote in the model's name:
// the space's HNSW indexes through the statement's own plan, made once
// for the connection (generic); the org's own index through the function
// planned per call; the exact scan for a small org. The space's plan
// answers what the function answers, in the same order, and only the
// space's vectors.
func TestVectorStatementRunsThePlanOfTheOrg(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads the vector function's plan through the session's auto_explain; on a cluster the function runs on the org's worker")
	for _, dims := range []int{384, 3072} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			t.Parallel()
			emb := widthEmbedder{"o'model-" + fmt.Sprint(dims), dims}
			b := setup(t, func(o *knowledge.Options) { o.Embedder = emb })
			ctx, s, sp, c := b.ctx, search.New(data.New(b.pool), search.Options{Embedder: emb}), knowledge.SpaceOf(emb), b.alice
			fillSpaces(t, b, emb, 80)
			// 20 of the org's entries superseded.
			if _, err := b.pool.Exec(ctx, `
				WITH head AS (SELECT max(id::text)::uuid AS id FROM knowledge WHERE org_id = $1),
				     old AS (SELECT id FROM knowledge WHERE org_id = $1 AND id <> (SELECT id FROM head) ORDER BY id LIMIT 20)
				UPDATE knowledge k SET head_id = head.id, superseded_by = head.id, superseded_at = now()
				FROM old, head WHERE k.id = old.id`, c.OrgID); err != nil {
				t.Fatal(err)
			}
			if built, err := maint(b.ops).EnsureVectorIndex(ctx); err != nil || !built {
				t.Fatalf("ensure: %v %v", built, err)
			}
			var q pgvector.Vector
			if err := b.pool.QueryRow(ctx, `SELECT embedding FROM knowledge_chunks WHERE org_id = $1 AND vector_dims(embedding) = $2 LIMIT 1`, c.OrgID, dims).Scan(&q); err != nil {
				t.Fatal(err)
			}
			// The org's size as the indexer counts it (a large share of a
			// small table: the space's plan), without indexing 3,000
			// entries.
			setDocs := func(n int) {
				t.Helper()
				if _, err := b.pool.Exec(ctx, `INSERT INTO knowledge_search_stats (org_id, config, docs) VALUES ($1, 'english', $2)
					ON CONFLICT (org_id) DO UPDATE SET docs = excluded.docs`, c.OrgID, n); err != nil {
					t.Fatal(err)
				}
			}
			conn, notices := testenv.ExplainConn(t, b.pool, "SET auto_explain.log_analyze = on", "SET auto_explain.log_timing = off",
				"SET auto_explain.log_nested_statements = on")
			runWith := func(q pgvector.Vector, docs int, superseded bool) (ids []uuid.UUID, plan string) {
				t.Helper()
				setDocs(docs)
				*notices = nil
				ids, err := s.RunVectorStatement(ctx, conn, knowledge.Caller{OrgID: c.OrgID}, q, 200, int64(docs), superseded)
				if err != nil {
					t.Fatal(err)
				}
				return ids, strings.Join(*notices, "\n")
			}
			run := func(docs int) ([]uuid.UUID, string) { return runWith(q, docs, false) }
			wantWith := func(fn string, q pgvector.Vector, superseded bool) []uuid.UUID {
				t.Helper()
				tx, err := b.pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, "SET LOCAL hnsw.ef_search = 200"); err != nil {
					t.Fatal(err)
				}
				return queryIDs(ctx, t, tx, "SELECT id FROM "+fn+"($1, $2, $3, '{}', $4, false, 40, NULL, NULL, NULL, NULL)", c.OrgID, q, emb.model, superseded)
			}
			want := func(fn string) []uuid.UUID { return wantWith(fn, q, false) }
			// Superseded entries are in no HNSW index: a search asking for
			// them ranks them exactly beside the heads. Asked with an old
			// version's own vector, it is the nearest; not asked, absent.
			var old uuid.UUID
			var oldVec pgvector.Vector
			if err := b.pool.QueryRow(ctx, `SELECT id, embedding FROM knowledge WHERE org_id = $1 AND head_id IS NOT NULL
				AND embedding_model = $2 AND vector_dims(embedding) = $3 ORDER BY id LIMIT 1`, c.OrgID, emb.model, dims).Scan(&old, &oldVec); err != nil {
				t.Fatal(err)
			}
			superseded := func(docs int, what string) {
				t.Helper()
				exact := wantWith("knowledge_vector_exact", oldVec, true)
				if len(exact) != 40 || exact[0] != old {
					t.Fatalf("the exact plan, superseded entries asked for: %v, want %s first", exact, old)
				}
				got, plan := runWith(oldVec, docs, true)
				if len(got) == 0 || got[0] != old || !sameEntries(got, exact) {
					t.Fatalf("%s, superseded entries asked for, answered\n%v\nthe exact scan\n%v\n%s", what, got, exact, plan)
				}
				if got, _ := runWith(oldVec, docs, false); slices.Contains(got, old) {
					t.Fatalf("%s answered the superseded %s not asked for", what, old)
				}
			}
			exact := want("knowledge_vector_exact")
			if len(exact) != 40 {
				t.Fatalf("the exact plan answered %d entries, want 40", len(exact))
			}

			// A large share of its table, no index of its own: the space's,
			// never analyzed and analyzed (a small table, whose analyzed
			// planner would rather scan it all and sort: the plan is pinned).
			spacePlan := func() {
				t.Helper()
				for range 7 { // past the plan cache's first custom plans
					got, plan := run(3000)
					for _, ix := range []string{sp.IndexName(), sp.ChunkIndexName()} {
						if !ran(plan, "Index Scan using "+ix) {
							t.Fatalf("the space's plan did not walk %s:\n%s", ix, plan)
						}
					}
					if ran(plan, "Function Scan on knowledge_vector_") {
						t.Fatalf("the space's plan ran a vector function:\n%s", plan)
					}
					if fn := want("knowledge_vector_hnsw"); !slices.Equal(got, fn) {
						t.Fatalf("the space's plan answered\n%v\nthe function\n%v", got, fn)
					}
					// 240 vectors under ef_search 200: the exact scan's
					// entries, but at the edge (sameEntries).
					if !sameEntries(got, exact) {
						t.Fatalf("the space's plan answered\n%v\nthe exact scan\n%v", got, exact)
					}
				}
			}
			spacePlan()
			superseded(3000, "the space's plan")
			if _, err := b.pool.Exec(ctx, "ANALYZE knowledge, knowledge_chunks"); err != nil {
				t.Fatal(err)
			}
			spacePlan()
			var generic int64
			if err := conn.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements WHERE statement LIKE '%knowledge_vector_hnsw%'`).Scan(&generic); err != nil {
				t.Fatal(err)
			}
			if generic == 0 {
				t.Fatal("the vector statement was not run with a generic plan")
			}
			// Small: the exact scan, a bitmap of the org's rows whatever the
			// settings the statement runs under (its own HNSW scans are
			// pinned with bitmap scans and sorts off).
			if got, plan := run(100); !ran(plan, "Function Scan on knowledge_vector_exact") || ran(plan, "Index Scan using "+sp.IndexName()) ||
				!ran(plan, "Bitmap Heap Scan on knowledge") || ran(plan, "Seq Scan on knowledge") || !slices.Equal(got, exact) {
				t.Fatalf("a small org's plan:\n%s\n%v", plan, got)
			}
			// An index of its own: the function, whose plan names the org.
			org := c.OrgID
			if _, err := b.pool.Exec(ctx, sp.IndexDDL(sp.OrgIndexName(org), &org)); err != nil {
				t.Fatal(err)
			}
			if got, plan := run(3000); !ran(plan, "Function Scan on knowledge_vector_hnsw") || !sameEntries(got, exact) {
				t.Fatalf("the org's own plan:\n%s\n%v", plan, got)
			}
			superseded(3000, "the org's own plan")
		})
	}
}

// sameEntries says whether an HNSW answer holds the exact scan's entries.
// At the answer's edge the two may differ by design: the chunks' side
// reads as many chunks as the answer has places (00011), so an entry
// whose best vector is a chunk past the nearest 40 chunks can miss the
// last places, and past 2,000 dimensions the index compares halfvec
// distances, the exact scan full ones. The exact scan's first three
// quarters must be there, and as many entries as it answered.
func sameEntries(got, exact []uuid.UUID) bool {
	if len(got) != len(exact) {
		return false
	}
	for _, id := range exact[:len(exact)*3/4] {
		if !slices.Contains(got, id) {
			return false
		}
	}
	return true
}

// A large org's metadata pair its searches filter by, carried by enough of
// its entries and by at most a quarter of them, gets an HNSW index of its
// own from Upkeep (at most eight an org, its largest pairs first; none for
// a pair nobody searched): a search filtered by the
// pair walks that index instead of the space's, whether the statement
// reads the filter's few matches itself or tests a common filter while it
// walks, alone or with another pair, and answers the exact scan's entries.
// A pair without one is ranked by its matches as before; an index whose
// pair is gone is dropped.
func TestVectorStatementWalksAPairsIndex(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads the vector function's plan through the session's auto_explain; on a cluster the function runs on the org's worker")
	for _, dims := range []int{384, 3072} { // vector(N), halfvec(N)
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			t.Parallel()
			walksAPairsIndex(t, dims)
		})
	}
}

func walksAPairsIndex(t *testing.T, dims int) {
	emb := widthEmbedder{"pair-model", dims}
	b := setup(t, func(o *knowledge.Options) { o.Embedder = emb })
	ctx, s, sp, org := b.ctx, search.New(data.New(b.pool), search.Options{Embedder: emb}), knowledge.SpaceOf(emb), b.alice.OrgID
	fillSpaces(t, b, emb, 400)
	// team: ten values on 40 entries each; env: two on 200 (too common for
	// an index of their own); shard: twenty on 20 (too few).
	if _, err := b.pool.Exec(ctx, `
		UPDATE knowledge k SET metadata = jsonb_build_object('team', 't' || (x.n % 10), 'env', CASE WHEN x.n % 2 = 0 THEN 'prod' ELSE 'dev' END, 'shard', x.n % 20)
		FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM knowledge
		      WHERE org_id = $1 AND embedding_model = $2 AND vector_dims(embedding) = $3) x
		WHERE k.id = x.id`, org, emb.model, emb.dims); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO knowledge_search_stats (org_id, config, docs, len_b, len_t) VALUES ($1, 'english', 440, 2200, 1320)`, org); err != nil {
		t.Fatal(err)
	}
	// The org's searches filter by nine of the ten teams (each recorded
	// after its search, without the caller waiting).
	for i := range 9 {
		b.search(t, b.alice, knowledge.SearchInput{Query: "note", Mode: knowledge.ModeLexical,
			Filters: knowledge.Filters{Metadata: map[string]any{"team": fmt.Sprintf("t%d", i)}}})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := b.count(t, `SELECT count(*) FROM knowledge_search_stats s, jsonb_each(s.searched_pairs) WHERE s.org_id = $1`, org)
		if n == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the nine teams' searches recorded", n)
		}
	}
	m := knowledge.NewMaintenance(b.ops, knowledge.MaintenanceConfig{OrgVectorIndexMinDocs: 150, PairVectorIndexMinDocs: 30})
	var built []string
	for range 12 {
		rep, err := m.UpkeepVectorIndexes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Built) == 0 {
			break
		}
		built = append(built, rep.Built...)
	}
	pairIndex := func(pair string) string {
		t.Helper()
		var name string
		if err := b.pool.QueryRow(ctx, `SELECT knowledge_pair_index_name($1, $2, k) FROM unnest(knowledge_metadata_pair_keys($3::jsonb)) k`,
			sp.PairIndexPrefix(), org, pair).Scan(&name); err != nil {
			t.Fatal(err)
		}
		return name
	}
	var with, without []string // teams with an index of their own, without
	for i := range 10 {
		team := fmt.Sprintf("t%d", i)
		if slices.Contains(built, pairIndex(`{"team": "`+team+`"}`)) {
			with = append(with, team)
		} else {
			without = append(without, team)
		}
	}
	if len(built) != 2+8 || len(with) != 8 || !slices.Equal(built[:2], []string{sp.IndexName(), sp.ChunkIndexName()}) || slices.Contains(with, "t9") {
		t.Fatalf("built %v: want the space's two indexes, then eight of the nine searched teams' (%v)", built, with)
	}
	var def string
	if err := b.pool.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = $1", pairIndex(`{"team": "`+with[0]+`"}`)).Scan(&def); err != nil {
		t.Fatal(err)
	}
	opclass := " vector_ip_ops"
	if dims > 2000 {
		opclass = " halfvec_ip_ops"
	}
	var hash string
	if err := b.pool.QueryRow(ctx, `SELECT k::text FROM unnest(knowledge_metadata_pair_keys($1::jsonb)) k`, `{"team": "`+with[0]+`"}`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, org.String()) || !strings.Contains(def, "knowledge_metadata_pair_keys(metadata) @> '{"+hash+"}'") ||
		!strings.Contains(def, "head_id IS NULL") || !strings.Contains(def, "l2_normalize") || !strings.Contains(def, opclass) {
		t.Fatalf("the pair's index is not of the org's heads carrying it, normalized, by inner product: %s", def)
	}
	// The pair by its hash only: no metadata value in the catalog.
	if strings.Contains(def, `"team"`) || strings.Contains(def, with[0]+"'") {
		t.Fatalf("the pair's index names the pair's value: %s", def)
	}

	var q pgvector.Vector
	if err := b.pool.QueryRow(ctx, `SELECT embedding FROM knowledge_chunks WHERE org_id = $1 AND vector_dims(embedding) = $2 LIMIT 1`, org, emb.dims).Scan(&q); err != nil {
		t.Fatal(err)
	}
	exact := func(meta string) []uuid.UUID {
		t.Helper()
		return queryIDs(ctx, t, b.pool, "SELECT id FROM knowledge_vector_exact($1, $2, $3, '{}', false, false, 40, NULL, NULL, NULL, $4::jsonb)", org, q, emb.model, meta)
	}
	conn, notices := testenv.ExplainConn(t, b.pool, "SET auto_explain.log_analyze = on", "SET auto_explain.log_timing = off",
		"SET auto_explain.log_nested_statements = on")
	run := func(meta map[string]any, within domain.MatchSet) ([]uuid.UUID, string) {
		t.Helper()
		*notices = nil
		ids, err := s.RunFilteredVectorStatement(ctx, conn, knowledge.Caller{OrgID: org}, q, 200, 440, false, meta, within)
		if err != nil {
			t.Fatal(err)
		}
		return ids, strings.Join(*notices, "\n")
	}
	matches := func(meta string) []uuid.UUID {
		t.Helper()
		ids := queryIDs(ctx, t, b.pool, `SELECT m.id FROM knowledge_metadata_matches($1, $2::jsonb, 1000) m`, org, meta)
		if len(ids) == 0 {
			t.Fatalf("the matches of %s: none", meta)
		}
		return ids
	}
	one := func(team string) string { return `{"team": "` + team + `"}` }
	for _, c := range []struct {
		what   string
		meta   map[string]any
		json   string
		within domain.MatchSet
		index  string // the pair index walked; "": none
	}{
		{"a pair with an index, its matches few", map[string]any{"team": with[0]}, one(with[0]), domain.MatchSet{MetadataMax: 100}, pairIndex(one(with[0]))},
		{"a pair with an index, its matches read first", map[string]any{"team": with[3]}, one(with[3]),
			domain.MatchSet{ByIDs: true, Ids: matches(one(with[3])), OfMetadata: true}, pairIndex(one(with[3]))},
		{"a pair with an index, common", map[string]any{"team": with[1]}, one(with[1]), domain.MatchSet{}, pairIndex(one(with[1]))},
		{"a pair with an index and another pair", map[string]any{"team": with[2], "env": "prod"}, `{"team": "` + with[2] + `", "env": "prod"}`,
			domain.MatchSet{}, pairIndex(one(with[2]))},
		{"a pair without one, its matches few", map[string]any{"team": without[0]}, one(without[0]), domain.MatchSet{MetadataMax: 100}, ""},
		// A set that is not the filter's matches (a document's sections)
		// is ranked as it is, the pair's index notwithstanding.
		{"a pair with an index within another set", map[string]any{"team": with[4]}, one(with[4]),
			domain.MatchSet{ByIDs: true, Ids: matches(one(with[4]))}, ""},
	} {
		want := exact(c.json)
		if len(want) == 0 {
			t.Fatalf("%s: the exact scan found nothing", c.what)
		}
		got, plan := run(c.meta, c.within)
		if !sameEntries(got, want) {
			t.Fatalf("%s answered\n%v\nthe exact scan\n%v\n%s", c.what, got, want, plan)
		}
		if c.index != "" && (!ran(plan, "Index Scan using "+c.index) || ran(plan, "Index Scan using "+sp.IndexName()+" ")) {
			t.Fatalf("%s did not walk the pair's index %s alone:\n%s", c.what, c.index, plan)
		}
		if c.index == "" && (ran(plan, "Function Scan on knowledge_vector_hnsw") || ran(plan, "Index Scan using "+sp.PairIndexPrefix())) {
			t.Fatalf("%s walked an index:\n%s", c.what, plan)
		}
	}

	// The pair gone from the org's entries: its index is dropped.
	if _, err := b.pool.Exec(ctx, `UPDATE knowledge SET metadata = metadata || '{"team": "gone"}' WHERE org_id = $1 AND metadata->>'team' = $2`, org, with[0]); err != nil {
		t.Fatal(err)
	}
	rep, err := m.UpkeepVectorIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gone := pairIndex(`{"team": "` + with[0] + `"}`); !slices.Contains(rep.Dropped, gone) || b.count(t, "SELECT count(*) FROM pg_indexes WHERE indexname = $1", gone) != 0 {
		t.Fatalf("the index of a pair no entry carries was not dropped: %+v", rep)
	}
}
