package stages

import (
	"context"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// PgxTracer counts and times every PostgreSQL round trip made with the
// context of a call that carries a Clock: a statement, a batch (one round
// trip however many statements it pipelines), a prepare, a COPY, a
// not a connection's set-up (a call meets one only when the pool grows).
// Install it with db.Tracer only when the clock is on.
type PgxTracer struct{}

var (
	_ pgx.QueryTracer    = PgxTracer{}
	_ pgx.BatchTracer    = PgxTracer{}
	_ pgx.PrepareTracer  = PgxTracer{}
	_ pgx.CopyFromTracer = PgxTracer{}
)

func (PgxTracer) start(ctx context.Context) context.Context {
	From(ctx).IOStart(KindDB)
	return ctx
}

func (PgxTracer) end(ctx context.Context) { From(ctx).IOEnd(KindDB) }

func (t PgxTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return t.start(ctx)
}

func (t PgxTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.end(ctx)
}

func (t PgxTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return t.start(ctx)
}

func (PgxTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t PgxTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.end(ctx)
}

func (t PgxTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return t.start(ctx)
}

func (t PgxTracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) {
	t.end(ctx)
}

func (t PgxTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return t.start(ctx)
}

func (t PgxTracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	t.end(ctx)
}

// RedisHook counts and times every Redis round trip made with the context
// of a call that carries a Clock: a command, or a pipeline (one round
// trip), not a connection's set-up (as for PgxTracer). The rate
// limiters' (keys "rate:...") count as the RateLimit
// stage's, whose time the gate takes; the store's idempotence keys
// ("idem:...") as Idempotence; the rest (the queue, caches) as RedisOther.
// Install it with AddHook only when the clock is on.
type RedisHook struct{}

var _ redis.Hook = RedisHook{}

func (RedisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (RedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c := From(ctx)
		if c == nil || setup(cmd) {
			return next(ctx, cmd)
		}
		k := kindOf(cmd)
		if k < 0 {
			c.RateLimitTrip()
			return next(ctx, cmd)
		}
		c.IOStart(k)
		defer c.IOEnd(k)
		return next(ctx, cmd)
	}
}

func (RedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c := From(ctx)
		if c == nil || len(cmds) == 0 || setup(cmds[0]) {
			return next(ctx, cmds)
		}
		k := KindRedis
		for _, cmd := range cmds {
			switch kindOf(cmd) {
			case -1:
				c.RateLimitTrip()
				return next(ctx, cmds)
			case KindIdem:
				k = KindIdem
			}
		}
		c.IOStart(k)
		defer c.IOEnd(k)
		return next(ctx, cmds)
	}
}

// setup says whether cmd sets a new connection up (go-redis sends HELLO,
// AUTH, SELECT and CLIENT SETINFO when it dials).
func setup(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "hello", "auth", "select", "client":
		return true
	}
	return false
}

// kindOf classifies a command by its first key: -1 for a rate limit's.
func kindOf(cmd redis.Cmder) Kind {
	args := cmd.Args()
	key := ""
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) > 3 {
			key, _ = args[3].(string)
		}
	default:
		if len(args) > 1 {
			key, _ = args[1].(string)
		}
	}
	switch {
	case strings.HasPrefix(key, "rate:"), strings.HasPrefix(key, "mcp:"):
		return -1
	case strings.HasPrefix(key, "idem:"):
		return KindIdem
	}
	return KindRedis
}
