package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// PruneArchived deletes the org's archived embedding tasks that no longer
// say anything: every job of the task names an entry that is gone or has
// been re-requested since (a newer generation, as `ctl reembed` makes). It
// returns how many tasks it deleted.
//
// Why: a batch archived after its retries leaves its entries failed; once a
// re-embed revives them, the archived batch still sits in the dashboard's
// Archived tab looking like an open failure, and "run" on it would do nothing
// (its jobs are stale). An archived task with at least one current job is
// kept: it is the evidence of a failure nobody has acted on yet. Tasks that
// hold jobs of another org are never touched (batches are per org, so there
// are none unless payloads were made by hand), and undecodable payloads are
// left for the operator.
func PruneArchived(ctx context.Context, pool *pgxpool.Pool, insp *asynq.Inspector, orgID uuid.UUID) (int, error) {
	type cand struct {
		id   string
		jobs []knowledge.EmbeddingJob
	}
	var cands []cand
	// Collect first, delete after: deleting while paging would shift pages.
	for page := 1; ; page++ {
		tasks, err := insp.ListArchivedTasks(Queue, asynq.Page(page), asynq.PageSize(500))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("list archived tasks: %w", err)
		}
	tasks:
		for _, t := range tasks {
			js, err := decodeJobs(asynq.NewTask(t.Type, t.Payload))
			if err != nil || len(js) == 0 {
				continue
			}
			for _, j := range js {
				if j.OrgID != orgID {
					continue tasks
				}
			}
			cands = append(cands, cand{id: t.ID, jobs: js})
		}
		if len(tasks) < 500 {
			break
		}
	}
	outbox := knowledge.NewOutbox(pool)
	deleted := 0
	for _, c := range cands {
		current, err := outbox.Current(ctx, c.jobs)
		if err != nil {
			return deleted, fmt.Errorf("read entries of task %s: %w", c.id, err)
		}
		if len(current) > 0 {
			continue
		}
		if err := insp.DeleteTask(Queue, c.id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return deleted, fmt.Errorf("delete archived task %s: %w", c.id, err)
		}
		deleted++
	}
	return deleted, nil
}
