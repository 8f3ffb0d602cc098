package api

import (
	"context"
	"fmt"
	"runtime"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// loader reads resources by id for many concurrent requests with few
// queries. A request joins the queue; when fewer than maxBatches queries are
// running, a query is started at once for everything queued, otherwise the
// queue waits for the next free slot and goes in one query. An idle agent
// answers each request with its own query, as before; a busy one pays one
// database round trip per batch instead of one per request, which is what
// keeps the tail short under many clients.
//
// A request is only ever answered by a query that started after it was
// queued, so a read still sees every write committed before it began.
//
// Each query takes a slot of the read limit, when there is one, for the
// whole batch: reads by id are held to the API's share of the database by
// their queries, not one slot per request, so that a crowd of them is
// answered a batch at a time instead of mostly refused. A batch that gets
// no slot is refused whole, as a read beyond the limit is; so is a request
// that finds maxPending already queued.
type loader struct {
	store      store.Store
	limit      *readLimiter
	maxBatches int
	maxSize    int
	maxPending int
	timeout    time.Duration

	mu      gosync.Mutex
	pending []*load
	running int
}

// load is one request waiting for its row.
type load struct {
	id   int64
	row  *store.Resource
	err  error
	done chan struct{}
}

// newLoader runs as many queries at once as there are cores: measured
// with 200 clients on two cores, more concurrent batches of fewer rows
// gave longer tails, not shorter. It queues up to 32 requests per core,
// about what the cores answer in 10 ms (a read by id costs the agent
// 0.15-0.2 ms of CPU, measured with 200 clients): a read it answers stays
// within that, and a crowd beyond it is told to retry, as other reads
// beyond the limit are, rather than all of it waiting ever longer.
func newLoader(st store.Store) *loader {
	return &loader{store: st, maxBatches: max(2, runtime.NumCPU()), maxSize: 200, maxPending: 32 * runtime.NumCPU(),
		timeout: 10 * time.Second}
}

// get returns the resource with id, or an error wrapping store.ErrNotFound.
func (l *loader) get(ctx context.Context, id int64) (*store.Resource, error) {
	ld := &load{id: id, done: make(chan struct{})}
	l.mu.Lock()
	if len(l.pending) >= l.maxPending {
		l.mu.Unlock()
		return nil, errTooManyReads
	}
	l.pending = append(l.pending, ld)
	if l.running < l.maxBatches {
		l.running++
		batch := l.take()
		l.mu.Unlock()
		// The batch runner outlives no work: it stops when the queue is empty.
		go l.run(batch)
	} else {
		l.mu.Unlock()
	}
	select {
	case <-ld.done:
		return ld.row, ld.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// take removes up to maxSize queued requests. l.mu must be held.
func (l *loader) take() []*load {
	n := min(len(l.pending), l.maxSize)
	batch := l.pending[:n:n]
	l.pending = l.pending[n:]
	if len(l.pending) == 0 {
		l.pending = nil
	}
	return batch
}

// run answers batches until the queue is empty.
func (l *loader) run(batch []*load) {
	for {
		l.answer(batch)
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.running--
			l.mu.Unlock()
			return
		}
		batch = l.take()
		l.mu.Unlock()
	}
}

// answer reads one batch in one query. The query is not tied to any one
// request's context: the others in the batch still want the answer.
func (l *loader) answer(batch []*load) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	var (
		rows []*store.Resource
		err  error
	)
	if l.limit != nil && !l.limit.acquire(ctx) {
		err = errTooManyReads
	} else {
		if l.limit != nil {
			defer l.limit.release()
		}
		rows, err = l.query(ctx, batch)
	}
	byID := make(map[int64]*store.Resource, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, ld := range batch {
		switch r := byID[ld.id]; {
		case err != nil:
			ld.err = err
		case r == nil:
			ld.err = fmt.Errorf("resource %d: %w", ld.id, store.ErrNotFound)
		default:
			ld.row = r
		}
		close(ld.done)
	}
}

// query reads the batch's rows: one by its key, more in one list.
func (l *loader) query(ctx context.Context, batch []*load) ([]*store.Resource, error) {
	if len(batch) == 1 {
		r, err := l.store.GetResource(ctx, batch[0].id)
		if err != nil {
			return nil, err
		}
		return []*store.Resource{r}, nil
	}
	ids := make([]int64, len(batch))
	for i, ld := range batch {
		ids[i] = ld.id
	}
	return l.store.ListResources(ctx, store.ResourceFilter{IDs: ids})
}
