package db_test

import (
	"context"
	"testing"

	pgvector "github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// A pool that had connections before the migration created pgvector's
// extension sends vectors after it (the MCP benchmark's template writes
// failed: unknown type): the migration renews the connections,
// which register the extension's types when they are made.
func TestMigrateLeavesThePoolAbleToSendVectors(t *testing.T) {
	t.Parallel()
	d := testenv.EmptyPostgres(t)
	ctx := context.Background()
	if err := d.Pool.Ping(ctx); err != nil { // a connection made before the extension
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx, d.Pool); err != nil {
		t.Fatal(err)
	}
	// An array of vectors, as the bulk writes send them: pgx encodes one
	// vector of an unknown type as text, an array of them not at all.
	vs := []pgvector.Vector{pgvector.NewVector([]float32{1, 2, 3}), pgvector.NewVector([]float32{4, 5, 6})}
	var n int
	if err := d.Pool.QueryRow(ctx, "SELECT cardinality($1::vector[])", vs).Scan(&n); err != nil || n != 2 {
		t.Fatalf("vectors after the migration: %d of them, %v", n, err)
	}
}
