// Package pgfeed keeps one PostgreSQL connection listening for the
// notifications that let the server's caches serve long: token revocations
// (package authn) and rate-limit changes (package ratelimit). Each cache
// is a Subscriber on a channel of its own; the operators' writes notify it
// in their transaction, so the notification arrives when they commit.
//
// While the feed is connected a cache may trust it to say what changed and
// serve what it read for long; when it is lost (a connection that fails,
// or that dies unseen: the heartbeat finds it), every subscriber is told,
// falls back to its short TTL, and the feed reconnects with back-off. One
// connection for all, held for good: not one of the pool's.
package pgfeed

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// Subscriber is a cache the feed keeps informed.
type Subscriber interface {
	// Channel is the notification channel it listens on.
	Channel() string
	// Notify is one notification's payload.
	Notify(payload string)
	// Connected says the feed listens on every channel (true) or is lost
	// (false): notifications may come while it is away.
	Connected(up bool)
}

// The heartbeat: a connection that has brought nothing for
// HeartbeatInterval is pinged, within HeartbeatTimeout; one that does not
// answer is lost. A connection that dies unseen (a network partition) is
// so found within their sum.
const (
	HeartbeatInterval = 10 * time.Second
	HeartbeatTimeout  = 2 * time.Second
	// maxBackoff bounds the wait between two attempts to connect.
	maxBackoff = 30 * time.Second
)

// Listen keeps the feed connected until ctx ends: connect opens its
// connection, timeout bounds the connection and each LISTEN, and every
// notification goes to the subscriber of its channel.
func Listen(ctx context.Context, connect func(context.Context) (*pgx.Conn, error), timeout time.Duration, log *slog.Logger, subs ...Subscriber) {
	if log == nil {
		log = slog.Default()
	}
	backoff := time.Second
	logged := false
	for ctx.Err() == nil {
		err := listenOnce(ctx, connect, timeout, subs)
		if ctx.Err() != nil {
			return
		}
		if !logged || backoff >= maxBackoff {
			channels := make([]string, len(subs))
			for i, s := range subs {
				channels[i] = s.Channel()
			}
			log.Warn("notification feed lost: revoked tokens and changed rate limits reach this server within their caches' TTLs until it is back",
				"channels", channels, "err", err, "retry_in", backoff.String())
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// listenOnce connects, listens and serves the notifications until the
// connection is lost.
func listenOnce(ctx context.Context, connect func(context.Context) (*pgx.Conn, error), timeout time.Duration, subs []Subscriber) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := connect(cctx)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	by := map[string]Subscriber{}
	for _, s := range subs {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{s.Channel()}.Sanitize())
		cancel()
		if err != nil {
			return err
		}
		by[s.Channel()] = s
	}
	for _, s := range subs {
		s.Connected(true)
	}
	defer func() {
		for _, s := range subs {
			s.Connected(false)
		}
	}()
	for {
		wctx, cancel := context.WithTimeout(ctx, HeartbeatInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, HeartbeatTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if s := by[n.Channel]; s != nil {
				s.Notify(n.Payload)
			}
		}
	}
}

// Connector opens the feed's connections with cfg (the pool's, copied:
// the feed holds a connection of its own). A heartbeat's wait ends on a
// read deadline, not on a cancel request sent to the server.
func Connector(cfg *pgx.ConnConfig) func(context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		c := cfg.Copy()
		c.Tracer = nil
		c.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
		}
		return pgx.ConnectConfig(ctx, c)
	}
}

// Coverage is what a subscriber knows of the feed, kept under the
// subscriber's own lock: whether it is connected, and a count of its
// events (connections, losses, notifications). A read is covered by the
// feed when the feed was connected from before the read started and
// nothing arrived while it ran: any later change then reaches what the
// read cached, which may be served long.
type Coverage struct {
	up  bool
	seq uint64
}

// ReadMark is the feed's state when a read started (Coverage.Start).
type ReadMark struct {
	up  bool
	seq uint64
}

// Connected records the feed connected or lost.
func (c *Coverage) Connected(up bool) { c.up, c.seq = up, c.seq+1 }

// Event records a notification.
func (c *Coverage) Event() { c.seq++ }

// Up says whether the feed is connected.
func (c *Coverage) Up() bool { return c.up }

// Start marks the start of a read.
func (c *Coverage) Start() ReadMark { return ReadMark{c.up, c.seq} }

// Covers says whether the read started at m is covered by the feed.
func (c *Coverage) Covers(m ReadMark) bool { return m.up && c.up && m.seq == c.seq }
