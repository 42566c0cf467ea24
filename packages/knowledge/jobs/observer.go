package jobs

import (
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Observer receives the pipeline's events; the worker app turns them into
// Prometheus metrics. Methods must be cheap and safe for concurrent use.
type Observer interface {
	// TaskDone and TaskFailed count handled tasks by type.
	TaskDone(taskType string)
	TaskFailed(taskType string, err error)
	// Batch reports the entries one provider call embedded (stale jobs excluded).
	Batch(size int)
	// ProviderCall reports the latency of one Embedder.Embed call.
	ProviderCall(d time.Duration, err error)
	// EntryReady reports the time from the embedding request (the store, or
	// the re-embed) to the vector being written.
	EntryReady(lag time.Duration)
	// EntryFailed counts entries marked failed.
	EntryFailed()
	// JobsStale counts jobs that found their entry gone or moved on.
	JobsStale(n int)
	// Requeued counts entries the reconciler enqueued again.
	Requeued(n int)
	// Indexed reports one indexer pass: the entries it moved into the
	// lexical index (also when it failed part way), how long it took, and
	// its error (nil when it succeeded or was cut short by shutdown).
	Indexed(n int, d time.Duration, err error)
	// Upkeep reports one upkeep pass: the tables it vacuumed and analyzed,
	// how long it took, and its error (nil as for Indexed).
	Upkeep(rep knowledge.UpkeepReport, d time.Duration, err error)
	// SwitchPass reports one backfill pass of a model switch (switch.go).
	SwitchPass(rep knowledge.BackfillReport, err error)
	// SimilarChecked reports duplicate checks finished after embedding
	// (by the handler or the sweep): how many were recorded, and the
	// error of those that failed (they stay pending).
	SimilarChecked(n int, err error)
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) TaskDone(string)                                     {}
func (NopObserver) SwitchPass(knowledge.BackfillReport, error)          {}
func (NopObserver) TaskFailed(string, error)                            {}
func (NopObserver) Batch(int)                                           {}
func (NopObserver) ProviderCall(time.Duration, error)                   {}
func (NopObserver) EntryReady(time.Duration)                            {}
func (NopObserver) EntryFailed()                                        {}
func (NopObserver) JobsStale(int)                                       {}
func (NopObserver) Requeued(int)                                        {}
func (NopObserver) Indexed(int, time.Duration, error)                   {}
func (NopObserver) Upkeep(knowledge.UpkeepReport, time.Duration, error) {}
func (NopObserver) SimilarChecked(int, error)                           {}
