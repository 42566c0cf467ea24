package entries

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// The duplicate check finished after the store's answer. A store that did
// not wait for the provider (store.go) records the check by meaning as
// owed (knowledge_similar_checks, pending); the embeddings worker, once it
// has written the entry's vector, hands it here: the check by words and by
// that vector against the org's (the store's check, same statements and
// thresholds, now seeing the entries stored since), whose listing is
// recorded (knowledge_similar) and the check marked done. get_knowledge
// shows it (get.go). A check that fails stays pending; the worker's sweep
// (PendingSimilarChecks) comes back to it.

// finishBudget bounds each statement of a check the worker finishes: no
// agent waits for it, but a hung database must not hold a batch.
const finishBudget = 5 * time.Second

// FinishSimilarChecks finishes the pending duplicate checks of jobs, whose
// vectors are of the Search's own model (the worker's), and returns how
// many it recorded. A job whose check is not pending (none owed, done
// already, its entry gone, or held by another transaction) records
// nothing. The errors of the jobs that failed are returned together; the
// others are recorded all the same.
func (s *Entries) FinishSimilarChecks(ctx context.Context, jobs []domain.SimilarCheckJob) (int, error) {
	jobs, err := s.owing(ctx, jobs)
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, j := range jobs {
		ok, err := s.finishOne(data.AsOrg(ctx, j.OrgID), j)
		if err != nil {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("duplicate check of %s: %w", j.EntryID, err))
			continue
		}
		if ok {
			done++
		}
	}
	return done, errors.Join(errs...)
}

// owing keeps the jobs whose check is pending: one look-up per org (on a
// Citus cluster, each on the org's worker), so that a batch of entries
// owing nothing costs no check.
func (s *Entries) owing(ctx context.Context, jobs []domain.SimilarCheckJob) ([]domain.SimilarCheckJob, error) {
	byOrg := map[uuid.UUID][]uuid.UUID{}
	var orgs []uuid.UUID
	for _, j := range jobs {
		if _, ok := byOrg[j.OrgID]; !ok {
			orgs = append(orgs, j.OrgID)
		}
		byOrg[j.OrgID] = append(byOrg[j.OrgID], j.EntryID)
	}
	pending := map[[2]uuid.UUID]bool{}
	for _, org := range orgs {
		ids, err := s.q.PendingSimilarAmong(data.AsOrg(ctx, org), sqlc.PendingSimilarAmongParams{OrgID: org, Ids: byOrg[org]})
		if err != nil {
			return nil, fmt.Errorf("pending duplicate checks: %w", err)
		}
		for _, id := range ids {
			pending[[2]uuid.UUID{org, id}] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(jobs), func(j domain.SimilarCheckJob) bool { return !pending[[2]uuid.UUID{j.OrgID, j.EntryID}] }), nil
}

// finishOne runs and records one job's check; ok says it recorded it.
func (s *Entries) finishOne(ctx context.Context, j domain.SimilarCheckJob) (ok bool, err error) {
	if len(j.Vector) != s.opts.Search.Embedder().Dimensions() {
		return false, fmt.Errorf("a %d-dimensional vector for the %d dimensions of %q", len(j.Vector), s.opts.Search.Embedder().Dimensions(), s.opts.Search.Embedder().Model())
	}
	wctx, cancel := context.WithTimeout(ctx, finishBudget)
	byWords, err := s.similarWith(wctx, j.OrgID, j.Title, j.Body, simkeys.WordsOf(j.OrgID, j.Title, j.Body), nil)
	cancel()
	if err != nil {
		return false, fmt.Errorf("by words: %w", err)
	}
	mctx, cancel := context.WithTimeout(ctx, finishBudget)
	byMeaning, err := similarByVector(mctx, s.opts.Search, j.OrgID, j.Vector)
	cancel()
	if err != nil {
		return false, fmt.Errorf("by meaning: %w", err)
	}
	list := slices.DeleteFunc(mergeSimilar(byWords, byMeaning), func(x domain.Similar) bool { return x.ID == j.EntryID })
	if len(list) > MaxSimilar {
		list = list[:MaxSimilar]
	}
	return s.recordSimilar(ctx, j.OrgID, j.EntryID, list)
}

// recordSimilar marks entry id's pending check done with list, in one
// transaction that waits for no row lock (queries/similar.sql); ok false:
// nothing was pending to record.
func (s *Entries) recordSimilar(ctx context.Context, org, id uuid.UUID, list []domain.Similar) (ok bool, err error) {
	ids := make([]uuid.UUID, len(list))
	scores := make([]float32, len(list))
	for i, x := range list {
		ids[i], scores[i] = x.ID, float32(x.Score)
	}
	now := s.opts.Now()
	rctx, cancel := context.WithTimeout(ctx, finishBudget)
	defer cancel()
	err = pgx.BeginFunc(rctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		n, err := q.ClaimSimilarCheck(rctx, sqlc.ClaimSimilarCheckParams{OrgID: org, EntryID: id, CheckedAt: &now})
		if err != nil || n == 0 {
			return err
		}
		ok = true
		if len(ids) == 0 {
			return nil
		}
		_, err = q.InsertSimilar(rctx, sqlc.InsertSimilarParams{OrgID: org, EntryID: id, SimilarIds: ids, Scores: scores})
		return err
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// PendingSimilarChecks returns, across orgs, up to max checks still
// pending that were owed before before, of entries whose vector of the
// Search's model is written, oldest first, with that vector: the worker's
// sweep of the checks its handler could not finish.
func (s *Entries) PendingSimilarChecks(ctx context.Context, before time.Time, max int) ([]domain.SimilarCheckJob, error) {
	rows, err := s.q.PendingSimilarChecks(ctx, sqlc.PendingSimilarChecksParams{
		Before: before, Model: s.opts.Search.Embedder().Model(), MaxRows: int32(max),
	})
	if err != nil {
		return nil, err
	}
	out := make([]domain.SimilarCheckJob, 0, len(rows))
	for _, r := range rows {
		if r.Embedding == nil {
			continue // cannot be while ready; nothing to compare
		}
		out = append(out, domain.SimilarCheckJob{OrgID: r.OrgID, EntryID: r.EntryID, Title: r.Title, Body: r.Body, Vector: r.Embedding.Slice()})
	}
	return out, nil
}
