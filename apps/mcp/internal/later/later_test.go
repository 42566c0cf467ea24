package later

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Tasks run after Run returns; a full queue runs a task in its caller
// instead of dropping it; Flush waits for what was queued; Close runs
// every queued task and then runs later ones in their callers.
func TestQueueNeverDropsATask(t *testing.T) {
	q := New(2, 1)
	release := make(chan struct{})
	var ran atomic.Int64
	started := make(chan struct{})
	q.Run(func() { close(started); <-release; ran.Add(1) }) // holds the one worker
	<-started
	q.Run(func() { ran.Add(1) })
	q.Run(func() { ran.Add(1) })
	if ran.Load() != 0 {
		t.Fatal("a queued task ran in its caller")
	}
	inline := false
	q.Run(func() { inline = true; ran.Add(1) }) // the queue is full
	if !inline {
		t.Fatal("a task beyond the queue's size did not run in its caller")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	q.Flush(ctx) // the held task keeps the queue from emptying: ctx ends it
	cancel()
	if ran.Load() != 1 {
		t.Fatalf("%d tasks ran while the worker was held", ran.Load())
	}
	close(release)
	q.Flush(context.Background())
	if ran.Load() != 4 {
		t.Fatalf("after Flush %d of 4 tasks ran", ran.Load())
	}
	q.Run(func() { time.Sleep(10 * time.Millisecond); ran.Add(1) })
	if !q.Close(context.Background()) || ran.Load() != 5 {
		t.Fatalf("Close returned before the queued task ran (%d)", ran.Load())
	}
	after := false
	q.Run(func() { after = true })
	if !after {
		t.Fatal("a task after Close did not run in its caller")
	}
	var nilQ *Queue
	ranNil := false
	nilQ.Run(func() { ranNil = true })
	if !ranNil || !nilQ.Close(context.Background()) {
		t.Fatal("a nil queue does not run tasks in their callers")
	}
}
