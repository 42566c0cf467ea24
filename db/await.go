package db

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Connect returns a pool for url whose connections know pgvector's types,
// without connecting: a process that starts while PostgreSQL is down comes
// up anyway (and reports not-ready), and the pool connects once the server
// answers. Open is Connect plus a ping.
func Connect(url string, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := poolConfig(url, opts...)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	return pool, nil
}

// Await pings a dependency until it answers or ctx ends, logging every
// failed attempt (warn, with the attempt number and the next wait), so an
// operator sees a process waiting rather than a silent one. Each ping has a
// 2-second deadline; waits grow from 250 ms to 5 s. It returns ctx's error
// if ctx ends first.
func Await(ctx context.Context, what string, ping func(context.Context) error, log *slog.Logger) error {
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := ping(pctx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("dependency answers again", "dependency", what, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("waiting for dependency", "dependency", what, "attempt", attempt, "retry_in", wait.String(), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}
