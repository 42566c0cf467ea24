package pgbatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Named is a statement written with named arguments (@name, pgx's
// NamedArgs) that is rewritten to positional ones ($1, $2, ...) once, on
// its first use, instead of on every call as pgx.NamedArgs does: the
// search statement is long (most of it comments saying why its plans are
// what they are), and lexing it again for every list of every search cost
// about 0.1 ms of CPU a statement (pprof of BenchmarkMCPEndToEnd), CPU the
// database's backends on the same cores wanted. pgx's own rewrite does the
// work, so what is sent is what NamedArgs would send.
type Named struct {
	src   string
	once  sync.Once
	sql   string   // src with positional arguments
	names []string // the name of each positional argument, in order
	err   error
}

// NewNamed returns the statement src, written with @name arguments.
func NewNamed(src string) *Named { return &Named{src: src} }

// Args are the statement to send and the positional arguments for the
// named ones. Every call must pass every name the statement uses (as with
// NamedArgs, names it does not use are ignored); a missing one is an
// error, not a silent NULL.
func (n *Named) Args(named pgx.NamedArgs) (string, []any, error) {
	n.once.Do(func() {
		// Rewrite with each argument's value being its own name: the
		// rewritten arguments are then the names in positional order.
		self := make(pgx.NamedArgs, len(named))
		for k := range named {
			self[k] = k
		}
		sql, args, err := self.RewriteQuery(context.Background(), nil, n.src, nil)
		if err != nil {
			n.err = fmt.Errorf("pgbatch: rewrite named arguments: %w", err)
			return
		}
		n.sql, n.names = sql, make([]string, len(args))
		for i, a := range args {
			name, ok := a.(string)
			if !ok { // pgx gives nil for a name the map lacks
				n.err = fmt.Errorf("pgbatch: argument $%d of the statement is not passed", i+1)
				return
			}
			n.names[i] = name
		}
	})
	if n.err != nil {
		return "", nil, n.err
	}
	out := make([]any, len(n.names))
	for i, name := range n.names {
		v, ok := named[name]
		if !ok {
			return "", nil, fmt.Errorf("pgbatch: named argument %q is not passed", name)
		}
		out[i] = v
	}
	return n.sql, out, nil
}

// Query sends the statement with the named arguments on p.
func (n *Named) Query(ctx context.Context, p *Pipeline, named pgx.NamedArgs) (pgx.Rows, error) {
	sql, pos, err := n.Args(named)
	if err != nil {
		return nil, err
	}
	return p.Query(ctx, sql, pos...)
}
