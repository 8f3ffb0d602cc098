package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// gatedStore holds every read until the gate opens, and counts them.
type gatedStore struct {
	store.Store
	gate    chan struct{}
	queries atomic.Int32
	started chan struct{}
}

func (g *gatedStore) GetResource(ctx context.Context, id int64) (*store.Resource, error) {
	g.queries.Add(1)
	g.started <- struct{}{}
	<-g.gate
	return g.Store.GetResource(ctx, id)
}

func (g *gatedStore) ListResources(ctx context.Context, f store.ResourceFilter) ([]*store.Resource, error) {
	g.queries.Add(1)
	g.started <- struct{}{}
	<-g.gate
	return g.Store.ListResources(ctx, f)
}

// TestLoaderBatches checks that requests queued while the loader's query
// slots are busy are answered together, each with its own row, and that a
// missing id is ErrNotFound for that request alone.
func TestLoaderBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 60 {
		r, err := st.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1",
			Name: fmt.Sprintf("w-%d", i), Spec: json.RawMessage(`{}`), SpecHash: fmt.Sprint(i)}, store.SourceRef{Name: "api"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	g := &gatedStore{Store: st, gate: make(chan struct{}), started: make(chan struct{}, 100)}
	l := newLoader(g)
	l.maxBatches = 2

	type answer struct {
		id   int64
		name string
		err  error
	}
	answers := make(chan answer, 100)
	var wg gosync.WaitGroup
	get := func(id int64) {
		wg.Go(func() {
			r, err := l.get(ctx, id)
			a := answer{id: id, err: err}
			if r != nil {
				a.name = r.Name
			}
			answers <- a
		})
	}
	// Two requests take both slots and block in the store.
	get(ids[0])
	get(ids[1])
	for range 2 {
		select {
		case <-g.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the first queries did not start")
		}
	}
	// The rest queue up, with a missing id among them.
	for _, id := range ids[2:] {
		get(id)
	}
	get(999999)
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		queued := len(l.pending)
		l.mu.Unlock()
		if queued == len(ids)-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", queued, len(ids)-1)
		}
		<-tick.C
	}
	close(g.gate)
	wg.Wait()
	close(answers)
	for a := range answers {
		switch {
		case a.id == 999999:
			if !errors.Is(a.err, store.ErrNotFound) {
				t.Errorf("missing id: %v", a.err)
			}
		case a.err != nil:
			t.Errorf("id %d: %v", a.id, a.err)
		case a.name != fmt.Sprintf("w-%d", a.id-ids[0]):
			t.Errorf("id %d answered with %s", a.id, a.name)
		}
	}
	if q := g.queries.Load(); q != 3 {
		t.Errorf("%d queries for %d requests, want 3 (two alone, then the queue in one)", q, len(ids)+1)
	}
	// Idle again: the next request has a query of its own, not a stale answer.
	if err := st.DeleteResource(ctx, ids[5]); err != nil {
		t.Fatal(err)
	}
	go func() { <-g.started }()
	if _, err := l.get(ctx, ids[5]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after deletion: %v, want ErrNotFound", err)
	}
}

// TestLoaderReadLimit checks that the loader's queries, not its requests,
// take the read limit's slots: a crowd of requests behind the only slot is
// answered in one more query, none refused; a batch that gets no slot in
// time is refused whole, and so is a request beyond the queue's bound.
func TestLoaderReadLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 40 {
		r, err := st.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1",
			Name: fmt.Sprintf("w-%d", i), Spec: json.RawMessage(`{}`), SpecHash: fmt.Sprint(i)}, store.SourceRef{Name: "api"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	g := &gatedStore{Store: st, gate: make(chan struct{}), started: make(chan struct{}, 100)}
	l := newLoader(g)
	l.maxBatches = 1
	l.limit = newReadLimiter(1, nil)
	l.limit.wait = 10 * time.Second // long enough never to run out here

	errs := make(chan error, len(ids))
	var wg gosync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			_, err := l.get(ctx, id)
			errs <- err
		})
		if i == 0 {
			select {
			case <-g.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the first query did not start")
			}
			if n := len(l.limit.slots); n != 1 {
				t.Fatalf("%d slots taken by a running query, want 1", n)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		queued := len(l.pending)
		l.mu.Unlock()
		if queued == len(ids)-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", queued, len(ids)-1)
		}
		<-tick.C
	}
	close(g.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a request behind the slot: %v", err)
		}
	}
	if q := g.queries.Load(); q != 2 {
		t.Errorf("%d queries, want 2", q)
	}
	if n := len(l.limit.slots); n != 0 {
		t.Errorf("%d slots still taken", n)
	}

	// The slot taken elsewhere beyond the wait: the batch is refused.
	l.limit.wait = 20 * time.Millisecond
	l.limit.slots <- struct{}{}
	if _, err := l.get(ctx, ids[0]); !errors.Is(err, errTooManyReads) {
		t.Errorf("with no slot free: %v, want errTooManyReads", err)
	}
	<-l.limit.slots
	l.maxPending = 0
	if _, err := l.get(ctx, ids[0]); !errors.Is(err, errTooManyReads) {
		t.Errorf("beyond the queue: %v, want errTooManyReads", err)
	}
}
