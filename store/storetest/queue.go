package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

const lease = time.Minute

// claim claims up to limit resources as owner and fails the test on error.
func claim(t *testing.T, s store.Store, owner string, limit int) []*store.Claim {
	t.Helper()
	cs, err := s.ClaimResources(t.Context(), store.ClaimParams{Owner: owner, Limit: limit, Duration: lease})
	if err != nil {
		t.Fatalf("ClaimResources: %v", err)
	}
	return cs
}

// claimedIDs returns the IDs of claims.
func claimedIDs(cs []*store.Claim) []int64 {
	ids := make([]int64, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

// ready is the completion of a successful apply of the claimed generation.
func ready(c *store.Claim, rec bool) store.Completion {
	at := now()
	done := store.Completion{Status: store.StatusUpdate{
		Phase:   manifest.PhaseReady,
		Message: "applied",
		Conditions: []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionTrue,
			Reason: "Succeeded", LastTransitionTime: at, ObservedGeneration: c.Generation}},
		ObservedGeneration: c.Generation,
		Outputs:            json.RawMessage(`{"ok":true}`),
		LastReconcileTime:  &at,
	}}
	if rec {
		done.Record = &store.ReconcileRecord{ResourceID: c.ID, Kind: c.Kind, Name: c.Name, Generation: c.Generation,
			Trigger: store.TriggerCreate, Phase: "completed", Success: true, AgentID: c.Lease.Owner,
			StartedAt: at, FinishedAt: at}
	}
	return done
}

func complete(t *testing.T, s store.Store, c *store.Claim, done store.Completion) *store.Resource {
	t.Helper()
	r, err := s.CompleteReconcile(t.Context(), c, done)
	if err != nil {
		t.Fatalf("CompleteReconcile(%s): %v", c.Name, err)
	}
	return r
}

