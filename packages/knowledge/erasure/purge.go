package erasure

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rediskit"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

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
func (e *Erasure) Purge(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, dryRun bool) (_ *domain.PurgeReport, err error) {
	defer data.WrapOp(&err, "knowledge.Purge")
	return e.PurgeWith(ctx, org, scope, domain.PurgeOptions{DryRun: dryRun})
}

// PurgeWith is Purge with options (progress).
//
// Concurrency (docs/operators.md, "Lock order"): every transaction takes
// the org's supersession lock, the org's index statistics row, then the
// entries in id order, as every writer of an entry does; one that
// Postgres aborts as a deadlock or serialisation failure anyway is run
// again after a bounded back-off (data.RetryTx). A purge of a whole org
// empties the org's lexical index first and, after the last batch, once
// more, queueing every entry left (those stored while it ran) for the
// indexer: entries stored meanwhile may have been indexed, then erased by
// a later batch, and the second reset leaves the index exactly what
// indexing the remaining rows gives (docs/operators.md, "Purge").
func (e *Erasure) PurgeWith(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, o domain.PurgeOptions) (_ *domain.PurgeReport, err error) {
	defer data.WrapOp(&err, "knowledge.PurgeWith")
	dryRun := o.DryRun
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	rep := &domain.PurgeReport{DryRun: dryRun}
	// Uploads first: no finish can store a document from them once the
	// entries are being erased.
	if rep.Uploads, err = e.purgeUploads(ctx, org, scope, dryRun); err != nil {
		return rep, data.MapErr(err, "")
	}
	if scope.All && !dryRun {
		if _, err := e.resetOrgIndex(ctx, org, false); err != nil {
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
			ids, err = e.q.PurgeSelectByAgent(ctx, sqlc.PurgeSelectByAgentParams{OrgID: org, AgentID: &scope.Agent, After: after, MaxRows: purgeBatch})
		default:
			ids, err = e.q.PurgeSelectAll(ctx, sqlc.PurgeSelectAllParams{OrgID: org, After: after, MaxRows: purgeBatch})
		}
		if err != nil {
			return rep, data.MapErr(err, "")
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		if dryRun {
			err = e.countBatch(ctx, org, ids, rep)
		} else {
			var batch domain.PurgeReport
			err = e.data.RetryTx(ctx, func(tx pgx.Tx) error {
				batch = domain.PurgeReport{}
				return e.purgeBatch(ctx, tx, org, ids, !scope.All, &batch)
			})
			if err == nil {
				rep.Add(&batch)
			}
		}
		if err != nil {
			return rep, data.MapErr(err, "")
		}
		if o.Progress != nil {
			o.Progress(*rep)
		}
	}
	if scope.All && !dryRun {
		if _, err := e.resetOrgIndex(ctx, org, true); err != nil {
			return rep, err
		}
	}
	if !dryRun {
		// The erased entries' tags are keys of the org counters (package
		// maintenance): fold the purge's deltas now, which deletes the
		// counters that fell to zero, rather than at the worker's next
		// upkeep.
		if _, err := maintenance.CompactCounts(ctx, e.data, 0); err != nil {
			return rep, fmt.Errorf("entries erased; folding the org counters (the worker's upkeep will): %w", err)
		}
	}
	n, err := e.purgeIdempotenceKeys(ctx, org, scope, rep, dryRun)
	rep.IdempotenceKeys = n
	if err != nil {
		return rep, fmt.Errorf("entries erased; idempotence keys (they expire within 60 s): %w", err)
	}
	return rep, nil
}

// purgeUploads deletes (or, in a dry run, counts) the uploads in scope.
func (e *Erasure) purgeUploads(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, dryRun bool) (int64, error) {
	switch {
	case scope.Entry != uuid.Nil:
		return 0, nil
	case dryRun:
		var agent *uuid.UUID
		if scope.Agent != uuid.Nil {
			agent = &scope.Agent
		}
		c, err := e.q.CountUploads(ctx, sqlc.CountUploadsParams{OrgID: org, AgentID: agent})
		return c.Uploads, err
	case scope.Agent != uuid.Nil:
		return e.q.PurgeUploadsByAgent(ctx, sqlc.PurgeUploadsByAgentParams{OrgID: org, AgentID: scope.Agent})
	default:
		return e.q.PurgeUploadsAll(ctx, org)
	}
}

// resetOrgIndex empties the org's whole lexical index (postings, term
// statistics, statistics row, queue) when the whole org goes: one
// statement per table instead of re-analysing every entry. Before the
// batches (requeue false) the queue goes too, so no indexer picks the
// org's entries up meanwhile. After them (requeue true) every entry left,
// stored while the purge ran, is queued again: what the indexer wrote
// meanwhile for entries a later batch erased is gone with the rest, and the
// indexer rebuilds the index of the rows left. Held under the statistics
// row's lock, as the indexer's batches, so none runs in between. It
// returns how many entries it queued.
func (e *Erasure) resetOrgIndex(ctx context.Context, org uuid.UUID, requeue bool) (int64, error) {
	var queued int64
	err := e.data.RetryTx(ctx, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if _, err := q.LockSearchStats(ctx, sqlc.LockSearchStatsParams{OrgID: org, DefaultConfig: e.textSearchConfig}); err != nil {
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
		if err := q.PurgeOrgIndex(ctx, org); err != nil {
			return err
		}
		if !requeue {
			return nil
		}
		var err error
		queued, err = q.QueueOrgEntries(ctx, org)
		return err
	})
	return queued, data.MapErr(err, "")
}

// purgeBatch erases ids (at most purgeBatch) in tx.
func (e *Erasure) purgeBatch(ctx context.Context, tx pgx.Tx, org uuid.UUID, ids []uuid.UUID, unindex bool, rep *domain.PurgeReport) error {
	q := sqlc.New(tx)
	rows, err := e.lockForErase(ctx, q, org, ids, unindex)
	if err != nil || len(rows) == 0 {
		return err
	}
	return e.eraseLocked(ctx, tx, org, rows, unindex, rep)
}

// lockForErase takes what erasing entries of org needs, in the order
// every writer of chains and of the index takes them: the org's
// supersession lock (as Supersede), the index statistics row (as the
// indexer, when unindex), then the entries of ids in id order, which it
// returns (those that exist).
func (e *Erasure) lockForErase(ctx context.Context, q *sqlc.Queries, org uuid.UUID, ids []uuid.UUID, unindex bool) ([]sqlc.PurgeLockEntriesRow, error) {
	if err := q.LockOrgSupersessions(ctx, org.String()); err != nil {
		return nil, err
	}
	if unindex {
		if _, err := q.LockSearchStats(ctx, sqlc.LockSearchStatsParams{OrgID: org, DefaultConfig: e.textSearchConfig}); err != nil {
			return nil, err
		}
	}
	return q.PurgeLockEntries(ctx, sqlc.PurgeLockEntriesParams{OrgID: org, Ids: ids})
}

// eraseLocked erases the entries lockForErase locked in tx (rows, not
// empty).
func (e *Erasure) eraseLocked(ctx context.Context, tx pgx.Tx, org uuid.UUID, rows []sqlc.PurgeLockEntriesRow, unindex bool, rep *domain.PurgeReport) error {
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
	rel, err := q.PurgeDeleteRelations(ctx, sqlc.PurgeDeleteRelationsParams{OrgID: org, Ids: ids})
	if err != nil {
		return err
	}
	rep.Relations += rel.Total
	rep.OpenRelations += rel.Open
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
	if err := deleteDocumentRows(ctx, q, org, ids); err != nil {
		return err
	}
	if _, err := q.DeleteUploadReceipts(ctx, sqlc.DeleteUploadReceiptsParams{OrgID: org, Ids: ids}); err != nil {
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
func (e *Erasure) countBatch(ctx context.Context, org uuid.UUID, ids []uuid.UUID, rep *domain.PurgeReport) error {
	rows, err := e.q.PurgeLockEntries(ctx, sqlc.PurgeLockEntriesParams{OrgID: org, Ids: ids})
	if err != nil || len(rows) == 0 {
		return err
	}
	ids, gone, heads := chainsOf(rows, ids[:0])
	plan, err := planRelink(ctx, e.q, org, heads, gone)
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
	c, err := e.q.PurgeCountLinks(ctx, sqlc.PurgeCountLinksParams{OrgID: org, Ids: ids})
	if err != nil {
		return err
	}
	rep.TaskLinks += c.Links
	rep.SupersessionEdges += c.Edges
	rel, err := e.q.PurgeCountRelations(ctx, sqlc.PurgeCountRelationsParams{OrgID: org, Ids: ids})
	if err != nil {
		return err
	}
	rep.Relations += rel
	p, err := e.q.PurgeCountPostings(ctx, sqlc.PurgeCountPostingsParams{OrgID: org, Ids: ids})
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
// agent, and any whose recorded answer names an erased entry, as the entry
// made or in its similar list (which holds titles). The keys live 60 s; a
// SCAN of the org's prefix is small. A store that records its answer after
// the scan may still name an erased entry for up to 60 s; a replay never
// answers it (the store's replayable).
func (e *Erasure) purgeIdempotenceKeys(ctx context.Context, org uuid.UUID, scope domain.PurgeScope, rep *domain.PurgeReport, dryRun bool) (int64, error) {
	if e.redis == nil {
		return 0, nil
	}
	erased := make(map[uuid.UUID]bool, len(rep.IDs))
	for _, id := range rep.IDs {
		erased[id] = true
	}
	prefix := idem.Prefix(org, uuid.Nil)
	agentPrefix := ""
	if scope.Agent != uuid.Nil {
		agentPrefix = idem.Prefix(org, scope.Agent)
	}
	var n int64
	err := rediskit.ScanKeys(ctx, e.redis, prefix+"*", func(ctx context.Context, c redis.Cmdable, key string) error {
		del := scope.All || (agentPrefix != "" && strings.HasPrefix(key, agentPrefix))
		if !del {
			v, err := c.Get(ctx, key).Bytes()
			if err != nil {
				return nil // expired meanwhile
			}
			var rec idem.Record
			if json.Unmarshal(v, &rec) == nil && rec.Names(erased) {
				del = true
			}
		}
		if !del {
			return nil
		}
		n++
		if !dryRun {
			return c.Del(ctx, key).Err()
		}
		return nil
	})
	return n, err
}

// deleteDocumentRows deletes, in an erasure of ids (forget, purge), the
// document rows that name them: tokens, section rows (of the erased
// sections, and of the erased documents' sections, which are plain
// entries from then on), document marks; in the foreign keys' order.
func deleteDocumentRows(ctx context.Context, q *sqlc.Queries, org uuid.UUID, ids []uuid.UUID) error {
	if _, err := q.DeleteDocumentTokens(ctx, sqlc.DeleteDocumentTokensParams{OrgID: org, Ids: ids}); err != nil {
		return err
	}
	if _, err := q.DeleteSectionRows(ctx, sqlc.DeleteSectionRowsParams{OrgID: org, Ids: ids}); err != nil {
		return err
	}
	if _, err := q.DeleteDocumentsSectionRows(ctx, sqlc.DeleteDocumentsSectionRowsParams{OrgID: org, Ids: ids}); err != nil {
		return err
	}
	_, err := q.DeleteDocumentMarks(ctx, sqlc.DeleteDocumentMarksParams{OrgID: org, Ids: ids})
	return err
}
