package knowledge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// PurgeScope says what a purge erases: exactly one of Entry, Agent, All.
type PurgeScope struct {
	Entry uuid.UUID // one entry
	Agent uuid.UUID // every entry the agent created
	All   bool      // every entry of the org
}

func (p PurgeScope) check() error {
	n := 0
	if p.Entry != uuid.Nil {
		n++
	}
	if p.Agent != uuid.Nil {
		n++
	}
	if p.All {
		n++
	}
	if n != 1 {
		return InvalidArgument("scope", "give exactly one of --entry, --agent, --all")
	}
	return nil
}

// PurgeReport is what a purge removed (or, in a dry run, would remove).
type PurgeReport struct {
	DryRun            bool  `json:"dryRun"`
	Entries           int64 `json:"entries"`
	TaskLinks         int64 `json:"taskLinks"`
	SupersessionEdges int64 `json:"supersessionEdges"` // recorded direct edges removed
	Relinked          int64 `json:"relinked"`          // surviving chain entries pointed past the erased ones
	HeadsAgain        int64 `json:"headsAgain"`        // surviving entries whose every successor was erased
	Postings          int64 `json:"postings"`          // lexical index rows
	IdempotenceKeys   int64 `json:"idempotenceKeys"`   // Redis keys of recent stores
	// IDs are the erased entries, for the caller's other clean-ups (queued
	// embedding jobs). Left empty for a purge of a whole org, whose clean-ups
	// match on the org.
	IDs []uuid.UUID `json:"-"`
}

// purgeBatch bounds one transaction: locks held, memory, and the work lost
// to a failure. A purge is a sequence of batches, each one consistent
// (chains, index statistics, quota), so an interrupted purge leaves no half
// state behind and running it again finishes it.
const purgeBatch = 500

// Purge erases entries of org for good: the rows (title, body, tags,
// vector), their task links, their recorded supersession edges, their
// postings in the lexical index (keeping the org's document frequencies,
// entry count and lengths equal to what the index holds), their place in
// the indexer's queue, and the idempotence keys in Redis of the stores that
// made them. Chains stay true: a surviving entry that was superseded by an
// erased one now points at its next surviving successor and head, or is a
// head again if nothing after it survives. The org's knowledge_stored quota
// is given back what the erased entries used.
//
// What it does not do (the caller does, see apps/ctl purge): delete queued
// embedding tasks (jobs.PurgeTasks), revoke tokens, vacuum the tables.
//
// dryRun counts without writing. Entries of another org, or ids that do not
// exist, are simply not found: the report says 0.
func (s *Service) Purge(ctx context.Context, org uuid.UUID, scope PurgeScope, dryRun bool) (*PurgeReport, error) {
	if err := scope.check(); err != nil {
		return nil, err
	}
	rep := &PurgeReport{DryRun: dryRun}
	if scope.All && !dryRun {
		if err := s.dropOrgIndex(ctx, org); err != nil {
			return rep, err
		}
	}
	after := uuid.Nil
	for {
		var ids []uuid.UUID
		var err error
		switch {
		case scope.Entry != uuid.Nil:
			if after != uuid.Nil {
				ids = nil
			} else {
				ids = []uuid.UUID{scope.Entry}
			}
		case scope.Agent != uuid.Nil:
			ids, err = s.q.PurgeSelectByAgent(ctx, sqlc.PurgeSelectByAgentParams{OrgID: org, AgentID: &scope.Agent, After: after, MaxRows: purgeBatch})
		default:
			ids, err = s.q.PurgeSelectAll(ctx, sqlc.PurgeSelectAllParams{OrgID: org, After: after, MaxRows: purgeBatch})
		}
		if err != nil {
			return rep, mapErr(err, "")
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		if dryRun {
			err = s.countBatch(ctx, org, ids, rep)
		} else {
			err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				return s.purgeBatch(ctx, tx, org, ids, !scope.All, rep)
			})
		}
		if err != nil {
			return rep, mapErr(err, "")
		}
	}
	if !dryRun {
		// The erased entries' tags are keys of the org counters (stats.go):
		// fold the purge's deltas now, which deletes the counters that fell
		// to zero, rather than at the worker's next upkeep.
		if _, err := s.CompactCounts(ctx, 0); err != nil {
			return rep, fmt.Errorf("entries erased; folding the org counters (the worker's upkeep will): %w", err)
		}
	}
	n, err := s.purgeIdempotenceKeys(ctx, org, scope, rep, dryRun)
	rep.IdempotenceKeys = n
	if err != nil {
		return rep, fmt.Errorf("entries erased; idempotence keys (they expire within 60 s): %w", err)
	}
	return rep, nil
}

