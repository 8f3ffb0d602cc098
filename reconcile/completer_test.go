package reconcile

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// gatedStore holds the first write of completions until gate is closed,
// and records the size of every batch written.
type gatedStore struct {
	store.Store
	entered chan struct{}
	gate    chan struct{}
	once    gosync.Once

	mu      gosync.Mutex
	batches []int
}

func (g *gatedStore) CompleteReconciles(ctx context.Context, batch []store.ClaimCompletion) []store.CompletionResult {
	g.once.Do(func() {
		close(g.entered)
		<-g.gate
	})
	g.mu.Lock()
	g.batches = append(g.batches, len(batch))
	g.mu.Unlock()
	return g.Store.CompleteReconciles(ctx, batch)
}

// TestCompleterBatches checks that completions handed in while a write is
// in flight are written together in the next one, that each worker gets
// its own result, and that one whose lease was taken over is refused alone.
func TestCompleterBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	if err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	src := store.SourceRef{Name: "infra", Path: "w.yaml"}
	res := func(name string) *manifest.Resource {
		return &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: name, SpecHash: "sha256:0"}
	}
	if _, _, err := pg.ApplyResource(ctx, res("stale"), src); err != nil {
		t.Fatal(err)
	}
	stale, err := pg.ClaimResources(ctx, store.ClaimParams{Owner: "crashed", Limit: 1, Duration: 20 * time.Millisecond})
	if err != nil || len(stale) != 1 {
		t.Fatalf("claim: %v, %v", stale, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		taken, err := pg.ClaimResources(ctx, store.ClaimParams{Owner: "successor", Limit: 1, Duration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(taken) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired lease was not taken over")
		}
		<-time.After(10 * time.Millisecond)
	}
	const n = 6
	for i := range n {
		if _, _, err := pg.ApplyResource(ctx, res(fmt.Sprintf("w%d", i)), src); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := pg.ClaimResources(ctx, store.ClaimParams{Owner: "agent", Limit: n, Duration: time.Minute})
	if err != nil || len(claims) != n {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}

	st := &gatedStore{Store: pg, entered: make(chan struct{}), gate: make(chan struct{})}
	cp := newCompleter(st, 8, true)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		cp.run(ctx)
	}()
	ready := func(c *store.Claim) store.Completion {
		at := time.Now().UTC()
		return store.Completion{
			Status: store.StatusUpdate{Phase: manifest.PhaseReady, ObservedGeneration: c.Generation, LastReconcileTime: &at,
				Conditions: []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionTrue, Reason: ReasonSucceeded, LastTransitionTime: at}}},
			Record: &store.ReconcileRecord{ResourceID: c.ID, Kind: c.Kind, Name: c.Name, Generation: c.Generation,
				Trigger: store.TriggerCreate, Phase: stageCompleted, Success: true, AgentID: c.Lease.Owner, StartedAt: at, FinishedAt: at},
		}
	}
	type result struct {
		cl  *store.Claim
		res store.CompletionResult
	}
	results := make(chan result, n+1)
	hand := func(c *store.Claim) {
		go func() { results <- result{c, cp.complete(c, ready(c), func() {})} }()
	}
	// The first is written alone, at once; it is held in the store while
	// the others come in.
	hand(claims[0])
	<-st.entered
	for _, c := range append(claims[1:], stale[0]) {
		hand(c)
	}
	for len(cp.in) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d completions waiting, want %d", len(cp.in), n)
		}
		<-time.After(time.Millisecond)
	}
	close(st.gate)
	for range n + 1 {
		r := <-results
		switch {
		case r.cl == stale[0]:
			if !errors.Is(r.res.Err, store.ErrLeaseLost) {
				t.Errorf("taken-over completion: %v, want ErrLeaseLost", r.res.Err)
			}
		case r.res.Err != nil:
			t.Errorf("completion of %s: %v", r.cl.Name, r.res.Err)
		default:
			// Workers read only the error: the row is read from the store.
			if got, err := st.GetResource(t.Context(), r.cl.ID); err != nil || got.Phase != manifest.PhaseReady || got.LeaseOwner != "" {
				t.Errorf("completion of %s: the row is %+v (%v), want it ready and free", r.cl.Name, got, err)
			}
		}
	}
	cp.close()
	<-exited
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.batches) != 2 || st.batches[0] != 1 || st.batches[1] != n {
		t.Errorf("writes of %v completions, want one alone and then the %d that came meanwhile together", st.batches, n)
	}
}
