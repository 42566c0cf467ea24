// Package jobs is the embeddings pipeline on asynq: task types, payloads,
// the enqueuer, the group aggregator that turns entry tasks into batch tasks,
// the handler, the reconciler and the worker that runs them, together with
// the two database loops search depends on: the lexical indexer
// (knowledge.Maintenance.IndexAll) and the table upkeep (knowledge.Maintenance.Upkeep).
//
// The design in one paragraph (docs/embeddings.md has the long form): an
// entry's embedding_status = 'pending' is the outbox. After the store commits,
// an entry task goes onto the "embeddings" queue with a TaskID derived from
// the entry and its generation, in a group; the worker's aggregator folds a
// group into one batch task, which is one provider call. The package writes
// no table itself: it reads and writes entries through knowledge.Outbox (the
// knowledge package is the one writer of its tables), whose every write is
// conditional on the entry still being pending at the job's generation, so
// late, repeated and concurrent jobs are harmless. The reconciler re-enqueues
// entries still pending after a grace period, so an enqueue lost between
// commit and Redis (or a flushed Redis) loses nothing.
package jobs