// dropOrgIndex empties the org's whole lexical index first when the whole
// org goes: one statement per table instead of re-analysing every entry.
// The queue goes too, so no indexer picks the org up meanwhile.
func (s *Service) dropOrgIndex(ctx context.Context, org uuid.UUID) error {
	return mapErr(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if _, err := q.LockSearchStats(ctx, sqlc.LockSearchStatsParams{OrgID: org, DefaultConfig: s.opts.TextSearchConfig}); err != nil {
			return err
		}
		if err := q.DeleteOrgPostings(ctx, org); err != nil {
			return err
		}
		if err := q.DeleteOrgTermStats(ctx, org); err != nil {
			return err
		}
		if _, err := q.PurgeDeleteOrgQueue(ctx, org); err != nil {
			return err
		}
		return q.PurgeOrgIndex(ctx, org)
	}), "")
}

// purgeBatch erases ids (at most purgeBatch) in tx.
func (s *Service) purgeBatch(ctx context.Context, tx pgx.Tx, org uuid.UUID, ids []uuid.UUID, unindex bool, rep *PurgeReport) error {
	q := sqlc.New(tx)
	rows, err := s.lockForErase(ctx, q, org, ids, unindex)
	if err != nil || len(rows) == 0 {
		return err
	}
	return s.eraseLocked(ctx, tx, org, rows, unindex, rep)
}

// lockForErase takes what erasing entries of org needs, in the order
// every writer of chains and of the index takes them: the org's
// supersession lock (as Supersede), the index statistics row (as the
// indexer, when unindex), then the entries of ids in id order, which it
// returns (those that exist).
func (s *Service) lockForErase(ctx context.Context, q *sqlc.Queries, org uuid.UUID, ids []uuid.UUID, unindex bool) ([]sqlc.PurgeLockEntriesRow, error) {
	if err := q.LockOrgSupersessions(ctx, org.String()); err != nil {
		return nil, err
	}
	if unindex {
		if _, err := q.LockSearchStats(ctx, sqlc.LockSearchStatsParams{OrgID: org, DefaultConfig: s.opts.TextSearchConfig}); err != nil {
			return nil, err
		}
	}
	return q.PurgeLockEntries(ctx, sqlc.PurgeLockEntriesParams{OrgID: org, Ids: ids})
}

// eraseLocked erases the entries lockForErase locked in tx (rows, not
// empty).
func (s *Service) eraseLocked(ctx context.Context, tx pgx.Tx, org uuid.UUID, rows []sqlc.PurgeLockEntriesRow, unindex bool, rep *PurgeReport) error {
	q := sqlc.New(tx)
	ids, gone, heads := chainsOf(rows, make([]uuid.UUID, 0, len(rows)))
	plan, err := planRelink(ctx, q, org, heads, gone)
	if err != nil {
		return err
	}
	var headsAgain []uuid.UUID
	for _, l := range plan {
		if err := q.PurgeRelink(ctx, sqlc.PurgeRelinkParams{OrgID: org, ID: l.id, SupersededBy: l.next, HeadID: l.head}); err != nil {
			return err
		}
		if l.next == nil {
			headsAgain = append(headsAgain, l.id)
			rep.HeadsAgain++
			continue
		}
		rep.Relinked++
		if l.nextChanged {
			if err := q.PurgeRelinkEdge(ctx, sqlc.PurgeRelinkEdgeParams{OrgID: org, OldID: l.id, NewID: *l.next}); err != nil {
				return err
			}
		}
	}
	n, err := q.PurgeDeleteEdges(ctx, sqlc.PurgeDeleteEdgesParams{OrgID: org, Ids: ids, HeadsAgain: headsAgain})
	if err != nil {
		return err
	}
	rep.SupersessionEdges += n
	if n, err = q.PurgeDeleteTaskLinks(ctx, sqlc.PurgeDeleteTaskLinksParams{OrgID: org, Ids: ids}); err != nil {
		return err
	}
	rep.TaskLinks += n
	if unindex {
		u, err := q.PurgeUnindex(ctx, sqlc.PurgeUnindexParams{OrgID: org, Ids: ids})
		if err != nil {
			return fmt.Errorf("remove from the lexical index: %w", err)
		}
		rep.Postings += u.Postings
	}
	if _, err := q.PurgeDeleteQueued(ctx, sqlc.PurgeDeleteQueuedParams{OrgID: org, Ids: ids}); err != nil {
		return err
	}
	if n, err = q.PurgeDeleteEntries(ctx, sqlc.PurgeDeleteEntriesParams{OrgID: org, Ids: ids}); err != nil {
		return err
	}
	rep.Entries += n
	rep.IDs = append(rep.IDs, ids...)
	return tenancy.ReleaseQuota(ctx, tx, org, tenancy.ResourceKnowledgeStored, n)
}

// chainsOf returns the ids of the locked entries (appended to ids), the
// same as a set, and the heads of their chains (an entry's head, or the
// entry itself while it is one), which planRelink repairs.
func chainsOf(rows []sqlc.PurgeLockEntriesRow, ids []uuid.UUID) ([]uuid.UUID, map[uuid.UUID]bool, map[uuid.UUID]bool) {
	gone := make(map[uuid.UUID]bool, len(rows))
	heads := map[uuid.UUID]bool{}
	for _, r := range rows {
		gone[r.ID] = true
		ids = append(ids, r.ID)
		if r.HeadID != nil {
			heads[*r.HeadID] = true
		} else {
			heads[r.ID] = true
		}
	}
	return ids, gone, heads
}

