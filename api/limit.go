package api

import (
	"bytes"
	"context"
	"log/slog"
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

// limit runs h within the limit. h writes its answer into memory, and the
// slot is given back as soon as h returns, before the answer goes out: a
// client that asks for a large page and reads it slowly, or never, holds
// nothing that other reads need. The answer then has ResponseWriteTimeout
// to reach the client, after which the connection is closed.
func (s *Server) limit(h http.Handler) http.Handler {
	l := s.reads
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.acquire(r.Context()) {
			s.refuseRead(w, r)
			return
		}
		answer := &bufferedAnswer{header: w.Header()}
		func() {
			defer l.release()
			h.ServeHTTP(answer, r)
		}()
		answer.send(w, s.opts.ResponseWriteTimeout)
	})
}

// bufferedAnswer is a response held in memory until its handler is done.
// Its header is the real response's: nothing is sent before send.
type bufferedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *bufferedAnswer) Header() http.Header { return a.header }

func (a *bufferedAnswer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *bufferedAnswer) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(p)
}

// send writes the answer to w within timeout.
func (a *bufferedAnswer) send(w http.ResponseWriter, timeout time.Duration) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.header.Get("Content-Length") == "" {
		a.header.Set("Content-Length", strconv.Itoa(a.body.Len()))
	}
	// The deadline covers the write alone; a server without one (a test's
	// recorder) has none to set.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout))
	w.WriteHeader(a.status)
	if _, err := w.Write(a.body.Bytes()); err != nil {
		slog.Debug("writing a read's answer failed", "error", err)
	}
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

// writeDeadline gives the answer to a read ResponseWriteTimeout to reach
// the client, from when it starts to go out, after which the connection is
// closed: a client that asks for a large page and never reads it holds a
// goroutine and a connection for no longer. Event streams keep their own
// deadlines.
func (s *Server) writeDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, timeout: s.opts.ResponseWriteTimeout}, r)
	})
}

// deadlineWriter sets the connection's write deadline as the answer's
// status goes out.
type deadlineWriter struct {
	http.ResponseWriter
	timeout time.Duration
	started bool
}

func (w *deadlineWriter) start() {
	if !w.started {
		w.started = true
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
