package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// filler is n characters of paragraphs of made-up words (deterministic),
// none of them a word of the test's query.
func filler(n int) string {
	syl := []string{"ka", "lo", "mi", "ren", "tu", "vo", "sel", "dan", "pi", "gor", "na", "fe"}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		w := syl[i%12] + syl[(i*7+3)%12] + syl[(i*5+1)%12]
		b.WriteString(w)
		switch {
		case i%97 == 96:
			b.WriteString(".\n\n")
		case i%13 == 12:
			b.WriteString(". ")
		default:
			b.WriteString(" ")
		}
	}
	return b.String()[:n]
}

const zebraParagraph = "In July the great zebra migration reaches the Mara river: the zebra herds gather at the crossing, " +
	"and the river crossing of the migration is the moment the guides wait for."

// A 30,000-character entry whose only match is its last paragraph is found
// by the vector list, through its last chunk, and its snippet is centred
// there; embedded as one text (chunking off: the provider reads its first
// 8,000 characters), the same entry is not near the query.
func TestLongEntryFoundByItsLastChunk(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	emb := openAIAt(t, fakeProvider(t, 384, 0), 384)
	svc := knowledge.New(b.pool, knowledge.Options{Embedder: emb, Enqueuer: b.enq})
	caller := knowledge.Caller{OrgID: b.org, AgentID: b.agent}
	body := filler(30000-len(zebraParagraph)-2) + "\n\n" + zebraParagraph
	if len(body) != 30000 {
		t.Fatalf("body of %d characters", len(body))
	}
	store := func(title, body string) knowledge.EmbeddingJob {
		t.Helper()
		r, err := svc.Store(ctx, caller, knowledge.StoreInput{Title: title, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return knowledge.EmbeddingJob{OrgID: b.org, EntryID: r.ID, Generation: 1}
	}
	long := store("field notes, season two", body)
	all := []knowledge.EmbeddingJob{long,
		store("river rafting safety", "wear a helmet and a life jacket on grade three rapids and above"),
		store("kubernetes pod eviction", "the node ran out of memory and evicted the pods of lower priority"),
		store("banana smoothie", "blend bananas with milk and a spoon of honey"),
	}
	// Chunks of 800 characters: the fake provider's bag of words blurs
	// like a real model's vector does, only sooner.
	cut := knowledge.ChunkOptions{Chars: 800, Overlap: 100}
	b.worker(t, emb, func(o *jobs.WorkerOptions) { o.Chunk = cut })
	b.waitStatus(t, knowledge.EmbeddingReady, 15*time.Second, ids(all...)...)

	var chunks int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM knowledge_chunks WHERE org_id = $1 AND entry_id = $2", b.org, long.EntryID).Scan(&chunks); err != nil {
		t.Fatal(err)
	}
	want := knowledge.Chunks("field notes, season two", []rune(body), cut)
	if chunks != len(want)-1 || chunks < 10 {
		t.Fatalf("%d chunks stored besides the entry's own vector, want %d", chunks, len(want)-1)
	}

	const query = "zebra migration at the Mara river crossing"
	lists, err := knowledge.SearchLists(ctx, svc, caller, knowledge.SearchInput{Query: query}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(lists.Vector) == 0 || lists.Vector[0].ID != long.EntryID {
		t.Fatalf("vector list %+v, want the long entry %s first", lists.Vector, long.EntryID)
	}
	chunked := lists.Vector[0].Score
	res, err := svc.Search(ctx, caller, knowledge.SearchInput{Query: query})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 || res.Hits[0].ID != long.EntryID || res.Hits[0].VectorRank != 1 {
		t.Fatalf("search %+v", res.Hits)
	}
	if s := res.Hits[0].Snippet; !strings.Contains(s, "zebra") || len([]rune(s)) > knowledge.SnippetChars {
		t.Fatalf("snippet %q", s)
	}

	// Unchunked, the same entry's one vector is of its beginning only.
	if _, err := b.pool.Exec(ctx, "UPDATE knowledge SET embedding = NULL, embedding_model = NULL, embedded_at = NULL, embedding_status = 'pending', embedding_generation = 2 WHERE id = $1", long.EntryID); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM knowledge_chunks WHERE entry_id = $1", long.EntryID).Scan(&chunks); err != nil || chunks != 0 {
		t.Fatalf("clearing the vector left %d chunks (%v)", chunks, err)
	}
	h := jobs.NewEmbedHandler(b.pool, emb, jobs.HandlerOptions{Chunk: knowledge.ChunkOptions{Chars: knowledge.MaxChunkChars}})
	if err := h.Process(ctx, []knowledge.EmbeddingJob{{OrgID: b.org, EntryID: long.EntryID, Generation: 2}}); err != nil {
		t.Fatal(err)
	}
	lists, err = knowledge.SearchLists(ctx, svc, caller, knowledge.SearchInput{Query: query}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, hit := range lists.Vector {
		if hit.ID == long.EntryID && (i == 0 || hit.Score > chunked/2) {
			t.Fatalf("unchunked, the long entry is rank %d with cosine %.3f (chunked %.3f)", i+1, hit.Score, chunked)
		}
	}
	t.Logf("cosine of the long entry: chunked %.3f; vector list unchunked: %v", chunked, fmt.Sprint(lists.Vector))
}

// Chunks of an entry's model found when its vector is written (clearing
// the vector deletes them, knowledge_drop_chunks: a stray one is the
// case of the net) go in the statement that writes its new vector, and
// only the new ones stay.
func TestLeftoverChunksGoWithTheNewVector(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	emb := openAIAt(t, fakeProvider(t, 384, 0), 384)
	svc := knowledge.New(b.pool, knowledge.Options{Embedder: emb, Enqueuer: b.enq})
	r, err := svc.Store(ctx, knowledge.Caller{OrgID: b.org, AgentID: b.agent}, knowledge.StoreInput{Title: "field notes", Body: filler(6000)})
	if err != nil {
		t.Fatal(err)
	}
	chunks := func() int {
		t.Helper()
		var n int
		if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM knowledge_chunks WHERE org_id = $1 AND entry_id = $2", b.org, r.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	chunked := jobs.NewEmbedHandler(b.pool, emb, jobs.HandlerOptions{Chunk: knowledge.ChunkOptions{Chars: 800, Overlap: 100}})
	if err := chunked.Process(ctx, []knowledge.EmbeddingJob{{OrgID: b.org, EntryID: r.ID, Generation: 1}}); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n < 5 {
		t.Fatalf("%d chunks after embedding 6,000 characters in chunks of 800", n)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE knowledge SET embedding = NULL, embedding_model = NULL, embedded_at = NULL,
		embedding_status = 'pending', embedding_generation = 2 WHERE org_id = $1 AND id = $2`, b.org, r.ID); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 0 {
		t.Fatalf("clearing the vector left %d chunks", n)
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO knowledge_chunks (org_id, entry_id, chunk, start_char, end_char, embedding_model, embedding)
		SELECT $1, $2, 42, 0, 800, $3, array_fill(0.1, ARRAY[384])::vector`, b.org, r.ID, emb.Model()); err != nil {
		t.Fatal(err)
	}
	whole := jobs.NewEmbedHandler(b.pool, emb, jobs.HandlerOptions{Chunk: knowledge.ChunkOptions{Chars: knowledge.MaxChunkChars}})
	if err := whole.Process(ctx, []knowledge.EmbeddingJob{{OrgID: b.org, EntryID: r.ID, Generation: 2}}); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 0 {
		t.Fatalf("%d chunks left after the entry was embedded whole", n)
	}
	var status string
	if err := b.pool.QueryRow(ctx, "SELECT embedding_status FROM knowledge WHERE org_id = $1 AND id = $2", b.org, r.ID).Scan(&status); err != nil || status != "ready" {
		t.Fatalf("status %q, %v", status, err)
	}
}