// countBatch is purgeBatch's dry run: the same numbers, nothing written.
func (s *Service) countBatch(ctx context.Context, org uuid.UUID, ids []uuid.UUID, rep *PurgeReport) error {
	rows, err := s.q.PurgeLockEntries(ctx, sqlc.PurgeLockEntriesParams{OrgID: org, Ids: ids})
	if err != nil || len(rows) == 0 {
		return err
	}
	ids, gone, heads := chainsOf(rows, ids[:0])
	plan, err := planRelink(ctx, s.q, org, heads, gone)
	if err != nil {
		return err
	}
	for _, l := range plan {
		if l.next == nil {
			rep.HeadsAgain++
		} else {
			rep.Relinked++
		}
	}
	c, err := s.q.PurgeCountLinks(ctx, sqlc.PurgeCountLinksParams{OrgID: org, Ids: ids})
	if err != nil {
		return err
	}
	rep.TaskLinks += c.Links
	rep.SupersessionEdges += c.Edges
	p, err := s.q.PurgeCountPostings(ctx, sqlc.PurgeCountPostingsParams{OrgID: org, Ids: ids})
	if err != nil {
		return err
	}
	rep.Postings += p
	rep.Entries += int64(len(rows))
	rep.IDs = append(rep.IDs, ids...)
	return nil
}

type relink struct {
	id          uuid.UUID
	next, head  *uuid.UUID // nil, nil: a head again
	nextChanged bool
}

// planRelink computes how the surviving entries of the chains with the
// given heads point once the gone entries are erased. A chain is a tree
// whose edges run from an entry to its direct successor and whose root is
// the head. Erasing entries contracts the tree: a survivor's new successor
// is the first survivor along its old path, its new head the last survivor
// on that path (none: it is a head itself). Survivors whose path crosses no
// erased entry are unchanged and not listed.
func planRelink(ctx context.Context, q *sqlc.Queries, org uuid.UUID, heads, gone map[uuid.UUID]bool) ([]relink, error) {
	hs := make([]uuid.UUID, 0, len(heads))
	for h := range heads {
		hs = append(hs, h)
	}
	members, err := q.PurgeChainMembers(ctx, sqlc.PurgeChainMembersParams{OrgID: org, Heads: hs})
	if err != nil {
		return nil, err
	}
	succ := make(map[uuid.UUID]*uuid.UUID, len(members))
	for _, m := range members {
		succ[m.ID] = m.SupersededBy
	}
	var plan []relink
	for _, m := range members {
		if gone[m.ID] || m.SupersededBy == nil {
			continue
		}
		var next, last *uuid.UUID
		crosses := false
		for cur := m.SupersededBy; cur != nil; cur = succ[*cur] {
			if gone[*cur] {
				crosses = true
				continue
			}
			c := *cur
			if next == nil {
				next = &c
			}
			last = &c
		}
		if !crosses {
			continue
		}
		plan = append(plan, relink{id: m.ID, next: next, head: last,
			nextChanged: next != nil && *next != *m.SupersededBy})
	}
	return plan, nil
}

// purgeIdempotenceKeys deletes the org's store idempotence keys that belong
// to the purge: all of them for a whole org, an agent's for a purge by
// agent, and any whose recorded answer names an erased entry. The keys live
// 60 s; a SCAN of the org's prefix is small.
func (s *Service) purgeIdempotenceKeys(ctx context.Context, org uuid.UUID, scope PurgeScope, rep *PurgeReport, dryRun bool) (int64, error) {
	if s.opts.Redis == nil {
		return 0, nil
	}
	erased := make(map[uuid.UUID]bool, len(rep.IDs))
	for _, id := range rep.IDs {
		erased[id] = true
	}
	prefix := fmt.Sprintf("idem:k.store:%s:", org)
	agentPrefix := ""
	if scope.Agent != uuid.Nil {
		agentPrefix = prefix + scope.Agent.String() + ":"
	}
	var n int64
	iter := s.opts.Redis.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		del := scope.All || (agentPrefix != "" && strings.HasPrefix(key, agentPrefix))
		if !del {
			v, err := s.opts.Redis.Get(ctx, key).Bytes()
			if err != nil {
				continue // expired meanwhile
			}
			var rec idemRecord
			if json.Unmarshal(v, &rec) == nil && rec.Result != nil && erased[rec.Result.ID] {
				del = true
			}
		}
		if !del {
			continue
		}
		n++
		if !dryRun {
			if err := s.opts.Redis.Del(ctx, key).Err(); err != nil {
				return n, err
			}
		}
	}
	return n, iter.Err()
}
