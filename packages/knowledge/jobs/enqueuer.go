package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Enqueuer puts embedding jobs on the embeddings queue. It implements
// knowledge.Enqueuer.
type Enqueuer struct {
	client *asynq.Client
	shards int
}

// NewEnqueuer returns an Enqueuer on client that spreads each org's entries
// over DefaultShards groups.
func NewEnqueuer(client *asynq.Client) *Enqueuer {
	return &Enqueuer{client: client, shards: DefaultShards}
}

// WithShards returns a copy of e spreading each org's entries over n groups
// (n >= 1): fewer groups make fuller batches at low load, more groups raise
// the ceiling of n x batch size entries per aggregation check.
func (e *Enqueuer) WithShards(n int) *Enqueuer {
	return &Enqueuer{client: e.client, shards: max(n, 1)}
}

// EnqueueEmbedding implements knowledge.Enqueuer. A TaskID conflict means the
// same entry generation already waits in its group: that is success.
func (e *Enqueuer) EnqueueEmbedding(ctx context.Context, job knowledge.EmbeddingJob) (err error) {
	ctx, span, headers := startSend(ctx, Queue, TypeEmbedEntry)
	defer func() { endSpan(span, err) }()
	task, err := newEmbedEntryTask(job, e.shards, headers)
	if err != nil {
		return err
	}
	_, err = e.client.EnqueueContext(ctx, task)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue embedding of %s: %w", job.EntryID, err)
	}
	return nil
}

// requeueResult says what the reconciler's enqueue did.
type requeueResult int

const (
	requeued      requeueResult = iota // a new task is waiting
	alreadyQueued                      // the same job already waits in its group
	coolingDown                        // re-enqueued recently; its batch may be retrying
)

// requeue is the reconciler's enqueue. Two things differ from the store's:
//
//   - A uniqueness lock of cooldown per entry generation: after aggregation
//     the entry task is gone (only the batch task lives on, retrying with
//     backoff while a provider is down), so the TaskID alone would let every
//     reconciler pass add one more batch for the same entries. With the lock
//     an entry is re-enqueued at most once per cooldown.
//   - A TaskID conflict with a finished task (completed with a retention, or
//     archived) must not block a needed re-enqueue: the entry is pending, so
//     that task did not do the work. It is deleted and the job enqueued again.
//     Entry tasks normally never reach those states (aggregation deletes
//     them), but an entry task handled on its own can.
func (e *Enqueuer) requeue(ctx context.Context, insp *asynq.Inspector, job knowledge.EmbeddingJob, cooldown time.Duration) (requeueResult, error) {
	task, err := NewEmbedEntryTask(job, e.shards)
	if err != nil {
		return 0, err
	}
	_, err = e.client.EnqueueContext(ctx, task, asynq.Unique(cooldown))
	switch {
	case err == nil:
		return requeued, nil
	case errors.Is(err, asynq.ErrDuplicateTask):
		return coolingDown, nil
	case !errors.Is(err, asynq.ErrTaskIDConflict):
		return 0, err
	}
	info, err := insp.GetTaskInfo(Queue, TaskID(job))
	if errors.Is(err, asynq.ErrTaskNotFound) {
		// Finished between the two calls; enqueue again below.
	} else if err != nil {
		return 0, err
	} else if info.State != asynq.TaskStateCompleted && info.State != asynq.TaskStateArchived {
		return alreadyQueued, nil
	} else if err := insp.DeleteTask(Queue, info.ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return 0, fmt.Errorf("delete finished task %s: %w", info.ID, err)
	}
	// We hold the uniqueness lock already, so enqueue without it.
	if _, err := e.client.EnqueueContext(ctx, task); err != nil {
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return alreadyQueued, nil
		}
		return 0, err
	}
	return requeued, nil
}
