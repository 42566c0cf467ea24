package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// PurgeTasks deletes the embedding tasks of org whose every job matches
// erased (an entry a purge erased), in every state a task can be deleted
// from: waiting in a group, pending, scheduled, retry, archived, completed.
// It returns how many it deleted and how many it kept because they also
// hold jobs of entries that were not erased (a batch of one org mixing
// erased and surviving entries); those jobs find their entry gone and do
// nothing, and the tasks hold only ids, never content. Active tasks are left
// to finish the same way.
//
// Tasks are found by payload, so it reads the queue once per state; the
// queue of one deployment is small (pending work plus an hour of completed
// batches and the archive).
func PurgeTasks(ctx context.Context, insp *asynq.Inspector, org uuid.UUID, erased func(knowledge.EmbeddingJob) bool) (deleted, kept int, err error) {
	type lister func(opts ...asynq.ListOption) ([]*asynq.TaskInfo, error)
	listers := map[string]lister{
		"pending":   func(o ...asynq.ListOption) ([]*asynq.TaskInfo, error) { return insp.ListPendingTasks(Queue, o...) },
		"scheduled": func(o ...asynq.ListOption) ([]*asynq.TaskInfo, error) { return insp.ListScheduledTasks(Queue, o...) },
		"retry":     func(o ...asynq.ListOption) ([]*asynq.TaskInfo, error) { return insp.ListRetryTasks(Queue, o...) },
		"archived":  func(o ...asynq.ListOption) ([]*asynq.TaskInfo, error) { return insp.ListArchivedTasks(Queue, o...) },
		"completed": func(o ...asynq.ListOption) ([]*asynq.TaskInfo, error) { return insp.ListCompletedTasks(Queue, o...) },
	}
	groups, err := insp.Groups(Queue)
	if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
		return 0, 0, fmt.Errorf("list groups: %w", err)
	}
	for _, g := range groups {
		if !strings.HasPrefix(g.Group, org.String()+":") {
			continue // another org's group
		}
		name := g.Group
		listers["group "+name] = func(o ...asynq.ListOption) ([]*asynq.TaskInfo, error) {
			return insp.ListAggregatingTasks(Queue, name, o...)
		}
	}
	const size = 500
	for state, list := range listers {
		var ids []string
		for page := 1; ; page++ {
			if err := ctx.Err(); err != nil {
				return deleted, kept, err
			}
			tasks, err := list(asynq.Page(page), asynq.PageSize(size))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				break
			}
			if err != nil {
				return deleted, kept, fmt.Errorf("list %s tasks: %w", state, err)
			}
			for _, t := range tasks {
				js, err := decodeJobs(asynq.NewTask(t.Type, t.Payload))
				if err != nil || len(js) == 0 {
					continue
				}
				match, other := 0, 0
				for _, j := range js {
					switch {
					case j.OrgID != org:
						other++
					case erased(j):
						match++
					default:
						other++
					}
				}
				switch {
				case match == len(js):
					ids = append(ids, t.ID)
				case match > 0:
					kept++
				}
			}
			if len(tasks) < size {
				break
			}
		}
		for _, id := range ids {
			if err := insp.DeleteTask(Queue, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
				return deleted, kept, fmt.Errorf("delete %s task %s: %w", state, id, err)
			}
			deleted++
		}
	}
	return deleted, kept, nil
}
