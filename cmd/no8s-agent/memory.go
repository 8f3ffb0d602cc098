package main

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/no8s/no8s-agent/cmd/no8s-agent/internal/codepages"
)

// The idle trimmer's defaults.
const (
	// trimEvery is how often the trimmer looks at the heap.
	trimEvery = time.Second
	// trimIdleAlloc is the most an idle agent allocates in trimEvery: lease
	// renewals, health checks and the odd read stay well below it, a sync
	// or a reconcile burst far above.
	trimIdleAlloc = 1 << 20
	// trimMinReclaim is how much must have been allocated since the last
	// trim, or be held free by the runtime, before a trim is worth its full
	// collection.
	trimMinReclaim = 16 << 20
)

// heapSample is what the trimmer reads of the runtime.
type heapSample struct {
	allocs  uint64 // bytes allocated since the start
	objects uint64 // bytes in heap objects, live or garbage
	live    uint64 // bytes of live objects at the last collection
	free    uint64 // free heap memory the runtime holds and has not returned
}

var trimMetrics = []string{"/gc/heap/allocs:bytes", "/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes", "/memory/classes/heap/free:bytes"}

func readHeap(s []metrics.Sample) heapSample {
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return heapSample{allocs: v(0), objects: v(1), live: v(2), free: v(3)}
}

// shouldTrim reports whether the agent went idle with memory to hand back:
// it allocated little since the previous sample, and either allocated over
// minReclaim since the last trim (trimmed.allocs), which a collection may
// find garbage by now, or the runtime holds over minReclaim free. The heap's
// objects beyond the live bytes of the last collection would undercount the
// garbage: a collection in the middle of a burst counts what the burst
// still used as live.
func shouldTrim(trimmed, prev, cur heapSample, idleAlloc, minReclaim uint64) bool {
	if cur.allocs-prev.allocs > idleAlloc {
		return false
	}
	return cur.allocs-trimmed.allocs > minReclaim || cur.free > minReclaim
}

// trimWhenIdle hands the memory a burst of work left behind back to the
// system once the agent is idle, until ctx is done. A sync of thousands of
// files, and the reconciles after it, allocate hundreds of megabytes that
// are garbage a moment later; an idle agent allocates too little for the
// collector to run again, and the runtime returns freed memory only slowly,
// so without this the resident size stays near its peak for minutes. A
// trim is two full collections, once per burst; an idle agent's own small
// allocations add up to another only every few minutes, about as often as
// the runtime collects anyway.
//
// Then it also lets go of the pages of the agent's own program that the
// kernel mapped in (see package codepages).
//
// A nudge says that memory was let go of without being allocated anew (the
// API's read model packed what it holds): the next idle look trims, however
// little was allocated since the last trim.
func trimWhenIdle(ctx context.Context, every time.Duration, nudges <-chan struct{}, log *slog.Logger) {
	samples := make([]metrics.Sample, len(trimMetrics))
	for i, name := range trimMetrics {
		samples[i].Name = name
	}
	prev := readHeap(samples)
	// What the process allocated before counts as a burst too.
	var trimmed heapSample
	codeReleased := false
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-nudges:
			trimmed = heapSample{}
			continue
		case <-tick.C:
		}
		cur := readHeap(samples)
		switch {
		case shouldTrim(trimmed, prev, cur, trimIdleAlloc, trimMinReclaim):
			start := time.Now()
			// Two collections: what sync.Pools hold (encoding/json keeps
			// its largest buffers there) is freed only by the second.
			runtime.GC()
			debug.FreeOSMemory()
			// And the program's own pages the burst mapped in, which an
			// idle agent mostly does not run.
			code := releaseCode(log)
			codeReleased = true
			after := readHeap(samples)
			log.Debug("returned idle memory", "before", cur.objects+cur.free, "live", after.live, "code", code, "took", time.Since(start))
			cur, trimmed = after, after
		case !codeReleased && cur.allocs-prev.allocs <= trimIdleAlloc:
			// Idle from the start: the pages the start mapped in go.
			releaseCode(log)
			codeReleased = true
		}
		prev = cur
	}
}

// releaseCode lets go of the program's pages (see package codepages) and
// returns how many bytes of mappings it released.
func releaseCode(log *slog.Logger) uint64 {
	code, err := codepages.Release()
	if err != nil {
		log.Debug("code pages not released", "error", err)
	}
	return code.Bytes
}

// trimNudges carries nudges to trimWhenIdle; a nudge that finds one
// waiting is dropped, as one trim serves both.
type trimNudges chan struct{}

// nudge asks for a trim at the next idle look.
func (n trimNudges) nudge() {
	select {
	case n <- struct{}{}:
	default:
	}
}
