package storetest

import (
	"fmt"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// testBatchComplete writes a batch that mixes good completions with one
// whose lease was taken over and one that is invalid: the good ones are
// written with their history, the other two are refused alone.
func testBatchComplete(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "w.yaml")
	if _, _, err := s.ApplyResource(ctx, resource("b0", `{}`), src); err != nil {
		t.Fatal(err)
	}
	// Its lease expires and a successor takes it over.
	stale, err := s.ClaimResources(ctx, store.ClaimParams{Owner: "crashed", Limit: 1, Duration: 50 * time.Millisecond})
	if err != nil || len(stale) != 1 {
		t.Fatalf("claim = %v, %v", stale, err)
	}
	var taken []*store.Claim
	waitFor(t, 10*time.Second, "the expired lease to free the resource", func() bool {
		taken = claim(t, s, "successor", 1)
		return len(taken) == 1
	})
	if taken[0].ID != stale[0].ID {
		t.Fatalf("successor claimed %d, want %d", taken[0].ID, stale[0].ID)
	}
	var rs []*manifest.Resource
	for i := 1; i <= 4; i++ {
		rs = append(rs, resource(fmt.Sprintf("b%d", i), `{}`))
	}
	if _, err := s.ApplyResources(ctx, rs, src); err != nil {
		t.Fatal(err)
	}
	good := claim(t, s, "agent", 4)
	if len(good) != 4 {
		t.Fatalf("claimed %d, want 4", len(good))
	}
	invalid := ready(good[3], true)
	invalid.Status.Phase = "sideways"
	batch := []store.ClaimCompletion{
		{Claim: good[0], Done: ready(good[0], true)},
		{Claim: stale[0], Done: ready(stale[0], true)},
		{Claim: good[1], Done: ready(good[1], true)},
		{Claim: good[3], Done: invalid},
		{Claim: good[2], Done: ready(good[2], true)},
	}
	results := s.CompleteReconciles(ctx, batch)
	if len(results) != len(batch) {
		t.Fatalf("%d results for %d completions", len(results), len(batch))
	}
	wantErr(t, "the taken-over completion", results[1].Err, store.ErrLeaseLost)
	wantErr(t, "the invalid completion", results[3].Err, store.ErrInvalid)
	for _, k := range []int{0, 2, 4} {
		c, res := batch[k].Claim, results[k]
		if res.Err != nil {
			t.Fatalf("completion of %s: %v", c.Name, res.Err)
		}
		// Each gets its own row back, as written.
		if r := res.Resource; r == nil || r.ID != c.ID || r.Phase != manifest.PhaseReady || r.ObservedGeneration != 1 || r.LeaseOwner != "" {
			t.Fatalf("completion of %s returned %+v", c.Name, r)
		}
		if hist, err := s.ListReconcileRecords(ctx, c.ID, 0); err != nil || len(hist) != 1 || hist[0].AgentID != "agent" {
			t.Errorf("history of %s = %+v, %v; want its one record", c.Name, hist, err)
		}
	}
	// The refused ones changed nothing: the successor still holds its
	// resource, the invalid one is still claimed, and neither has history.
	if got := mustGet(t, s, stale[0].ID); got.LeaseOwner != "successor" || got.Phase != manifest.PhaseReconciling {
		t.Errorf("taken-over resource after the batch: owner %q phase %q", got.LeaseOwner, got.Phase)
	}
	if got := mustGet(t, s, good[3].ID); got.LeaseOwner != "agent" || got.Phase != manifest.PhaseReconciling {
		t.Errorf("invalid completion's resource after the batch: owner %q phase %q", got.LeaseOwner, got.Phase)
	}
	for _, id := range []int64{stale[0].ID, good[3].ID} {
		if hist, err := s.ListReconcileRecords(ctx, id, 0); err != nil || len(hist) != 0 {
			t.Errorf("history of refused completion of %d = %d records, %v; want none", id, len(hist), err)
		}
	}
	// The successor's completion goes through, in a batch of its own.
	results = s.CompleteReconciles(ctx, []store.ClaimCompletion{
		{Claim: taken[0], Done: ready(taken[0], true)},
		{Claim: good[3], Done: ready(good[3], true)},
	})
	for _, res := range results {
		if res.Err != nil || res.Resource == nil || res.Resource.Phase != manifest.PhaseReady {
			t.Fatalf("second batch: %+v", res)
		}
	}
	// A lease completed in a batch cannot complete again.
	results = s.CompleteReconciles(ctx, []store.ClaimCompletion{
		{Claim: good[0], Done: ready(good[0], true)},
		{Claim: good[1], Done: ready(good[1], true)},
	})
	for _, res := range results {
		wantErr(t, "completing a completed lease again", res.Err, store.ErrLeaseLost)
	}
}

