package pgbatch

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Named sends what pgx.NamedArgs would: the same statement and the same
// arguments in the same order, however often a name is used; names the
// statement does not use are ignored; a name it uses that a call lacks is
// an error, not a NULL.
func TestNamedIsWhatNamedArgsSends(t *testing.T) {
	const src = "SELECT @b::int, @a::text, @b::int -- @c is in a comment\nWHERE x = '@d'"
	args := pgx.NamedArgs{"a": "one", "b": 2, "unused": 3}
	n := NewNamed(src)
	for range 2 { // the first call rewrites, the second reuses
		sql, pos, err := n.Args(args)
		if err != nil {
			t.Fatal(err)
		}
		wantSQL, wantArgs, err := args.RewriteQuery(t.Context(), nil, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sql != wantSQL || !slices.Equal(pos, wantArgs) {
			t.Fatalf("got %q %v, NamedArgs sends %q %v", sql, pos, wantSQL, wantArgs)
		}
	}
	if _, _, err := n.Args(pgx.NamedArgs{"a": "one"}); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("a call without b: want an error naming it, got %v", err)
	}
	if _, _, err := NewNamed(src).Args(pgx.NamedArgs{"b": 2}); err == nil {
		t.Fatal("a first call without a: want an error")
	}
}
