package storetest

import (
	"encoding/json"
	"fmt"
	"sort"
	gosync "sync"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

func testApplyResourceConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	base := resource("a", `{"size":0}`)
	if _, _, err := s.ApplyResource(ctx, base, src); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var (
		wg    gosync.WaitGroup
		start = make(chan struct{})
		gens  = make([]int64, n)
		errs  = make([]error, n)
		outs  = make([]store.ApplyOutcome, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			got, outcome, err := s.ApplyResource(ctx, withSpec(base, fmt.Sprintf(`{"size":%d}`, i+1)), src)
			errs[i], outs[i] = err, outcome
			if err == nil {
				gens[i] = got.Generation
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("apply %d: %v", i, errs[i])
		}
		if outs[i] != store.Updated {
			t.Errorf("apply %d: outcome %q, want updated", i, outs[i])
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	for i, g := range gens {
		if g != int64(i+2) {
			t.Fatalf("returned generations %v, want each of 2..%d exactly once", gens, n+1)
		}
	}
	got, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != n+1 {
		t.Errorf("final generation = %d, want %d", got.Generation, n+1)
	}
}

func testApplyResourceConcurrentCreate(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/new.yaml")
	r := resource("new", `{"size":1}`)
	const n = 10
	var (
		wg    gosync.WaitGroup
		mu    gosync.Mutex
		start = make(chan struct{})
		count = map[store.ApplyOutcome]int{}
		ids   = map[int64]bool{}
	)
	for range n {
		wg.Go(func() {
			<-start
			got, outcome, err := s.ApplyResource(ctx, r, src)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("ApplyResource: %v", err)
				return
			}
			count[outcome]++
			ids[got.ID] = true
			if got.Generation != 1 {
				t.Errorf("generation = %d, want 1", got.Generation)
			}
		})
	}
	close(start)
	wg.Wait()
	if count[store.Created] != 1 || count[store.Unchanged] != n-1 || len(ids) != 1 {
		t.Errorf("outcomes %v over IDs %v, want 1 created and %d unchanged of one resource", count, ids, n-1)
	}
}

func testStatusAndApplyConcurrently(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	base := resource("a", `{"round":0}`)
	created, _, err := s.ApplyResource(ctx, base, src)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 15
	for round := 1; round <= rounds; round++ {
		var (
			wg       gosync.WaitGroup
			start    = make(chan struct{})
			applyErr error
			statErr  error
		)
		spec := fmt.Sprintf(`{"round":%d}`, round)
		msg := fmt.Sprintf("round %d", round)
		wg.Go(func() {
			<-start
			_, _, applyErr = s.ApplyResource(ctx, withSpec(base, spec), src)
		})
		wg.Go(func() {
			<-start
			_, statErr = s.SetResourceStatus(ctx, created.ID, store.StatusUpdate{
				Phase: manifest.PhaseReady, Message: msg, ObservedGeneration: int64(round),
				Outputs: json.RawMessage(fmt.Sprintf(`{"round":%d}`, round)),
			})
		})
		close(start)
		wg.Wait()
		if applyErr != nil || statErr != nil {
			t.Fatalf("round %d: apply: %v, status: %v", round, applyErr, statErr)
		}
		got, err := s.GetResource(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != int64(round+1) || string(got.Spec) != spec {
			t.Fatalf("round %d: generation %d spec %s, want %d %s: the status write lost the apply",
				round, got.Generation, got.Spec, round+1, spec)
		}
		// Outputs stand for every status column an apply leaves alone (a new
		// generation does reset the retry count and schedule, and makes the
		// resource pending, by design): the status is the status write's,
		// or pending when the apply came second.
		statusWon := got.StatusMessage == msg && got.Phase == manifest.PhaseReady
		applyWon := got.StatusMessage == store.PendingMessage(int64(round+1)) && got.Phase == manifest.PhasePending
		if !statusWon && !applyWon || got.ObservedGeneration != int64(round) || string(got.Outputs) != spec {
			t.Fatalf("round %d: status %q observed %d outputs %s phase %q: the apply lost the status write",
				round, got.StatusMessage, got.ObservedGeneration, got.Outputs, got.Phase)
		}
	}
}
