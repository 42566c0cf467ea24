package authn

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/pgfeed"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// The Verifier is the revocation feed's subscriber (pgfeed): it drops the
// checks of every token a notification on tenancy.RevocationChannel names
// (all of an org's for "org:*"). While the feed is connected, the checks
// it covers are served up to FedTTL; when it is lost, every check falls
// back to the TTL until it is back.

// Listen keeps the revocation feed connected for v alone until ctx ends
// (the server's feed serves its other caches too: pgfeed.Listen).
func (v *Verifier) Listen(ctx context.Context, connect func(context.Context) (*pgx.Conn, error)) {
	pgfeed.Listen(ctx, connect, v.timeout, v.logger, v)
}

// Channel is pgfeed.Subscriber's: the revocations' channel.
func (v *Verifier) Channel() string { return tenancy.RevocationChannel }

// Notify is pgfeed.Subscriber's: a revocation.
func (v *Verifier) Notify(payload string) {
	org, token, err := tenancy.ParseRevocation(payload)
	if err != nil {
		v.logger.Error("token revocation feed: unreadable notification; dropping every cached check", "payload", payload, "err", err)
		v.revoke(uuid.Nil, nil)
		return
	}
	v.revoke(org, token)
}

// Connected is pgfeed.Subscriber's.
func (v *Verifier) Connected(up bool) { v.feed(up) }

// Timeout is how long a look-up, and the feed's connection, may take.
func (v *Verifier) Timeout() time.Duration { return v.timeout }

// feed marks the feed connected or lost. Lost, no check is covered by it
// any more: revocations may come while it is away.
func (v *Verifier) feed(up bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cov.Connected(up)
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
	v.cov.Event()
	for k, e := range v.m {
		if org == uuid.Nil || (e.p.OrgID == org && (token == nil || e.p.TokenID == *token)) {
			delete(v.m, k)
		}
	}
}