func testClaimDue(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "w.yaml")
	var ids []int64
	for _, n := range []string{"a", "b", "c"} {
		r, err := s.CreateResource(ctx, resource(n, `{"n":"`+n+`"}`), src)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	for _, bad := range []store.ClaimParams{{Limit: 1, Duration: lease}, {Owner: "x", Duration: lease}, {Owner: "x", Limit: 1}} {
		if _, err := s.ClaimResources(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ClaimResources(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	first := claim(t, s, "agent-1", 2)
	if len(first) != 2 || first[0].ID != ids[0] || first[1].ID != ids[1] {
		t.Fatalf("first claim = %v, want the two oldest of %v", claimedIDs(first), ids)
	}
	for _, c := range first {
		if c.Phase != manifest.PhaseReconciling || c.PriorPhase != manifest.PhasePending {
			t.Errorf("%s: phase %q prior %q, want reconciling after pending", c.Name, c.Phase, c.PriorPhase)
		}
		if c.Lease.Owner != "agent-1" || c.Lease.Token <= 0 || c.LeaseOwner != "agent-1" || c.LeaseExpiresAt == nil {
			t.Errorf("%s: lease %+v owner %q expires %v", c.Name, c.Lease, c.LeaseOwner, c.LeaseExpiresAt)
		}
		if c.Generation != 1 || len(c.Spec) == 0 {
			t.Errorf("%s: claim lacks the desired state: generation %d spec %s", c.Name, c.Generation, c.Spec)
		}
	}
	second := claim(t, s, "agent-2", 5)
	if len(second) != 1 || second[0].ID != ids[2] {
		t.Fatalf("second claim = %v, want only %d: leased resources are not due", claimedIDs(second), ids[2])
	}
	if got := claim(t, s, "agent-2", 5); len(got) != 0 {
		t.Fatalf("third claim = %v, want nothing", claimedIDs(got))
	}
	// A completed resource is not due again; a deletion request makes it due,
	// and it is claimed in phase deleting.
	complete(t, s, first[0], ready(first[0], false))
	if got := claim(t, s, "agent-2", 5); len(got) != 0 {
		t.Fatalf("claim after completion = %v, want nothing", claimedIDs(got))
	}
	if _, err := s.RequestDeletion(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	del := claim(t, s, "agent-2", 5)
	if len(del) != 1 || del[0].Phase != manifest.PhaseDeleting || del[0].PriorPhase != manifest.PhaseDeleting ||
		del[0].DeletionRequestedAt == nil {
		t.Fatalf("claim after deletion request = %+v", del)
	}
	if del[0].Lease.Token <= first[0].Lease.Token {
		t.Errorf("token of the second claim %d is not above the first's %d", del[0].Lease.Token, first[0].Lease.Token)
	}
}

func testClaimConcurrently(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 60
	src := gitSource("infra", "w.yaml")
	var rs []*manifest.Resource
	for i := range n {
		rs = append(rs, resource(string(rune('a'+i/26))+string(rune('a'+i%26)), `{}`))
	}
	if _, err := s.ApplyResources(ctx, rs, src); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		claimed = map[int64]int{}
		wg      sync.WaitGroup
		errs    = make(chan error, 8)
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := s.ClaimResources(ctx, store.ClaimParams{Owner: "w" + string(rune('0'+w)), Limit: 3, Duration: lease})
				if err != nil {
					errs <- err
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					claimed[c.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(claimed) != n {
		t.Fatalf("claimed %d distinct resources, want %d", len(claimed), n)
	}
	for id, times := range claimed {
		if times != 1 {
			t.Errorf("resource %d claimed %d times", id, times)
		}
	}
}

func testLeaseFencing(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.CreateResource(ctx, resource("a", `{}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.ClaimResources(ctx, store.ClaimParams{Owner: "crashed", Limit: 1, Duration: 50 * time.Millisecond})
	if err != nil || len(old) != 1 {
		t.Fatalf("claim = %v, %v", old, err)
	}
	// The lease expires by the store's clock; the resource is then due again.
	var taken []*store.Claim
	waitFor(t, 10*time.Second, "the expired lease to free the resource", func() bool {
		taken = claim(t, s, "successor", 1)
		return len(taken) == 1
	})
	if taken[0].ID != r.ID || taken[0].PriorPhase != manifest.PhaseReconciling {
		t.Fatalf("successor claimed %d prior %q", taken[0].ID, taken[0].PriorPhase)
	}
	// The first worker's writes are refused and change nothing.
	if err := s.Heartbeat(ctx, old[0], lease, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Heartbeat with the old lease = %v, want ErrLeaseLost", err)
	}
	if _, err := s.CompleteReconcile(ctx, old[0], ready(old[0], true)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("CompleteReconcile with the old lease = %v, want ErrLeaseLost", err)
	}
	if hist, err := s.ListReconcileRecords(ctx, r.ID, 0); err != nil || len(hist) != 0 {
		t.Errorf("history after a refused completion = %d records, %v; want none", len(hist), err)
	}
	if got := mustGet(t, s, r.ID); got.Phase != manifest.PhaseReconciling || got.LeaseOwner != "successor" {
		t.Errorf("after refused writes: phase %q owner %q", got.Phase, got.LeaseOwner)
	}
	// The successor's heartbeat (with progress) and completion go through.
	p := &store.Progress{Message: "creating", Conditions: []manifest.Condition{{Type: manifest.ConditionReconciling,
		Status: manifest.ConditionTrue, Reason: "Progressing", LastTransitionTime: now()}}}
	if err := s.Heartbeat(ctx, taken[0], lease, p); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	got := mustGet(t, s, r.ID)
	if got.StatusMessage != "creating" || manifest.FindCondition(got.Conditions, manifest.ConditionReconciling) == nil {
		t.Errorf("progress not written: message %q conditions %+v", got.StatusMessage, got.Conditions)
	}
	if got.LeaseExpiresAt == nil || time.Until(*got.LeaseExpiresAt) < lease/2 {
		t.Errorf("lease not extended: expires %v", got.LeaseExpiresAt)
	}
	done := complete(t, s, taken[0], ready(taken[0], true))
	if done.LeaseOwner != "" || done.LeaseExpiresAt != nil || done.Phase != manifest.PhaseReady || done.ObservedGeneration != 1 {
		t.Errorf("after completion: owner %q expires %v phase %q observed %d", done.LeaseOwner, done.LeaseExpiresAt, done.Phase, done.ObservedGeneration)
	}
	if !bytes.Equal(done.Outputs, []byte(`{"ok":true}`)) {
		t.Errorf("outputs = %s", done.Outputs)
	}
	if hist, err := s.ListReconcileRecords(ctx, r.ID, 0); err != nil || len(hist) != 1 || hist[0].AgentID != "successor" {
		t.Errorf("history = %+v, %v; want the successor's one record", hist, err)
	}
	// A completed lease cannot be used again.
	if err := s.Heartbeat(ctx, taken[0], lease, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Heartbeat after completion = %v, want ErrLeaseLost", err)
	}
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, taken[0], lease, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Heartbeat of a deleted resource = %v, want ErrNotFound", err)
	}
}

func testCompleteSchedules(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "a.yaml")
	decl := resource("a", `{"v":1}`)
	r, err := s.CreateResource(ctx, decl, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.NextDue(ctx); err != nil || ok {
		t.Fatalf("NextDue with nothing scheduled = %v, %v", ok, err)
	}
	// A failure with a retry in an hour: not due, and NextDue says when.
	c := claim(t, s, "a1", 1)[0]
	failed := store.Completion{Status: store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "boom", RetryCount: 1},
		Requeue: true, RequeueAfter: time.Hour}
	got := complete(t, s, c, failed)
	if got.Phase != manifest.PhaseFailed || got.RetryCount != 1 || got.NextReconcileAt == nil || got.ObservedGeneration != 0 {
		t.Fatalf("after failure: %+v", got)
	}
	if cs := claim(t, s, "a1", 1); len(cs) != 0 {
		t.Fatalf("a resource waiting for its retry was claimed")
	}
	d, ok, err := s.NextDue(ctx)
	if err != nil || !ok || d < 59*time.Minute || d > time.Hour {
		t.Fatalf("NextDue = %v, %v, %v; want about an hour", d, ok, err)
	}
	// A new generation is due at once, pending, and starts its retries afresh.
	if _, _, err := s.ApplyResource(ctx, withSpec(decl, `{"v":2}`), src); err != nil {
		t.Fatal(err)
	}
	cs := claim(t, s, "a1", 1)
	if len(cs) != 1 || cs[0].Generation != 2 || cs[0].RetryCount != 0 || cs[0].PriorPhase != manifest.PhasePending {
		t.Fatalf("claim after a new generation = %+v", cs)
	}
	// The spec changes while generation 2 is being applied: the success
	// records generation 2, and generation 3 is due at once even though the
	// completion asked for a drift check in an hour.
	if _, _, err := s.ApplyResource(ctx, withSpec(decl, `{"v":3}`), src); err != nil {
		t.Fatal(err)
	}
	done := ready(cs[0], false)
	done.Requeue, done.RequeueAfter = true, time.Hour
	got = complete(t, s, cs[0], done)
	if got.ObservedGeneration != 2 || got.Generation != 3 || got.NextReconcileAt != nil {
		t.Fatalf("after completing a superseded generation: observed %d generation %d next %v",
			got.ObservedGeneration, got.Generation, got.NextReconcileAt)
	}
	cs = claim(t, s, "a1", 1)
	if len(cs) != 1 || cs[0].Generation != 3 {
		t.Fatalf("generation 3 was not due at once: %+v", cs)
	}
	// A scheduled drift check: due once its time has come.
	done = ready(cs[0], false)
	done.Requeue, done.RequeueAfter = true, 30*time.Millisecond
	complete(t, s, cs[0], done)
	waitFor(t, 10*time.Second, "the drift check to come due", func() bool {
		cs = claim(t, s, "a1", 1)
		return len(cs) == 1
	})
	if cs[0].ID != r.ID || cs[0].PriorPhase != manifest.PhaseReady || cs[0].Generation != cs[0].ObservedGeneration {
		t.Fatalf("drift claim = %+v", cs[0])
	}
}

func testManualRequest(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.CreateResource(ctx, resource("a", `{}`), store.SourceRef{Name: store.APISource})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(t, s, "a1", 1)[0]
	complete(t, s, c, ready(c, false))
	if _, err := s.RequestReconcile(ctx, r.ID+1000); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RequestReconcile of a missing resource = %v, want ErrNotFound", err)
	}
	req, err := s.RequestReconcile(ctx, r.ID)
	if err != nil || req.ReconcileRequestedAt == nil {
		t.Fatalf("RequestReconcile = %+v, %v", req, err)
	}
	c = claim(t, s, "a1", 1)[0]
	if c.ReconcileRequestedAt == nil {
		t.Fatalf("manual claim lacks its request time")
	}
	// A second request while the first is served survives its completion.
	if _, err := s.RequestReconcile(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := complete(t, s, c, ready(c, false)); got.ReconcileRequestedAt == nil {
		t.Fatalf("a request made during the reconcile was dropped")
	}
	c = claim(t, s, "a1", 1)[0]
	if got := complete(t, s, c, ready(c, false)); got.ReconcileRequestedAt != nil {
		t.Fatalf("a served request was kept: %v", got.ReconcileRequestedAt)
	}
	if cs := claim(t, s, "a1", 1); len(cs) != 0 {
		t.Fatalf("resource due after its request was served")
	}
}

func testCompleteDeletion(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "a.yaml")
	decl := resource("a", `{}`)
	r, err := s.CreateResource(ctx, decl, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestDeletion(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	// Brought back while its destroy runs: the row stays, and the new
	// generation is due.
	c := claim(t, s, "a1", 1)[0]
	if _, outcome, err := s.ApplyResource(ctx, decl, src); err != nil || outcome != store.Updated {
		t.Fatalf("revive = %v, %v", outcome, err)
	}
	done := store.Completion{Status: store.StatusUpdate{Phase: manifest.PhaseDeleting}, Delete: true}
	got := complete(t, s, c, done)
	if got == nil || got.Phase != manifest.PhasePending || got.DeletionRequestedAt != nil {
		t.Fatalf("revived resource after its destroy: %+v", got)
	}
	c = claim(t, s, "a1", 1)[0]
	if c.Generation != 2 || c.DeletionRequestedAt != nil {
		t.Fatalf("revived claim = %+v", c)
	}
	complete(t, s, c, ready(c, false))
	// A deletion requested while an apply runs keeps the resource deleting.
	if _, err := s.RequestReconcile(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, "a1", 1)[0]
	if _, err := s.RequestDeletion(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := complete(t, s, c, ready(c, false)); got.Phase != manifest.PhaseDeleting || got.NextReconcileAt != nil {
		t.Fatalf("after an apply that a deletion overtook: phase %q next %v", got.Phase, got.NextReconcileAt)
	}
	// The destroy succeeds: the row goes, its history stays.
	c = claim(t, s, "a1", 1)[0]
	done.Record = &store.ReconcileRecord{ResourceID: r.ID, Kind: c.Kind, Name: c.Name, Generation: c.Generation,
		Trigger: store.TriggerDelete, Phase: "completed", Success: true, StartedAt: now(), FinishedAt: now()}
	if got := complete(t, s, c, done); got != nil {
		t.Fatalf("CompleteReconcile of a destroy returned %+v, want nil", got)
	}
	if _, err := s.GetResource(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("row after destroy: %v", err)
	}
	if hist, err := s.ListReconcileRecords(ctx, r.ID, 0); err != nil || len(hist) != 1 || hist[0].Trigger != store.TriggerDelete {
		t.Fatalf("history after destroy = %+v, %v", hist, err)
	}
}

func testWakeWaiters(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "a.yaml")
	db := resource("db", `{}`)
	app := resource("app", `{}`)
	app.DependsOn = []manifest.ObjectRef{db.Ref()}
	other := resource("other", `{}`)
	other.DependsOn = []manifest.ObjectRef{{Kind: "Widget", Name: "elsewhere"}}
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{db, app, other}, src); err != nil {
		t.Fatal(err)
	}
	// ListResources finds dependents and refs.
	deps, err := s.ListResources(ctx, store.ResourceFilter{DependsOn: &manifest.ObjectRef{Kind: "Widget", Name: "db"}})
	if err != nil || len(deps) != 1 || deps[0].Name != "app" {
		t.Fatalf("dependents of db = %v, %v", deps, err)
	}
	byRef, err := s.ListResources(ctx, store.ResourceFilter{Refs: []manifest.ObjectRef{db.Ref(), other.Ref(), {Kind: "Widget", Name: "nope"}}})
	if err != nil || len(byRef) != 2 || byRef[0].Name != "db" || byRef[1].Name != "other" {
		t.Fatalf("by refs = %v, %v", byRef, err)
	}
	claims := claim(t, s, "a1", 3)
	byName := map[string]*store.Claim{}
	for _, c := range claims {
		byName[c.Name] = c
	}
	wait := func(c *store.Claim) {
		complete(t, s, c, store.Completion{Status: store.StatusUpdate{Phase: manifest.PhasePending},
			Waiting: true, Requeue: true, RequeueAfter: time.Hour})
	}
	wait(byName["app"])
	wait(byName["other"])
	notes, err := s.Listen(ctx, store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	complete(t, s, byName["db"], ready(byName["db"], false))
	cs := claim(t, s, "a1", 3)
	if len(cs) != 1 || cs[0].Name != "app" {
		t.Fatalf("after db became ready, claimed %v; want app only", cs)
	}
	select {
	case n := <-notes:
		if n.Topic != store.TopicResources {
			t.Errorf("notification %+v", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after waking a waiter")
	}
}

func testListen(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	notes, err := s.Listen(ctx, store.TopicResources, store.TopicSources)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Notify(ctx, store.TopicSources, "infra"); err != nil {
		t.Fatal(err)
	}
	// Inside a rolled-back transaction nothing is delivered; committed, it is.
	_ = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.Notify(ctx, store.TopicResources, "rolled-back"); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err := s.Notify(ctx, store.TopicResources, "after"); err != nil {
		t.Fatal(err)
	}
	var got []store.Notification
	for len(got) < 2 {
		select {
		case n := <-notes:
			got = append(got, n)
		case <-time.After(10 * time.Second):
			t.Fatalf("received %+v, want two notifications", got)
		}
	}
	if got[0] != (store.Notification{Topic: store.TopicSources, Payload: "infra"}) ||
		got[1] != (store.Notification{Topic: store.TopicResources, Payload: "after"}) {
		t.Fatalf("notifications = %+v", got)
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-notes:
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed after cancel")
		}
	}
}

// waitFor calls cond until it is true, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
