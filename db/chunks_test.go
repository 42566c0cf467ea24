package db_test

import (
	"context"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// knowledge_chunks (00008_embedding_width.sql): a chunk belongs to an entry
// of its own org (org_id leads the foreign key), goes with the entry, and
// goes when the entry's vector is cleared; vectors of any width from 64 to
// 3,072 are stored, others refused.
func TestChunksFollowTheirEntry(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	ctx := context.Background()
	a, b := seed(t, d.Pool, "a"), seed(t, d.Pool, "b")
	chunks := func() int {
		t.Helper()
		var n int
		if err := d.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge_chunks WHERE org_id = $1 AND entry_id = $2", a.org, a.entry).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ready := func(dims int) {
		t.Helper()
		if _, err := d.Pool.Exec(ctx, `UPDATE knowledge SET embedding = array_fill(0.5::real, ARRAY[$3::int])::vector,
			embedding_status = 'ready', embedding_model = 'm', embedded_at = now() WHERE org_id = $1 AND id = $2`, a.org, a.entry, dims); err != nil {
			t.Fatalf("a vector of %d dimensions: %v", dims, err)
		}
	}
	addChunk := func(org any, chunk, dims int) error {
		_, err := d.Pool.Exec(ctx, `INSERT INTO knowledge_chunks (org_id, entry_id, chunk, start_char, end_char, embedding_model, embedding)
			VALUES ($1, $2, $3, 0, 10, 'm', array_fill(0.5::real, ARRAY[$4::int])::vector)`, org, a.entry, chunk, dims)
		return err
	}
	for _, dims := range []int{64, 384, 1536, 3072} {
		ready(dims)
		if err := addChunk(a.org, 1, dims); err != nil {
			t.Fatalf("a chunk of %d dimensions: %v", dims, err)
		}
		// Clearing the vector (a re-embed, forget) clears the chunks.
		if _, err := d.Pool.Exec(ctx, `UPDATE knowledge SET embedding = NULL, embedding_status = 'pending', embedding_model = NULL,
			embedded_at = NULL WHERE org_id = $1 AND id = $2`, a.org, a.entry); err != nil {
			t.Fatal(err)
		}
		if n := chunks(); n != 0 {
			t.Fatalf("%d chunks left after the vector was cleared", n)
		}
	}
	for _, dims := range []int{63, 3073} {
		if _, err := d.Pool.Exec(ctx, `UPDATE knowledge SET embedding = array_fill(0.5::real, ARRAY[$3::int])::vector,
			embedding_status = 'ready', embedding_model = 'm', embedded_at = now() WHERE org_id = $1 AND id = $2`, a.org, a.entry, dims); pgCode(err) != "23514" {
			t.Fatalf("a vector of %d dimensions: %v, want a check violation", dims, err)
		}
		if err := addChunk(a.org, 1, dims); pgCode(err) != "23514" {
			t.Fatalf("a chunk of %d dimensions: %v, want a check violation", dims, err)
		}
	}
	// Another org's chunk of this entry cannot exist.
	if err := addChunk(b.org, 1, 384); pgCode(err) != "23503" {
		t.Fatalf("a chunk under another org: %v, want a foreign key violation", err)
	}
	if err := addChunk(a.org, -1, 384); pgCode(err) != "23514" {
		t.Fatalf("chunk -1: %v, want a check violation", err)
	}
	// Deleting the entry deletes its chunks.
	ready(384)
	if err := addChunk(a.org, 1, 384); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `WITH q AS (DELETE FROM knowledge_index_queue WHERE org_id = $1 AND entry_id = $2)
		DELETE FROM knowledge WHERE org_id = $1 AND id = $2`, a.org, a.entry); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 0 {
		t.Fatalf("%d chunks left after the entry was deleted", n)
	}
}