// testBatchCompleteKeepsChanges checks that a batch treats each claim as
// CompleteReconcile does: a resource that got a new generation while
// claimed stays due and pending, a requeue schedules, a manual request
// made meanwhile survives, and one that stays due is announced.
func testBatchCompleteKeepsChanges(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "w.yaml")
	rs := []*manifest.Resource{resource("changed", `{"v":1}`), resource("requeued", `{}`), resource("requested", `{}`)}
	if _, err := s.ApplyResources(ctx, rs, src); err != nil {
		t.Fatal(err)
	}
	cs := claim(t, s, "agent", 3)
	if len(cs) != 3 {
		t.Fatalf("claimed %d, want 3", len(cs))
	}
	byName := map[string]*store.Claim{}
	for _, c := range cs {
		byName[c.Name] = c
	}
	notes, err := s.Listen(ctx, store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ApplyResource(ctx, withSpec(rs[0], `{"v":2}`), src); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestReconcile(ctx, byName["requested"].ID); err != nil {
		t.Fatal(err)
	}
	// Skip the notifications of the writes above.
	drain := func() {
		for {
			select {
			case <-notes:
			case <-time.After(200 * time.Millisecond):
				return
			}
		}
	}
	drain()
	requeued := ready(byName["requeued"], true)
	requeued.Requeue, requeued.RequeueAfter = true, time.Hour
	results := s.CompleteReconciles(ctx, []store.ClaimCompletion{
		{Claim: byName["changed"], Done: ready(byName["changed"], true)},
		{Claim: byName["requeued"], Done: requeued},
		{Claim: byName["requested"], Done: ready(byName["requested"], true)},
	})
	for i, res := range results {
		if res.Err != nil {
			t.Fatalf("completion %d: %v", i, res.Err)
		}
	}
	changed := results[0].Resource
	if changed.Phase != manifest.PhasePending || changed.Generation != 2 || changed.ObservedGeneration != 1 ||
		changed.StatusMessage != store.PendingMessage(2) || changed.NextReconcileAt != nil {
		t.Errorf("changed while claimed: phase %q generation %d observed %d message %q next %v",
			changed.Phase, changed.Generation, changed.ObservedGeneration, changed.StatusMessage, changed.NextReconcileAt)
	}
	if r := results[1].Resource; r.NextReconcileAt == nil || time.Until(*r.NextReconcileAt) < 50*time.Minute {
		t.Errorf("requeued: next reconcile at %v, want in an hour", r.NextReconcileAt)
	}
	if r := results[2].Resource; r.ReconcileRequestedAt == nil {
		t.Errorf("a manual request made while claimed was cleared")
	}
	select {
	case n := <-notes:
		if n.Topic != store.TopicResources {
			t.Errorf("notification on %q", n.Topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no TopicResources notification for a batch that left resources due")
	}
	due := claimedIDs(claim(t, s, "agent", 10))
	if len(due) != 2 {
		t.Errorf("due after the batch: %v, want the changed and the requested resource", due)
	}
}

// testBatchClaimConcurrently runs agents that claim in batches and
// complete in batches at once, as the controller does: no resource is
// leased to two of them at once, each is reconciled exactly once, and
// history has one record per attempt.
func testBatchClaimConcurrently(t *testing.T, s store.Store) {
	ctx := t.Context()
	const (
		n      = 120
		agents = 6
	)
	src := gitSource("infra", "w.yaml")
	var rs []*manifest.Resource
	for i := range n {
		rs = append(rs, resource(fmt.Sprintf("c%03d", i), `{}`))
	}
	if _, err := s.ApplyResources(ctx, rs, src); err != nil {
		t.Fatal(err)
	}
	var (
		mu gosync.Mutex
		// attempts counts the claims of each resource: each is due once,
		// so a second claim would be a second lease of it.
		attempts = map[int64]int{}
		wg       gosync.WaitGroup
		errs     = make(chan error, agents)
	)
	for a := range agents {
		owner := fmt.Sprintf("agent-%d", a)
		wg.Go(func() {
			for {
				cs, err := s.ClaimResources(ctx, store.ClaimParams{Owner: owner, Limit: 1 + a%4, Duration: lease})
				if err != nil {
					errs <- err
					return
				}
				if len(cs) == 0 {
					return
				}
				batch := make([]store.ClaimCompletion, len(cs))
				mu.Lock()
				for i, c := range cs {
					attempts[c.ID]++
					batch[i] = store.ClaimCompletion{Claim: c, Done: ready(c, true)}
				}
				mu.Unlock()
				for i, res := range s.CompleteReconciles(ctx, batch) {
					if res.Err != nil {
						errs <- fmt.Errorf("complete %s: %w", batch[i].Claim.Name, res.Err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(attempts) != n {
		t.Fatalf("reconciled %d distinct resources, want %d", len(attempts), n)
	}
	for id, k := range attempts {
		if k != 1 {
			t.Errorf("resource %d claimed %d times", id, k)
		}
		hist, err := s.ListReconcileRecords(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != k {
			t.Errorf("resource %d: %d history records for %d attempts", id, len(hist), k)
		}
	}
	if cs := claim(t, s, "late", n); len(cs) != 0 {
		t.Errorf("%d resources still due after every one was completed", len(cs))
	}
}

// testBatchErrOnly writes completions whose caller reads only errors: they
// are written as any others, and they wake the resources that wait for one
// that became Ready, but not those that wait for one that did not (it
// failed, or it got a new generation while claimed).
func testBatchErrOnly(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "w.yaml")
	var rs []*manifest.Resource
	for _, name := range []string{"db", "cache", "queue"} {
		rs = append(rs, resource(name, `{}`))
	}
	for _, waiter := range []struct{ name, on string }{{"app", "db"}, {"web", "cache"}, {"worker", "queue"}} {
		w := resource(waiter.name, `{}`)
		w.DependsOn = []manifest.ObjectRef{{Kind: "Widget", Name: waiter.on}}
		rs = append(rs, w)
	}
	if _, err := s.ApplyResources(ctx, rs, src); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*store.Claim{}
	for _, c := range claim(t, s, "agent", 6) {
		byName[c.Name] = c
	}
	if len(byName) != 6 {
		t.Fatalf("claimed %d, want 6", len(byName))
	}
	for _, name := range []string{"app", "web", "worker"} {
		complete(t, s, byName[name], store.Completion{Status: store.StatusUpdate{Phase: manifest.PhasePending},
			Waiting: true, Requeue: true, RequeueAfter: time.Hour})
	}
	// The queue gets a new generation while it is claimed.
	changed := resource("queue", `{"size":2}`)
	if _, _, err := s.ApplyResource(ctx, changed, src); err != nil {
		t.Fatal(err)
	}
	failed := store.Completion{Status: store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "refused",
		Conditions: []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionFalse,
			Reason: "Failed", LastTransitionTime: now(), ObservedGeneration: 1}},
		ObservedGeneration: 1}}
	batch := []store.ClaimCompletion{
		{Claim: byName["db"], Done: ready(byName["db"], true), ErrOnly: true},
		{Claim: byName["cache"], Done: failed, ErrOnly: true},
		{Claim: byName["queue"], Done: ready(byName["queue"], true), ErrOnly: true},
	}
	for i, res := range s.CompleteReconciles(ctx, batch) {
		if res.Err != nil {
			t.Fatalf("completion of %s: %v", batch[i].Claim.Name, res.Err)
		}
	}
	db := mustGet(t, s, byName["db"].ID)
	if db.Phase != manifest.PhaseReady || db.ObservedGeneration != 1 || db.LeaseOwner != "" || string(db.Outputs) != `{"ok":true}` {
		t.Fatalf("db after its completion: phase %s observed %d owner %q outputs %s", db.Phase, db.ObservedGeneration, db.LeaseOwner, db.Outputs)
	}
	if hist, err := s.ListReconcileRecords(ctx, db.ID, 0); err != nil || len(hist) != 1 {
		t.Fatalf("history of db = %d records, %v; want 1", len(hist), err)
	}
	if got := mustGet(t, s, byName["cache"].ID); got.Phase != manifest.PhaseFailed || got.LeaseOwner != "" {
		t.Fatalf("cache after its completion: phase %s owner %q", got.Phase, got.LeaseOwner)
	}
	if got := mustGet(t, s, byName["queue"].ID); got.Phase != manifest.PhasePending || got.Generation != 2 || got.ObservedGeneration != 1 {
		t.Fatalf("queue after completing an old generation: phase %s generation %d observed %d", got.Phase, got.Generation, got.ObservedGeneration)
	}
	// Only app's dependency became Ready: app is due, web and worker wait
	// on; the queue is due for its new generation.
	var got []string
	for _, c := range claim(t, s, "agent", 6) {
		got = append(got, c.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"app", "queue"}) {
		t.Fatalf("claimed %v after the batch; want app (its dependency is ready) and queue (a new generation)", got)
	}
}
