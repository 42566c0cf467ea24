package db

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// The loopback PostgreSQL the README's setup provides, as each of the
// roles of roles.go: DefaultURL is the application's (the MCP server),
// DefaultOperatorURL ctl's, DefaultOwnerURL the schema owner's (ctl
// migrate, the worker). The setup trusts loopback connections; elsewhere
// the URLs carry passwords.
const (
	DefaultURL         = "postgres://" + DefaultAppRole + "@127.0.0.1:5432/knowledge?sslmode=disable"
	DefaultOperatorURL = "postgres://" + DefaultOperatorRole + "@127.0.0.1:5432/knowledge?sslmode=disable"
	DefaultOwnerURL    = "postgres://postgres@127.0.0.1:5432/knowledge?sslmode=disable"
)

// DefaultRedisURL is the loopback Redis the same setup provides (embeddings
// queue, idempotence keys). It lives here, beside DefaultURL, because every
// app already depends on this module.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// Open returns a pool for url whose connections know pgvector's types (binary
// format for vectors) and checks that the server answers.
//
// The vector type only exists once the migrations have created the extension,
// so Open registers it lazily: a connection made before that simply works
// without vector support, which only the migration step itself needs.
func Open(ctx context.Context, url string, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := poolConfig(url, opts...)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return pool, nil
}

// Option adjusts a pool made by Open or Connect.
type Option func(*options)

type options struct {
	after    []func(context.Context, *pgx.Conn) error
	minConns int32
	tracer   pgx.QueryTracer
	notice   pgconn.NoticeHandler
}

// Tracer traces the pool's queries with t (packages/tracing.PgxTracer);
// nil: untraced. pgx takes one tracer; a t that also implements
// pgxpool.AcquireTracer traces connection acquires too.
func Tracer(t pgx.QueryTracer) Option {
	return func(o *options) { o.tracer = t }
}

// AfterConnect runs f on every new connection once its pgvector types are
// registered, before the pool hands it out: what a connection should do
// once rather than on its first use (knowledge.Maintenance.WarmConn).
func AfterConnect(f func(context.Context, *pgx.Conn) error) Option {
	return func(o *options) { o.after = append(o.after, f) }
}

// OnNotice hands every notice the server sends on the pool's connections
// to f (plan tests read auto_explain's plans so: testenv.ExplainPool); f
// may be called from several connections at once. Without it a notice is
// dropped.
func OnNotice(f pgconn.NoticeHandler) Option {
	return func(o *options) { o.notice = f }
}

// MinConns keeps n connections open, made (and warmed by AfterConnect) in
// the background, unless the URL sets pool_min_conns; at most the pool's
// size.
func MinConns(n int32) Option {
	return func(o *options) { o.minConns = n }
}

func poolConfig(url string, opts ...Option) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.minConns > 0 && !strings.Contains(url, "pool_min_conns") {
		cfg.MinConns = min(o.minConns, cfg.MaxConns)
	}
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	if o.notice != nil {
		cfg.ConnConfig.OnNotice = o.notice
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := registerVector(ctx, conn); err != nil {
			return err
		}
		for _, f := range o.after {
			if err := f(ctx, conn); err != nil {
				return err
			}
		}
		return nil
	}
	return cfg, nil
}

// registerVector registers pgvector's types on conn, once the extension
// exists.
func registerVector(ctx context.Context, conn *pgx.Conn) error {
	var has bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'vector')").Scan(&has); err != nil {
		return err
	}
	if has {
		return pgxvec.RegisterTypes(ctx, conn)
	}
	return nil
}

// NodePool is a pool on another node of coord's Citus cluster (host, port
// from its metadata), as coord's role and database, with pgvector's types
// and coord's tracer but none of coord's AfterConnect hooks (they warm a
// coordinator's connections). It connects lazily, gives up a connection
// attempt after 2 s and closes connections idle for 5 minutes.
func NodePool(coord *pgxpool.Pool, host string, port uint16) (*pgxpool.Pool, error) {
	cfg := coord.Config().Copy()
	cc := cfg.ConnConfig
	cc.Host, cc.Port, cc.Fallbacks = host, port, nil
	cc.ConnectTimeout = 2 * time.Second
	if cc.TLSConfig != nil {
		cc.TLSConfig = cc.TLSConfig.Clone()
		cc.TLSConfig.ServerName = host
	}
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	// A node of a migrated cluster has the extension: one round trip.
	cfg.AfterConnect = pgxvec.RegisterTypes
	return pgxpool.NewWithConfig(context.Background(), cfg)
}
