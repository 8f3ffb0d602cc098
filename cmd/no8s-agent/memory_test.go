package main

import (
	"context"
	"log/slog"
	"runtime/metrics"
	"testing"
	"time"
)

func TestShouldTrim(t *testing.T) {
	t.Parallel()
	const mb = 1 << 20
	tests := []struct {
		name               string
		trimmed, prev, cur heapSample
		want               bool
	}{
		{"idle after a burst", heapSample{allocs: 10 * mb}, heapSample{allocs: 100 * mb}, heapSample{allocs: 100 * mb}, true},
		{"idle with free memory", heapSample{allocs: 99 * mb}, heapSample{allocs: 100 * mb}, heapSample{allocs: 100*mb + 1000, free: 30 * mb}, true},
		{"busy", heapSample{allocs: 10 * mb}, heapSample{allocs: 100 * mb}, heapSample{allocs: 150 * mb, free: 30 * mb}, false},
		{"idle, little since the last trim", heapSample{allocs: 95 * mb}, heapSample{allocs: 100 * mb}, heapSample{allocs: 100 * mb, free: 5 * mb}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := shouldTrim(tt.trimmed, tt.prev, tt.cur, mb, 16*mb); got != tt.want {
				t.Errorf("shouldTrim(%+v, %+v, %+v) = %v, want %v", tt.trimmed, tt.prev, tt.cur, got, tt.want)
			}
		})
	}
}

// garbage keeps the burst reachable until the test drops it.
var garbage [][]byte

// TestTrimWhenIdle checks that the memory a burst leaves behind is handed
// back once the process is idle. It is not parallel: other tests'
// allocations would run the collector and hide whether the trim did.
func TestTrimWhenIdle(t *testing.T) {
	samples := make([]metrics.Sample, len(trimMetrics))
	for i, name := range trimMetrics {
		samples[i].Name = name
	}
	for range 64 {
		garbage = append(garbage, make([]byte, 1<<20))
	}
	garbage = nil
	held := func() uint64 { s := readHeap(samples); return s.objects + s.free }
	before := held()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimWhenIdle(ctx, 20*time.Millisecond, nil, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for held() > before-48<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("heap objects and free memory still %d MB, %d MB before: not handed back", held()>>20, before>>20)
		}
		<-tick.C
	}
}
