package jobs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// BenchmarkEntryStorage measures what an entry costs on disk at 384, 768
// and 1536 dimensions, for the capacity model (docs/scale-out.md): N
// entries (KNOWLEDGE_BENCH_STORAGE_N, default 2,000) of NFCorpus's
// abstracts (../shared/datasets/nfcorpus, or the corpus.jsonl that
// KNOWLEDGE_BENCH_CORPUS names: title and text, ~1,500 characters; a
// generated text when it is missing), embedded through an
// httptest provider (dense vectors), indexed (postings), the space's HNSW
// index built, every table vacuumed and analyzed. Reported per entry, from
// pg_total_relation_size of every table of the schema (heap, TOAST,
// indexes): the whole, the entries' table without its HNSW index, the
// HNSW index, and the lexical index (postings and term statistics).
//
// Run: go test -run '^$' -bench EntryStorage -benchtime 1x ./packages/knowledge/jobs/
func BenchmarkEntryStorage(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("KNOWLEDGE_BENCH_STORAGE_N")); err == nil && v > 0 {
		n = v
	}
	titles, bodies := storageTexts(n)
	for _, dims := range []int{384, 768, 1536} {
		b.Run(fmt.Sprintf("dims=%d", dims), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				bd := setup(b)
				ctx := context.Background()
				emb := openAIAt(b, fakeProvider(b, dims, 0), dims)
				var js []knowledge.EmbeddingJob
				rows, err := bd.pool.Query(ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
					SELECT $1, left(coalesce(nullif(t, ''), 'entry'), 200), x, $2 FROM unnest($3::text[], $4::text[]) AS u(t, x)
					RETURNING id, embedding_generation`, bd.org, bd.agent, titles, bodies)
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
					j := knowledge.EmbeddingJob{OrgID: bd.org}
					if err := rows.Scan(&j.EntryID, &j.Generation); err != nil {
						b.Fatal(err)
					}
					js = append(js, j)
				}
				if rows.Err() != nil || len(js) != n {
					b.Fatalf("inserted %d of %d entries: %v", len(js), n, rows.Err())
				}
				h := jobs.NewEmbedHandler(bd.pool, emb, jobs.HandlerOptions{})
				for k := 0; k < len(js); k += 64 {
					if err := h.Process(ctx, js[k:min(k+64, len(js))]); err != nil {
						b.Fatal(err)
					}
				}
				m := knowledge.NewMaintenance(knowledge.New(bd.pool, knowledge.Options{Embedder: emb}), knowledge.MaintenanceConfig{})
				if _, err := m.IndexAll(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := m.EnsureVectorIndex(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := bd.pool.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
					b.Fatal(err)
				}
				sp := knowledge.SpaceOf(emb)
				var total, entries, hnsw, lexical int64
				if err := bd.pool.QueryRow(ctx, `SELECT
					(SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
					 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r')::bigint,
					pg_total_relation_size('knowledge') - pg_relation_size($1::regclass),
					pg_relation_size($1::regclass),
					pg_total_relation_size('knowledge_postings') + pg_total_relation_size('knowledge_term_stats')`,
					sp.IndexName()).Scan(&total, &entries, &hnsw, &lexical); err != nil {
					b.Fatal(err)
				}
				per := func(x int64) float64 { return float64(x) / float64(n) }
				b.ReportMetric(per(total), "B-total/entry")
				b.ReportMetric(per(entries), "B-entries-table/entry")
				b.ReportMetric(per(hnsw), "B-hnsw/entry")
				b.ReportMetric(per(lexical), "B-lexical/entry")
			}
		})
	}
}

// storageTexts are n titles and bodies: NFCorpus's documents, repeated with
// a number when n is larger, or a generated text without the collection.
func storageTexts(n int) (titles, bodies []string) {
	path := os.Getenv("KNOWLEDGE_BENCH_CORPUS")
	if path == "" {
		path = "../../../../shared/datasets/nfcorpus/corpus.jsonl" // from a clone beside ../shared
	}
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var d struct{ Title, Text string }
			if json.Unmarshal(sc.Bytes(), &d) == nil && d.Text != "" {
				titles, bodies = append(titles, d.Title), append(bodies, d.Text)
			}
		}
	}
	if len(bodies) == 0 {
		titles, bodies = []string{"a generated entry"}, []string{filler(1500)}
	}
	k := len(bodies)
	for i := k; i < n; i++ {
		titles = append(titles, fmt.Sprintf("%s (%d)", titles[i%k], i))
		bodies = append(bodies, bodies[i%k])
	}
	return titles[:n], bodies[:n]
}
