package appenv

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCMinHeapDefaultsAndDefersToGOGC(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want int64
	}{
		{nil, 64 << 20},
		{[]string{"GC_MIN_HEAP_MIB", "256"}, 256 << 20},
		{[]string{"GC_MIN_HEAP_MIB", "0"}, 0},
		{[]string{"GOGC", "200"}, 0},
		{[]string{"GOGC", "200", "GC_MIN_HEAP_MIB", "256"}, 0},
	} {
		e := New(env(c.env...))
		if got := e.GCMinHeap(DefaultGCMinHeapMiB); got != c.want || e.Err() != nil {
			t.Errorf("%v: GCMinHeap = %d, %v; want %d", c.env, got, e.Err(), c.want)
		}
	}
	e := New(env("GC_MIN_HEAP_MIB", "-1"))
	e.GCMinHeap(DefaultGCMinHeapMiB)
	if e.Err() == nil {
		t.Fatal("a negative GC_MIN_HEAP_MIB was accepted")
	}
}

func TestGCPercentPutsTheGoalAtTheFloor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		min  int64
		want int
	}{
		{4 * mib, 64 * mib, 1500},  // 4 MiB * 16 = 64 MiB
		{0, 64 * mib, 2500},        // before the first GC: 1 MiB assumed, capped
		{32 * mib, 64 * mib, 100},  // half the floor: the default
		{500 * mib, 64 * mib, 100}, // past the floor: the default
		{16 * mib, 64 * mib, 300},
	} {
		if got := gcPercentFor(c.live, c.min); got != c.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.min/mib, got, c.want)
		}
	}
}

func TestMemoryLimitMakesTheFloorACeiling(t *testing.T) {
	const mib = 1 << 20
	const none = math.MaxInt64 // no GOMEMLIMIT
	for _, c := range []struct {
		live       uint64
		min, found int64
		want       int64
	}{
		{4 * mib, 64 * mib, none, 64 * mib},     // raised percent: the floor is the limit
		{4 * mib, 64 * mib, 48 * mib, 48 * mib}, // a lower GOMEMLIMIT stands
		{32 * mib, 64 * mib, none, none},        // default percent: the operator's limit
		{500 * mib, 64 * mib, 1 << 30, 1 << 30},
	} {
		if got := memoryLimitFor(c.live, c.min, c.found); got != c.want {
			t.Errorf("memoryLimitFor(%d MiB, %d MiB, %d) = %d, want %d", c.live/mib, c.min/mib, c.found, got, c.want)
		}
	}
}

// percent reads the collector's percent (SetGCPercent answers the old one).
func percent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestPaceGCRaisesThePercentForASmallHeapAndRestoresIt(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	ctx, cancel := context.WithCancel(context.Background())
	runtime.GC()
	PaceGC(ctx, 1<<30) // far above this test's live heap
	if p := percent(); p <= 100 {
		t.Fatalf("percent %d with a 1 GiB floor and a small heap", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 1<<30 {
		t.Fatalf("memory limit %d with a 1 GiB floor and a small heap, want the floor", l)
	}
	// A second pacer while one runs does nothing: the first one's end
	// restores the default, whatever the second asked.
	other, stop := context.WithCancel(context.Background())
	defer stop()
	PaceGC(other, 1)
	time.Sleep(3 * gcPaceEvery)
	if p := percent(); p <= 100 {
		t.Fatalf("percent %d: a second PaceGC changed the first one's pace", p)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for percent() != 100 || pacing.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("percent %d after ctx ended, want 100 restored", percent())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("memory limit %d after ctx ended, want none restored", l)
	}

	// A floor below the live heap leaves the default alone.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	runtime.GC()
	PaceGC(ctx, 1) // below any live heap
	if p := percent(); p != 100 {
		t.Fatalf("percent %d with a floor below the live heap, want 100", p)
	}
	PaceGC(ctx, 0)
	if p := percent(); p != 100 {
		t.Fatalf("percent %d after PaceGC(0), want untouched", p)
	}
}
