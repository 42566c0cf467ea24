package appenv

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"time"
)

// Garbage collector variables. GOGC and GOMEMLIMIT are the Go runtime's
// own; GC_MIN_HEAP_MIB is ours.
const (
	EnvGOGC      = "GOGC"
	EnvGCMinHeap = "GC_MIN_HEAP_MIB"
	// DefaultGCMinHeapMiB is GC_MIN_HEAP_MIB's default for the apps that
	// serve calls (apps/mcp).
	DefaultGCMinHeapMiB = 64
)

// GCMinHeap is the heap size, in bytes, below which the app's garbage
// collector should not run (GC_MIN_HEAP_MIB, from 0 to 65,536 MiB, def
// when unset), for PaceGC; 0 when GC_MIN_HEAP_MIB is 0 or when GOGC is set,
// since an operator who sets GOGC has chosen the pace.
func (e *Env) GCMinHeap(def int) int64 {
	mib := e.Int(EnvGCMinHeap, def, 0, 1<<16)
	if strings.TrimSpace(e.getenv(EnvGOGC)) != "" {
		return 0
	}
	return int64(mib) << 20
}

// maxGCPercent bounds what PaceGC sets: the heap goal is live * (1 +
// percent/100), so a live heap that grows between two checks (one
// gcPaceEvery) can at most multiply by this much before the next check
// brings the goal back to minHeap.
const (
	maxGCPercent = 2500
	gcPaceEvery  = 100 * time.Millisecond
)

// PaceGC keeps the garbage collector's heap goal at about minHeap bytes
// while the live heap is smaller than half of it (the percent raised, and
// a soft memory limit of minHeap: memoryLimitFor), and leaves the Go
// default (GOGC=100, the operator's GOMEMLIMIT) above that, until ctx
// ends; then it restores the percent and the limit it found. minHeap <= 0: it does nothing. The collector is the
// process's: while one PaceGC paces it, another call does nothing (tests
// run several servers in one process).
//
// Why: a server's live heap is a few MiB (apps/mcp: about 3), and with the
// default the collector runs each time the heap doubles, so every 4-7 MiB
// allocated: about every MCP call, since the go-sdk's JSON decoder takes a
// 32 KiB buffer for each of the ten or so values it decodes per message. On
// two cores a search then nearly always overlaps a collection (1,129 in an
// 11 s run) and loses about a millisecond to it. Raising GOGC instead would
// multiply a large live heap (a full query vector cache, a burst of large
// calls) as much as a small one; a floor costs at most minHeap and nothing
// once the live heap is past it. This is what a heap "ballast" did, done
// with the runtime's own knob (docs/benchmarks.md, "MCP end to end").
func PaceGC(ctx context.Context, minHeap int64) {
	if minHeap <= 0 || !pacing.CompareAndSwap(false, true) {
		return
	}
	found := debug.SetGCPercent(100)
	debug.SetGCPercent(found)
	if found < 0 {
		pacing.Store(false)
		return // GOGC=off: the collector does not run on its own pace at all
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	cur := found
	foundLimit := debug.SetMemoryLimit(-1)
	curLimit := foundLimit
	pace := func() {
		metrics.Read(sample)
		live := sample[0].Value.Uint64()
		if p := gcPercentFor(live, minHeap); p != cur {
			debug.SetGCPercent(p)
			cur = p
		}
		if l := memoryLimitFor(live, minHeap, foundLimit); l != curLimit {
			debug.SetMemoryLimit(l)
			curLimit = l
		}
	}
	pace()
	go func() {
		t := time.NewTicker(gcPaceEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				debug.SetGCPercent(found)
				debug.SetMemoryLimit(foundLimit)
				pacing.Store(false)
				return
			case <-t.C:
				pace()
			}
		}
	}()
}

// memoryLimitFor is the soft memory limit that goes with gcPercentFor:
// while the percent is raised, the limit is minHeap and a quarter (the Go
// runtime's memory besides the heap: stacks, metadata) unless the
// operator's GOMEMLIMIT (found) is lower; otherwise found. The percent
// alone puts the goal at minHeap for the live heap of the last check, and
// a live heap that grows before the next (a request of a few MiB decoded
// in several copies, while the collector marks) multiplies the goal by as
// much: parts of 1 MiB of a document upload took the server's peak memory
// 87 MiB up instead of 36 (docs/benchmarks.md, "Documents in parts").
// The limit makes the floor a ceiling too.
func memoryLimitFor(live uint64, minHeap, found int64) int64 {
	if gcPercentFor(live, minHeap) <= 100 {
		return found
	}
	return min(found, minHeap)
}

// pacing is set while a PaceGC paces the collector.
var pacing atomic.Bool

// gcPercentFor is the GOGC that puts the heap goal of a live heap of live
// bytes at minHeap: live * (1 + p/100) = minHeap, from 100 (the default)
// to maxGCPercent. Before the first collection the runtime reports no live
// heap; a live heap of 1 MiB is assumed then.
func gcPercentFor(live uint64, minHeap int64) int {
	l := max(int64(live), 1<<20)
	if minHeap <= 2*l {
		return 100
	}
	return int(min(100*(minHeap-l)/l, maxGCPercent))
}
