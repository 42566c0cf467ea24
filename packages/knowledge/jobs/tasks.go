package jobs

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Queue is the asynq queue of the pipeline.
const Queue = "embeddings"

// Task types.
const (
	// TypeEmbedEntry asks for the vector of one entry at one generation. It
	// is enqueued into a group and normally never handled by itself: the
	// aggregator folds it into a TypeEmbedBatch.
	TypeEmbedEntry = "knowledge:embed_entry"
	// TypeEmbedBatch is a batch of entry jobs: one provider call.
	TypeEmbedBatch = "knowledge:embed_batch"
)

// EntryPayload is the payload of TypeEmbedEntry.
type EntryPayload = knowledge.EmbeddingJob

// BatchPayload is the payload of TypeEmbedBatch.
type BatchPayload struct {
	Jobs []knowledge.EmbeddingJob `json:"jobs"`
}

// DefaultShards is how many groups the entries of one org are spread over.
// asynq aggregates at most one batch per group per check (every grace period,
// at most every 7 s), so the groups bound the throughput: shards x batch size
// per check. Spreading by entry id keeps batches full under load without
// letting one org's flood starve another org's groups.
const DefaultShards = 8

// TaskID is the asynq task id of an entry job: equal jobs collapse into one
// task while it waits in its group. The entry id comes first because
// asynqmon's stock page shortens ids to their text before the first "-":
// with the org first, every waiting task of an org showed the same
// "embed:<org prefix>" (apps/dashboard shows them whole).
func TaskID(job knowledge.EmbeddingJob) string {
	return fmt.Sprintf("embed:%s:%d:%s", job.EntryID, job.Generation, job.OrgID)
}

// GroupKey is the aggregation group of an entry: its org and a shard of its id.
func GroupKey(orgID, entryID uuid.UUID, shards int) string {
	if shards < 1 {
		shards = 1
	}
	return fmt.Sprintf("%s:%d", orgID, int(entryID[15])%shards)
}

// NewEmbedEntryTask returns the task for one entry job, bound to the
// embeddings queue, its TaskID and its group.
func NewEmbedEntryTask(job knowledge.EmbeddingJob, shards int) (*asynq.Task, error) {
	return newEmbedEntryTask(job, shards, nil)
}

// newEmbedEntryTask is NewEmbedEntryTask with headers (the trace context of
// the enqueuing call, trace.go).
func newEmbedEntryTask(job knowledge.EmbeddingJob, shards int, headers map[string]string) (*asynq.Task, error) {
	if job.OrgID == uuid.Nil || job.EntryID == uuid.Nil || job.Generation < 1 {
		return nil, fmt.Errorf("embedding job %+v: org, entry and a positive generation are required", job)
	}
	b, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	return asynq.NewTaskWithHeaders(TypeEmbedEntry, b, headers,
		asynq.Queue(Queue), asynq.TaskID(TaskID(job)), asynq.Group(GroupKey(job.OrgID, job.EntryID, shards))), nil
}

// BatchOptions are the asynq options of aggregated batch tasks (they do not
// inherit the options of the entry tasks they fold).
type BatchOptions struct {
	MaxRetry  int           // default 8
	Timeout   time.Duration // default 2m
	Retention time.Duration // completed batches stay visible this long; default 1h
}

func (o BatchOptions) withDefaults() BatchOptions {
	if o.MaxRetry == 0 {
		o.MaxRetry = 8
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Retention == 0 {
		o.Retention = time.Hour
	}
	return o
}

// NewEmbedBatchTask returns a batch task. Its id is random: a batch is
// identified by its contents only for as long as its entries are pending.
func NewEmbedBatchTask(jobs []knowledge.EmbeddingJob, o BatchOptions) (*asynq.Task, error) {
	return newEmbedBatchTask(jobs, o, nil)
}

// newEmbedBatchTask is NewEmbedBatchTask with headers (the trace contexts
// of its entries' enqueuing calls, trace.go).
func newEmbedBatchTask(jobs []knowledge.EmbeddingJob, o BatchOptions, headers map[string]string) (*asynq.Task, error) {
	o = o.withDefaults()
	b, err := json.Marshal(BatchPayload{Jobs: jobs})
	if err != nil {
		return nil, err
	}
	return asynq.NewTaskWithHeaders(TypeEmbedBatch, b, headers, asynq.Queue(Queue), asynq.MaxRetry(o.MaxRetry),
		asynq.Timeout(o.Timeout), asynq.Retention(o.Retention)), nil
}

// NewAggregator returns the GroupAggregator of the worker: the entry tasks of
// a group become one batch task, exact duplicates dropped.
func NewAggregator(o BatchOptions) asynq.GroupAggregator {
	return asynq.GroupAggregatorFunc(func(group string, tasks []*asynq.Task) *asynq.Task {
		seen := make(map[knowledge.EmbeddingJob]bool, len(tasks))
		jobs := make([]knowledge.EmbeddingJob, 0, len(tasks))
		for _, t := range tasks {
			var j knowledge.EmbeddingJob
			if json.Unmarshal(t.Payload(), &j) != nil || seen[j] {
				// A bad payload cannot be embedded; its entry stays pending
				// and the reconciler makes a good task for it.
				continue
			}
			seen[j] = true
			jobs = append(jobs, j)
		}
		// Marshalling a slice of plain structs cannot fail; a nil task would
		// leave the set to be reclaimed and retried forever.
		task, _ := newEmbedBatchTask(jobs, o, batchHeaders(tasks))
		return task
	})
}

func decodeJobs(t *asynq.Task) ([]knowledge.EmbeddingJob, error) {
	switch t.Type() {
	case TypeEmbedEntry:
		var j knowledge.EmbeddingJob
		if err := json.Unmarshal(t.Payload(), &j); err != nil {
			return nil, fmt.Errorf("entry payload: %w", err)
		}
		return []knowledge.EmbeddingJob{j}, nil
	case TypeEmbedBatch:
		var p BatchPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return nil, fmt.Errorf("batch payload: %w", err)
		}
		return p.Jobs, nil
	}
	return nil, fmt.Errorf("unknown task type %q", t.Type())
}
