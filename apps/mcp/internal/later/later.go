// Package later runs the work of a call that its caller need not wait for
// (its audit record, metrics and log line, the embeddings queue's
// hand-over of a stored entry) after the call has answered, on a few
// goroutines of its own, without ever dropping any of it:
//
//   - Run hands a task to a bounded queue and returns at once;
//   - when the queue is full (its workers are behind: the database or
//     Redis is slow), the task runs in the caller instead, which then
//     answers later: backpressure, not loss;
//   - Close stops taking tasks (later ones run in their caller) and waits
//     for every queued one, until its context ends; the server closes it
//     on shutdown (SIGTERM, stdin closed) before its audit writer.
//
// Each task bounds its own waits (the audit writer's, the queue's
// hand-over's deadlines). What an abrupt end (SIGKILL, power loss) loses is
// what is queued: the tasks of calls answered in the last moments, at most
// the queue's size.
package later

import (
	"context"
	"sync"
)

// DefaultSize is the queue's size: tasks waiting at most.
const DefaultSize = 4096

// Queue runs tasks after their calls answered. Safe for concurrent use; a
// nil Queue runs every task in its caller.
type Queue struct {
	ch chan func()

	mu     sync.Mutex // closed, n, empty, and Run's send against Close's
	closed bool
	n      int           // queued tasks not yet run
	empty  chan struct{} // closed when n reaches 0 (Flush's wait)
	done   chan struct{} // the workers have returned
}

// New returns a queue of size tasks (DefaultSize when <= 0) served by
// workers goroutines (at least 1).
func New(size, workers int) *Queue {
	if size <= 0 {
		size = DefaultSize
	}
	q := &Queue{ch: make(chan func(), size), done: make(chan struct{})}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for f := range q.ch {
				f()
				q.finished()
			}
		})
	}
	go func() {
		wg.Wait()
		close(q.done)
	}()
	return q
}

func (q *Queue) finished() {
	q.mu.Lock()
	q.n--
	if q.n == 0 && q.empty != nil {
		close(q.empty)
		q.empty = nil
	}
	q.mu.Unlock()
}

// Run runs f after the caller's answer: queued, or at once in the caller
// when the queue is full or closed.
func (q *Queue) Run(f func()) {
	if q == nil {
		f()
		return
	}
	q.mu.Lock()
	if !q.closed {
		select {
		case q.ch <- f:
			q.n++
			q.mu.Unlock()
			return
		default:
		}
	}
	q.mu.Unlock()
	f()
}

// Flush waits until every task queued before it has run, or ctx ends: a
// scrape of the metrics, or a test, sees the calls answered before it.
// Under a steady stream of new tasks it returns when ctx ends.
func (q *Queue) Flush(ctx context.Context) {
	if q == nil {
		return
	}
	for {
		q.mu.Lock()
		if q.n == 0 {
			q.mu.Unlock()
			return
		}
		if q.empty == nil {
			q.empty = make(chan struct{})
		}
		empty := q.empty
		q.mu.Unlock()
		select {
		case <-empty:
		case <-ctx.Done():
			return
		}
	}
}

// Close stops taking tasks and waits for the queued ones to run, until ctx
// ends; it reports whether they all ran.
func (q *Queue) Close(ctx context.Context) bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		return true
	case <-ctx.Done():
		return false
	}
}
