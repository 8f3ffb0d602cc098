// Package priority lets the agent's own work go before the reads of its
// API. The reconciler and the syncer count the work they have in flight;
// while there is any, reads are paced so that, however many clients send
// them and however fast, they take a bounded share of the machine and the
// work is not slowed by more than that share. Reads wait their turn; they
// are never refused for it. With no work in flight reads are not paced.
package priority

import (
	"context"
	gosync "sync"
	"sync/atomic"
	"time"
)

// Linger is how long work counts as in flight after the last piece of it
// ended: a reconciler between two claims, or a sync between its steps, is
// still at work, and reads let through in such a gap would take the share
// the pacing keeps for it.
const Linger = 100 * time.Millisecond

// Work counts the agent's own work in flight. The zero value is ready to
// use, and a nil *Work is never busy.
type Work struct {
	n atomic.Int64
	// ended is when the last piece of work ended, in Unix nanoseconds.
	ended atomic.Int64
}

// Begin records one piece of work in flight; the returned function ends
// it, once however often it is called.
func (w *Work) Begin() (end func()) {
	if w == nil {
		return func() {}
	}
	w.n.Add(1)
	var once gosync.Once
	return func() {
		once.Do(func() {
			w.ended.Store(time.Now().UnixNano())
			w.n.Add(-1)
		})
	}
}

// Busy reports whether any work is in flight at now, or ended less than
// Linger before it.
func (w *Work) Busy(now time.Time) bool {
	if w == nil {
		return false
	}
	return w.n.Load() > 0 || now.UnixNano()-w.ended.Load() < int64(Linger)
}

// Pacer admits reads at a bounded rate while work is in flight.
type Pacer struct {
	work *Work
	// interval is the time one unit of cost takes from the budget.
	interval time.Duration

	mu gosync.Mutex
	// next is when the next read may go, while work is in flight.
	next time.Time
}

// NewPacer returns a Pacer that, while work is in flight, admits reads
// worth perSecond units of cost per second. A perSecond of zero or less,
// or a nil work, paces nothing.
func NewPacer(work *Work, perSecond float64) *Pacer {
	p := &Pacer{work: work}
	if perSecond > 0 && work != nil {
		p.interval = time.Duration(float64(time.Second) / perSecond)
	}
	return p
}

// Wait returns when a read of the given cost may go: at once when no work
// is in flight, else at its turn, in the order reads arrived. Its error is
// ctx's, when ctx ends first. A cost of one is a read of one resource.
func (p *Pacer) Wait(ctx context.Context, cost float64) error {
	if p == nil || p.interval == 0 {
		return nil
	}
	now := time.Now()
	if !p.work.Busy(now) {
		return nil
	}
	p.mu.Lock()
	at := p.next
	if at.Before(now) {
		// No debt is carried out of a quiet time.
		at = now
	}
	p.next = at.Add(time.Duration(cost * float64(p.interval)))
	p.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
