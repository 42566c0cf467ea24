package authn

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// The revocation feed's heartbeat: a connection that has brought nothing
// for HeartbeatInterval is pinged, within HeartbeatTimeout; one that does
// not answer is lost, and the checks it covered fall back to the TTL. A
// connection that dies unseen (a network partition) is so found within
// their sum.
const (
	HeartbeatInterval = 10 * time.Second
	HeartbeatTimeout  = 2 * time.Second
	// feedBackoff bounds the wait between two attempts to connect.
	feedBackoff = 30 * time.Second
)

// Listen keeps the revocation feed (tenancy.RevocationChannel) connected
// until ctx ends: connect opens a connection of its own (not the pool's:
// it is held for good), on which the verifier LISTENs and drops the checks
// of every token a notification names (all of an org's for "org:*"). While
// it is connected, the checks it covers are served up to FedTTL; when it
// is lost, every check falls back to the TTL until it is back.
func (v *Verifier) Listen(ctx context.Context, connect func(context.Context) (*pgx.Conn, error)) {
	backoff := time.Second
	logged := false
	for ctx.Err() == nil {
		err := v.listenOnce(ctx, connect)
		if ctx.Err() != nil {
			return
		}
		if !logged || backoff >= feedBackoff {
			v.logger.Warn("token revocation feed lost: revoked tokens stop working within MCP_TOKEN_CACHE_TTL until it is back", "err", err, "retry_in", backoff.String())
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, feedBackoff)
	}
}

// listenOnce connects, listens and serves the notifications until the
// connection is lost.
func (v *Verifier) listenOnce(ctx context.Context, connect func(context.Context) (*pgx.Conn, error)) error {
	cctx, cancel := context.WithTimeout(ctx, v.timeout)
	conn, err := connect(cctx)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	cctx, cancel = context.WithTimeout(ctx, v.timeout)
	_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{tenancy.RevocationChannel}.Sanitize())
	cancel()
	if err != nil {
		return err
	}
	v.feed(true)
	defer v.feed(false)
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
			org, token, err := tenancy.ParseRevocation(n.Payload)
			if err != nil {
				v.logger.Error("token revocation feed: unreadable notification; dropping every cached check", "payload", n.Payload, "err", err)
				v.revoke(uuid.Nil, nil)
				continue
			}
			v.revoke(org, token)
		}
	}
}

// feed marks the feed connected or lost. Lost, no check is covered by it
// any more: revocations may come while it is away.
func (v *Verifier) feed(up bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.feedUp = up
	v.feedSeq++
	if !up {
		for _, e := range v.m {
			e.fed = false
		}
	}
}

// revoke drops the checks of token of org, of every token of org (token
// nil), or of every token (org uuid.Nil).
func (v *Verifier) revoke(org uuid.UUID, token *uuid.UUID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.feedSeq++
	for k, e := range v.m {
		if org == uuid.Nil || (e.p.OrgID == org && (token == nil || e.p.TokenID == *token)) {
			delete(v.m, k)
		}
	}
}

// FeedConnector opens the feed's connections with cfg (the pool's, copied:
// the feed holds a connection of its own). A heartbeat's wait ends on a
// read deadline, not on a cancel request sent to the server.
func FeedConnector(cfg *pgx.ConnConfig) func(context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		c := cfg.Copy()
		c.Tracer = nil
		c.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
		}
		return pgx.ConnectConfig(ctx, c)
	}
}
