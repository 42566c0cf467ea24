package knowledge

import (
	"context"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestConstraintErrorsNameTheSchemasConstraints pins the error mapping to
// the schema: every constraint name mapErr keys on exists, so renaming one
// in a migration fails here instead of turning a clear error (no such task)
// into an opaque failure.
func TestConstraintErrorsNameTheSchemasConstraints(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	for name := range constraintErrors {
		var n int
		if err := db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_constraint WHERE conname = $1 AND connamespace = 'public'::regnamespace", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("constraint %s: %d in the schema, want 1", name, n)
		}
	}
}
