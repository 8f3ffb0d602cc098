package priority_test

import (
	"context"
	"errors"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/priority"
)

func TestWorkBusy(t *testing.T) {
	t.Parallel()
	var nilWork *priority.Work
	if nilWork.Busy(time.Now()) {
		t.Fatal("a nil Work is busy")
	}
	nilWork.Begin()() // does nothing, and does not panic

	var w priority.Work
	if w.Busy(time.Now()) {
		t.Fatal("new Work is busy")
	}
	end1, end2 := w.Begin(), w.Begin()
	end1()
	end1() // once only: the other piece is still in flight
	if !w.Busy(time.Now().Add(time.Hour)) {
		t.Fatal("not busy with one piece of work in flight")
	}
	end2()
	ended := time.Now()
	if !w.Busy(ended) {
		t.Fatal("not busy just after the work ended: it lingers")
	}
	if w.Busy(ended.Add(priority.Linger + time.Millisecond)) {
		t.Fatal("still busy once the linger is over")
	}
}

// TestPacerIdle shows that reads are not paced while no work is in flight,
// however many there are.
func TestPacerIdle(t *testing.T) {
	t.Parallel()
	var w priority.Work
	p := priority.NewPacer(&w, 1) // one read a second, were it paced
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	for range 100 {
		if err := p.Wait(ctx, 10); err != nil {
			t.Fatalf("an idle pacer held a read: %v", err)
		}
	}
	for _, p := range []*priority.Pacer{nil, priority.NewPacer(nil, 1), priority.NewPacer(&w, 0), priority.NewPacer(&w, -1)} {
		end := w.Begin()
		if err := p.Wait(ctx, 10); err != nil {
			t.Fatalf("a pacer that paces nothing held a read: %v", err)
		}
		end()
	}
}

// TestPacerWhileBusy shows that while work is in flight reads go at the
// pace, in turn, a costly read taking more of it; none is refused.
func TestPacerWhileBusy(t *testing.T) {
	t.Parallel()
	var w priority.Work
	defer w.Begin()()
	const perSecond = 50 // a turn every 20 ms
	p := priority.NewPacer(&w, perSecond)
	start := time.Now()
	var wg gosync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() { errs <- p.Wait(t.Context(), 1) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a paced read was refused: %v", err)
		}
	}
	// Five turns: the first at once, the last four turns later.
	if took := time.Since(start); took < 4*time.Second/perSecond {
		t.Fatalf("5 reads at %d a second went in %v", perSecond, took)
	}
	// A read of cost 10 holds the next one 10 turns back.
	if err := p.Wait(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := p.Wait(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(before); took < 9*time.Second/perSecond {
		t.Fatalf("the read after a costly one waited only %v", took)
	}
}

// TestPacerGivesUpWithItsRead shows that a read whose client went away
// stops waiting.
func TestPacerGivesUpWithItsRead(t *testing.T) {
	t.Parallel()
	var w priority.Work
	defer w.Begin()()
	p := priority.NewPacer(&w, 0.01) // a turn every 100 s
	if err := p.Wait(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx, 1) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want the read's cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled read still waits")
	}
}
