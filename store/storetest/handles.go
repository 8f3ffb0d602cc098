package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// testHandles checks the attempt handle: recorded under the lease, kept
// through a crash, a lost lease, a hand-back and a new generation, returned
// with the next claim, and cleared by a completion.
func testHandles(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.CreateResource(ctx, resource("a", `{"v":1}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crashed, err := s.ClaimResources(ctx, store.ClaimParams{Owner: "crashed", Limit: 1, Duration: 50 * time.Millisecond})
	if err != nil || len(crashed) != 1 {
		t.Fatalf("claim = %v, %v", crashed, err)
	}
	if crashed[0].Handle != nil {
		t.Fatalf("first claim has handle %+v, want none", crashed[0].Handle)
	}
	for _, bad := range []store.Handle{{Action: "gh", Operation: "apply", Generation: 1}, {Value: "1", Generation: 0}} {
		if err := s.RecordHandle(ctx, crashed[0], bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordHandle(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	first := store.Handle{Value: "run-101", Action: "gh", Operation: "apply", Generation: 1}
	if err := s.RecordHandle(ctx, crashed[0], first); err != nil {
		t.Fatalf("RecordHandle: %v", err)
	}

	// The worker dies; its lease expires and the successor gets the handle.
	var taken []*store.Claim
	waitFor(t, 10*time.Second, "the expired lease to free the resource", func() bool {
		taken = claim(t, s, "successor", 1)
		return len(taken) == 1
	})
	c := taken[0]
	if c.Handle == nil || *c.Handle != first {
		t.Fatalf("successor's claim has handle %+v, want %+v", c.Handle, first)
	}
	// The dead worker can no longer write one.
	if err := s.RecordHandle(ctx, crashed[0], store.Handle{Value: "run-102", Action: "gh", Operation: "apply", Generation: 1}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RecordHandle with the old lease = %v, want ErrLeaseLost", err)
	}
	// Progress leaves it alone; the successor replaces it.
	if err := s.Heartbeat(ctx, c, lease, &store.Progress{Message: "following run-101"}); err != nil {
		t.Fatal(err)
	}
	second := store.Handle{Value: "run-103", Action: "gh", Operation: "apply", Generation: 1}
	if err := s.RecordHandle(ctx, c, second); err != nil {
		t.Fatalf("RecordHandle by the successor: %v", err)
	}

	// Handed back (the agent stopped mid-run): kept for the next attempt,
	// also across a new generation, which is for the action to tell apart.
	release := ready(c, false)
	release.Status = store.StatusUpdate{Phase: c.PriorPhase, ObservedGeneration: 0}
	release.Requeue, release.KeepHandle = true, true
	complete(t, s, c, release)
	if _, _, err := s.ApplyResource(ctx, resource("a", `{"v":2}`), gitSource("infra", "a.yaml")); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, "third", 1)[0]
	if c.Handle == nil || *c.Handle != second || c.Generation != 2 {
		t.Fatalf("claim after a hand-back: generation %d handle %+v, want generation 2 and %+v", c.Generation, c.Handle, second)
	}

	// A completion clears it: the attempt followed its work to the end.
	complete(t, s, c, ready(c, true))
	if _, err := s.RequestReconcile(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, "fourth", 1)[0]
	if c.Handle != nil {
		t.Fatalf("claim after a completion has handle %+v, want none", c.Handle)
	}
	// A completed lease cannot record one; a removed row is not found.
	complete(t, s, c, ready(c, false))
	if err := s.RecordHandle(ctx, c, second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RecordHandle after completion = %v, want ErrLeaseLost", err)
	}
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordHandle(ctx, c, second); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RecordHandle of a deleted resource = %v, want ErrNotFound", err)
	}
}
