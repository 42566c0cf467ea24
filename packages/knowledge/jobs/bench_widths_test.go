package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// BenchmarkPipelineWidths is BenchmarkPipeline's batch-32 case through an
// OpenAI-compatible HTTP provider (httptest) that answers in 50 ms, at 384
// and 1536 dimensions: the whole path, JSON and vector writes included.
//
// Run: go test -run '^$' -bench PipelineWidths -benchtime 1x ./packages/knowledge/jobs/
func BenchmarkPipelineWidths(b *testing.B) {
	for _, dims := range []int{384, 1536} {
		b.Run(fmt.Sprintf("dims=%d", dims), func(b *testing.B) {
			bd := setup(b)
			emb := openAIAt(b, fakeProvider(b, dims, 50*time.Millisecond), dims)
			pipelineRun(b, bd, emb, 32, 1024)
		})
	}
}

// BenchmarkChunkStorage compares what long entries cost stored chunked
// (the model's default cut) and unchunked (one vector per entry): 100
// entries of 30,000 characters embedded at 1536 dimensions (an httptest
// provider answering at once, through the handler, no queue), then the
// space's HNSW indexes built. Reported per entry: vectors, bytes of the
// vectors (the entries' own, pg_column_size, and the chunks table's heap and
// TOAST), of the chunks' btrees, of the HNSW indexes, and embedding time.
//
// Run: go test -run '^$' -bench ChunkStorage -benchtime 1x ./packages/knowledge/jobs/
func BenchmarkChunkStorage(b *testing.B) {
	const entries, dims = 100, 1536
	for _, c := range []struct {
		name string
		cut  knowledge.ChunkOptions
	}{{"unchunked", knowledge.ChunkOptions{Chars: knowledge.MaxChunkChars}}, {"chunked", knowledge.ChunkOptions{}}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				bd := setup(b)
				ctx := context.Background()
				emb := openAIAt(b, fakeProvider(b, dims, 0), dims)
				var js []knowledge.EmbeddingJob
				rows, err := bd.pool.Query(ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
					SELECT $1, 'long entry ' || g, $3 || ' entry ' || g, $2 FROM generate_series(1, $4::int) g
					RETURNING id, embedding_generation`, bd.org, bd.agent, filler(29980), entries)
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
				h := jobs.NewEmbedHandler(bd.pool, emb, jobs.HandlerOptions{Chunk: c.cut})
				start := time.Now()
				for k := 0; k < len(js); k += 10 {
					if err := h.Process(ctx, js[k:min(k+10, len(js))]); err != nil {
						b.Fatal(err)
					}
				}
				took := time.Since(start)
				svc := knowledge.New(bd.pool, knowledge.Options{Embedder: emb})
				if _, err := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{}).EnsureVectorIndex(ctx); err != nil {
					b.Fatal(err)
				}
				sp := knowledge.SpaceOf(emb)
				var vecs, entryBytes, chunkBytes, chunkBtree, hnsw int64
				if err := bd.pool.QueryRow(ctx, `SELECT
					(SELECT count(*) FROM knowledge WHERE embedding IS NOT NULL) + (SELECT count(*) FROM knowledge_chunks),
					(SELECT coalesce(sum(pg_column_size(embedding)), 0) FROM knowledge),
					pg_table_size('knowledge_chunks'),
					pg_indexes_size('knowledge_chunks') - pg_relation_size($2::regclass),
					pg_relation_size($1::regclass) + pg_relation_size($2::regclass)`,
					sp.IndexName(), sp.ChunkIndexName()).Scan(&vecs, &entryBytes, &chunkBytes, &chunkBtree, &hnsw); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(vecs)/entries, "vectors/entry")
				b.ReportMetric(float64(entryBytes+chunkBytes)/entries/1024, "KiB-vectors+chunks/entry")
				b.ReportMetric(float64(chunkBtree)/entries/1024, "KiB-chunk-btrees/entry")
				b.ReportMetric(float64(hnsw)/entries/1024, "KiB-hnsw/entry")
				b.ReportMetric(float64(took.Milliseconds())/entries, "ms-embed/entry")
			}
		})
	}
}
