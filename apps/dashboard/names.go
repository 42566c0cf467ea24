package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// orgNames names the orgs of the tasks the dashboard lists, from the
// database (packages/tenancy), so that an operator reads "org Acme
// (c307b184-…)" rather than an id to look up with ctl.
//
// The names are a cache of the whole org list: a page of tasks asks for
// the same few orgs many times, and one query answers them all. The
// payload formatter runs inside asynqmon's answer, so a read has a short
// deadline and a failed read is not tried again for a while: with the
// database down or slow the dashboard still answers, showing ids alone,
// and a page costs at most one deadline, not one per task.
type orgNames struct {
	list     func(context.Context) ([]tenancy.Org, error)
	log      *slog.Logger
	ttl      time.Duration // how long a read list is used
	unknown  time.Duration // how soon an id missing from the list reads it again (a new org)
	retry    time.Duration // how soon after a failed read the next is tried
	deadline time.Duration // how long one read may take
	now      func() time.Time

	mu      sync.Mutex
	byID    map[uuid.UUID]string
	readAt  time.Time // when byID was read
	triedAt time.Time // when a read was last started
	failing bool
}

func newOrgNames(list func(context.Context) ([]tenancy.Org, error), log *slog.Logger) *orgNames {
	return &orgNames{
		list: list, log: log,
		ttl: 30 * time.Second, unknown: 5 * time.Second, retry: 5 * time.Second,
		deadline: 500 * time.Millisecond, now: time.Now,
	}
}

// name returns the org's name, or "" when it is not known (no such org, or
// the database did not answer in time).
func (n *orgNames) name(id uuid.UUID) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	name, known := n.byID[id]
	age := now.Sub(n.readAt)
	stale := n.byID == nil || age >= n.ttl || (!known && age >= n.unknown)
	if stale && now.Sub(n.triedAt) >= n.retry {
		n.triedAt = now
		n.read()
		name = n.byID[id]
	}
	return name
}

// read replaces the list, or keeps the old one when the database does not
// answer within the deadline. Called with mu held.
func (n *orgNames) read() {
	ctx, cancel := context.WithTimeout(context.Background(), n.deadline)
	defer cancel()
	orgs, err := n.list(ctx)
	if err != nil {
		if !n.failing {
			n.log.Warn("org names unavailable: the dashboard shows org ids alone until the database answers",
				"err", err, "retry_in", n.retry.String())
		}
		n.failing = true
		return
	}
	if n.failing {
		n.log.Info("org names available again", "orgs", len(orgs))
	}
	n.failing = false
	byID := make(map[uuid.UUID]string, len(orgs))
	for _, o := range orgs {
		byID[o.ID] = o.Name
	}
	n.byID, n.readAt = byID, n.now()
}
