package api

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

// Defaults of the read limiter.
const (
	// readQueueWait is how long a read waits for a slot before it is
	// answered 503: long enough to ride out a burst, short enough that a
	// client retries rather than piles up.
	readQueueWait = 250 * time.Millisecond
	// readRetryAfter is the Retry-After of that 503, in seconds.
	readRetryAfter = 1
)

// poolSizer is a store that says how many database connections it has.
type poolSizer interface {
	MaxConns() int
}

// readLimiter bounds how many API reads run at once, so that readers can
// take neither the database's connections nor the machine's cores from the
// reconciler and the sync. A read beyond the limit waits in a short queue
// for a slot; when the queue is full or the wait runs out it is answered
// 503 with Retry-After.
type readLimiter struct {
	slots      chan struct{}
	waiting    atomic.Int64
	maxWaiting int64
	wait       time.Duration
}

// newReadLimiter allows n reads at once (n < 1: the default, from the
// store's pool and the cores) and queues up to 8n more.
func newReadLimiter(n int, st any) *readLimiter {
	if n < 1 {
		n = defaultConcurrentReads(st)
	}
	return &readLimiter{slots: make(chan struct{}, n), maxWaiting: int64(8 * n), wait: readQueueWait}
}

// defaultConcurrentReads gives API reads a quarter of the store's pool,
// which leaves the rest to the reconciler's workers and the sync, and at
// most one read per two cores: each read keeps a core busy between the
// database's backend and the JSON encoding, and the reconciler needs the
// others. An embedded store, with no pool, gets the cores' share alone.
func defaultConcurrentReads(st any) int {
	n := max(1, runtime.NumCPU()/2)
	if p, ok := st.(poolSizer); ok {
		n = min(n, max(1, p.MaxConns()/4))
	}
	return n
}

// errTooManyReads is a read refused by the limit (503 with Retry-After).
var errTooManyReads = errorf(http.StatusServiceUnavailable,
	"too many reads at once: the agent keeps the database for reconciling; retry in %d s", readRetryAfter)

// limit runs h within the limit.
func (s *Server) limit(h http.Handler) http.Handler {
	l := s.reads
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.acquire(r.Context()) {
			s.refuseRead(w, r)
			return
		}
		defer l.release()
		h.ServeHTTP(w, r)
	})
}

// refuseRead answers a read the limit refused.
func (s *Server) refuseRead(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", strconv.Itoa(readRetryAfter))
	s.writeError(w, r, errTooManyReads, nil)
}

// acquire takes a slot, waiting in the queue when none is free; false when
// the queue is full, the wait ran out or ctx is done. A true must be
// followed by release.
func (l *readLimiter) acquire(ctx context.Context) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		return l.queue(ctx)
	}
}

func (l *readLimiter) release() { <-l.slots }

// queue waits for a slot; false when the queue is full, the wait ran out
// or ctx is done.
func (l *readLimiter) queue(ctx context.Context) bool {
	if l.waiting.Add(1) > l.maxWaiting {
		l.waiting.Add(-1)
		return false
	}
	defer l.waiting.Add(-1)
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}
