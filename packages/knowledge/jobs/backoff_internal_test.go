package jobs

import (
	"context"
	"testing"
	"time"
)

// The indexer's loop waits longer and longer while its passes find
// nothing, up to the idle wait, and comes back to the base wait when a
// pass finds work or when it is woken.
func TestBackingOffWaitsLongerWhileIdleAndWakes(t *testing.T) {
	t.Parallel()
	const base, idle = 10 * time.Millisecond, 400 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := make(chan time.Time)
	found := make(chan bool, 1)
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		backingOff(ctx, base, idle, time.Second, wake, func(context.Context) bool {
			calls <- time.Now()
			select {
			case f := <-found:
				return f
			default:
				return false
			}
		})
	}()
	next := func() time.Time {
		t.Helper()
		select {
		case at := <-calls:
			return at
		case <-time.After(5 * time.Second):
			t.Fatal("no call within 5s")
			return time.Time{}
		}
	}
	// Empty calls at 0, 10, 30, 70, 150, 310 ms: the waits double.
	for range 6 {
		next()
	}
	// The wait is now 320 ms; a wake brings the next call at once.
	start := time.Now()
	wake <- struct{}{}
	if gap := next().Sub(start); gap > 150*time.Millisecond {
		t.Fatalf("woken, the next call came after %v, want about %v", gap, base)
	}
	// Idle again: the waits grow again from the base...
	for range 5 {
		next()
	}
	// ...and a call that found work brings the next one at the base wait.
	found <- true
	next()
	start = time.Now()
	if gap := next().Sub(start); gap > 150*time.Millisecond {
		t.Fatalf("after a call that found work the next came after %v, want about %v", gap, base)
	}
	// Without either the wait stays long: at least the idle wait's half.
	for range 6 {
		next()
	}
	start = time.Now()
	if gap := next().Sub(start); gap < idle/2 {
		t.Fatalf("idle, the next call came after %v, want about %v", gap, idle)
	}
	cancel()
	<-done
}

// The idle wait's setting: unset, ten times the interval; set below the
// interval, the interval itself (no back-off), never the default.
func TestIndexIdleIntervalDefaultsAndFloor(t *testing.T) {
	for _, c := range []struct {
		interval, idle, want time.Duration
	}{
		{0, 0, 5 * time.Second},
		{time.Second, 0, 10 * time.Second},
		{time.Second, 100 * time.Millisecond, time.Second},
		{time.Second, time.Second, time.Second},
		{time.Second, 3 * time.Second, 3 * time.Second},
	} {
		o := WorkerOptions{IndexInterval: c.interval, IndexIdleInterval: c.idle}.withDefaults()
		if o.IndexIdleInterval != c.want {
			t.Errorf("IndexInterval %v, IndexIdleInterval %v: got %v, want %v", c.interval, c.idle, o.IndexIdleInterval, c.want)
		}
	}
}
