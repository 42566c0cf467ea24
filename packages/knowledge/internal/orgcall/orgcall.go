// Package orgcall runs one read-only statement of one org on the Citus
// worker that holds the org, through knowledge_run_org (migration 00033),
// so the worker plans it once per session instead of the coordinator and
// the worker planning it on every call (docs/operators.md, "Search on a
// cluster").
//
// The call is one statement,
//
//	SELECT * FROM knowledge_run_org(org, name, NULL, settings, args) AS r (<columns>)
//
// sent on its own (Citus delegates a distributed function's call to the
// org's worker only outside a transaction block). The statement's text is
// not in the call: it is stored once in knowledge_org_statements
// (migration 00047) under its name, which ends with the text's md5, and
// the worker reads it there when it prepares the statement; carried by
// every call, the coordinator deparsed it and the worker parsed it each
// time. The statement's arguments travel as text, in PostgreSQL's text
// form of the types the coordinator infers for them; its columns, read
// from the same description, make the call's column definition list. The
// description and the stored text are made once per Statement, on the
// first call.
//
// On a pool of the org's worker itself, QueryShards sends the statement
// without the function: renamed to the org's shards and prepared by the
// connection (shards.go).
package orgcall

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statement is one statement run through knowledge_run_org. Its zero
// value is not usable: New.
type Statement struct {
	sql  string
	name string // its name in knowledge_org_statements; on the workers, plus the org's shard

	mu         sync.Mutex
	ready      bool
	inline     bool          // the text could not be stored: each call carries it
	learning   chan struct{} // closed when the description under way ends
	learnErr   error
	call       string   // the call, with its column definition list
	params     []uint32 // the statement's parameters' types, on the node that described it
	paramTypes []string // and their names (pg_type.typname)
}

// New is the statement sql (positional parameters). prefix names it: the
// first 16 hex digits of the text's md5 follow (the form
// knowledge_org_statements checks), so two texts never share a name.
func New(prefix, sql string) *Statement {
	h := md5.Sum([]byte(sql))
	return &Statement{sql: sql, name: prefix + "_" + hex.EncodeToString(h[:8])}
}

// Name is the statement's name in knowledge_org_statements.
func (s *Statement) Name() string { return s.name }

// Query runs the statement for org with args (positional) after settings
// (name, value pairs, local to the call's transaction). Its rows are the
// statement's. pool must not hold the context's org (db.Scoped would wrap
// the call in a transaction block, which Citus does not delegate).
func (s *Statement) Query(ctx context.Context, pool *pgxpool.Pool, org uuid.UUID, settings []string, args []any) (pgx.Rows, error) {
	if err := s.learn(ctx, pool); err != nil {
		return nil, err
	}
	if len(args) != len(s.params) {
		return nil, fmt.Errorf("orgcall: %s takes %d arguments, %d given", s.name, len(s.params), len(args))
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// The connection's type map knows the types its pool registered (the
	// vector types), by this node's OIDs: an extension's types may have
	// other OIDs on a worker than on the coordinator that described the
	// statement, so they are found by name.
	m := conn.Conn().TypeMap()
	text := make([]*string, len(args))
	for i, a := range args {
		oid := s.params[i]
		if t, ok := m.TypeForName(s.paramTypes[i]); ok {
			oid = t.OID
		}
		b, err := m.Encode(oid, pgtype.TextFormatCode, a, nil)
		if err != nil {
			conn.Release()
			return nil, fmt.Errorf("orgcall: %s: argument $%d: %w", s.name, i+1, err)
		}
		if b != nil {
			v := string(b)
			text[i] = &v
		}
	}
	var sql *string
	if s.inline {
		sql = &s.sql
	}
	rows, err := conn.Query(ctx, s.call, org, s.name, sql, settings, text)
	if err != nil {
		conn.Release()
		return nil, err
	}
	return &releasing{Rows: rows, conn: conn}, nil
}

// Learn describes the statement on pool, once (a Query on another
// pool then uses that description): on the coordinator, whose types the
// statement's text names and where its text is stored for every node.
func (s *Statement) Learn(ctx context.Context, pool *pgxpool.Pool) error { return s.learn(ctx, pool) }

// releasing are rows that give their connection back when closed.
type releasing struct {
	pgx.Rows
	conn *pgxpool.Conn
}

func (r *releasing) Close() {
	r.Rows.Close()
	if r.conn != nil {
		r.conn.Release()
		r.conn = nil
	}
}

// learn describes the statement on the coordinator, once: its parameters'
// types and its columns (name and type); and stores its text for the
// workers. The description runs detached
// from ctx (bounded by describeTimeout) so that a caller with a short
// deadline (the store's duplicate check) does not cancel it for the next
// ones; the caller waits for it only until ctx ends.
func (s *Statement) learn(ctx context.Context, pool *pgxpool.Pool) error {
	s.mu.Lock()
	if s.ready {
		s.mu.Unlock()
		return nil
	}
	if s.learning == nil {
		done := make(chan struct{})
		s.learning = done
		go func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), describeTimeout)
			defer cancel()
			err := s.describe(dctx, pool)
			s.mu.Lock()
			s.ready, s.learnErr, s.learning = err == nil, err, nil
			s.mu.Unlock()
			close(done)
		}()
	}
	done := s.learning
	s.mu.Unlock()
	select {
	case <-done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.learnErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// describeTimeout bounds a statement's description, storeTimeout the
// storing of its text within it.
const (
	describeTimeout = 30 * time.Second
	storeTimeout    = 2 * time.Second
)

func (s *Statement) describe(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	desc, err := conn.Conn().PgConn().Prepare(ctx, "", s.sql, nil)
	if err != nil {
		return fmt.Errorf("orgcall: describe %s: %w", s.name, err)
	}
	oids := make([]uint32, len(desc.Fields))
	mods := make([]int32, len(desc.Fields))
	for i, f := range desc.Fields {
		oids[i], mods[i] = f.DataTypeOID, f.TypeModifier
	}
	var types, paramTypes []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(format_type(o, nullif(m, -1)) ORDER BY n), '{}'),
		(SELECT coalesce(array_agg(t.typname::text ORDER BY p.n), '{}')
		 FROM unnest($3::oid[]) WITH ORDINALITY AS p (o, n) JOIN pg_type t ON t.oid = p.o)
		FROM unnest($1::oid[], $2::int[]) WITH ORDINALITY AS u (o, m, n)`, oids, mods, desc.ParamOIDs).Scan(&types, &paramTypes); err != nil {
		return fmt.Errorf("orgcall: column types of %s: %w", s.name, err)
	}
	cols := make([]string, len(types))
	for i, f := range desc.Fields {
		cols[i] = pgx.Identifier{f.Name}.Sanitize() + " " + types[i]
	}
	// A reference table's row, written on every node: once per statement
	// and process (a text stored before, by this process or another,
	// stays). A text that cannot be stored is carried by each call of this
	// process, as before 00047: a schema older than the table, or a worker
	// down (a reference table's write needs every node, and the orgs of the
	// other workers must go on answering: storeTimeout bounds the wait on
	// one that hangs).
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if _, err := conn.Exec(sctx, `INSERT INTO knowledge_org_statements (name, sql) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		s.name, s.sql); err != nil {
		s.inline = true
	}
	s.call = "SELECT * FROM knowledge_run_org($1::uuid, $2::text, $3::text, $4::text[], $5::text[]) AS r (" +
		strings.Join(cols, ", ") + ")"
	s.params, s.paramTypes = desc.ParamOIDs, paramTypes
	return nil
}
