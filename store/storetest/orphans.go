package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// putSource stores a source of the given phase.
func putSource(t *testing.T, s store.Store, name string, phase store.SourcePhase) {
	t.Helper()
	if _, err := s.PutSource(t.Context(), &store.Source{Name: name, Kind: store.SourceGit, URL: "https://example.com/" + name + ".git",
		Phase: phase, Message: string(phase)}); err != nil {
		t.Fatalf("put source %s %s: %v", name, phase, err)
	}
}

func testSourcePhases(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, phase := range store.SourcePhases() {
		putSource(t, s, "src", phase)
		got, err := s.GetSource(ctx, "src")
		if err != nil {
			t.Fatal(err)
		}
		if got.Phase != phase || got.ApprovedRevision != "" {
			t.Fatalf("put phase %s: got phase %s approved %q", phase, got.Phase, got.ApprovedRevision)
		}
		all, err := s.ListSources(ctx)
		if err != nil || len(all) != 1 || all[0].Phase != phase {
			t.Fatalf("list after put phase %s: %+v, %v", phase, all, err)
		}
	}
	// A stalled source keeps the revision approved past the guard.
	if _, err := s.PutSource(ctx, &store.Source{Name: "src", Kind: store.SourceGit, Phase: store.SourceStalled,
		ApprovedRevision: "main@sha1:0123456789012345678901234567890123456789"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSource(ctx, "src"); err != nil || got.Phase != store.SourceStalled || got.ApprovedRevision == "" {
		t.Fatalf("stalled with an approval: %+v, %v", got, err)
	}
	_, err := s.PutSource(ctx, &store.Source{Name: "src", Kind: store.SourceGit, Phase: "gone"})
	wantErr(t, "unknown phase", err, store.ErrInvalid)
}

func testDeleteSource(t *testing.T, s store.Store) {
	ctx := t.Context()
	wantErr(t, "unknown source", s.DeleteSource(ctx, "nope"), store.ErrNotFound)
	putSource(t, s, "infra", store.SourceOrphaned)
	r, _, err := s.ApplyResource(ctx, resource("a", `{}`), gitSource("infra", "widgets/a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "source with resources", s.DeleteSource(ctx, "infra"), store.ErrInUse)
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSource(ctx, "infra"); err != nil {
		t.Fatalf("delete source: %v", err)
	}
	if _, err := s.GetSource(ctx, "infra"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("source after delete: %v, want ErrNotFound", err)
	}
}

// testOrphanedNotDue checks that resources of an orphaned source are never
// claimed nor counted as due, and are again once the source is served.
func testOrphanedNotDue(t *testing.T, s store.Store) {
	ctx := t.Context()
	putSource(t, s, "gone", store.SourceReady)
	putSource(t, s, "kept", store.SourceReady)
	// Due at once (a new resource), due later (a retry), and deleting.
	fresh, _, err := s.ApplyResource(ctx, resource("fresh", `{}`), gitSource("gone", "widgets/fresh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	retry, _, err := s.ApplyResource(ctx, resource("retry", `{}`), gitSource("gone", "widgets/retry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doomed, _, err := s.ApplyResource(ctx, resource("doomed", `{}`), gitSource("gone", "widgets/doomed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetResourceStatus(ctx, retry.ID, store.StatusUpdate{Phase: manifest.PhaseFailed, RetryCount: 1,
		NextReconcileAt: ptr(now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestDeletion(ctx, doomed.ID); err != nil {
		t.Fatal(err)
	}
	if fresh.Orphaned {
		t.Errorf("resource of a served source reads as orphaned: %+v", fresh)
	}
	putSource(t, s, "gone", store.SourceOrphaned)
	// Every read says so: one, a list, by name.
	if r, err := s.GetResource(ctx, retry.ID); err != nil || !r.Orphaned {
		t.Errorf("GetResource of an orphaned source's resource: %+v, %v; want orphaned", r, err)
	}
	if r, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: fresh.Kind, Namespace: fresh.Namespace, Name: fresh.Name}); err != nil || !r.Orphaned {
		t.Errorf("GetResourceByName of an orphaned source's resource: %+v, %v; want orphaned", r, err)
	}
	if rs, err := s.ListResources(ctx, store.ResourceFilter{}); err != nil || len(rs) != 3 || !rs[0].Orphaned || !rs[1].Orphaned || !rs[2].Orphaned {
		t.Errorf("ListResources with an orphaned source: %v, %v; want 3 orphaned", rs, err)
	}
	if cs := claim(t, s, "a1", 10); len(cs) != 0 {
		t.Fatalf("claimed %v of an orphaned source", claimedIDs(cs))
	}
	if _, ok, err := s.NextDue(ctx); err != nil || ok {
		t.Fatalf("NextDue with only orphaned resources = %v, %v; want none", ok, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Due != 0 {
		t.Fatalf("Stats.Due with only orphaned resources = %+v, %v; want 0", st, err)
	}
	// Another source's resources are due as ever.
	other, _, err := s.ApplyResource(ctx, resource("other", `{}`), gitSource("kept", "widgets/other.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cs := claim(t, s, "a1", 10); len(cs) != 1 || cs[0].ID != other.ID {
		t.Fatalf("claim beside an orphaned source = %v, want [%d]", claimedIDs(cs), other.ID)
	}
	if other.Orphaned {
		t.Errorf("resource of a served source beside an orphaned one reads as orphaned")
	}
	// Back in a configuration: due again, scheduled ones on schedule.
	putSource(t, s, "gone", store.SourceReady)
	if r, err := s.GetResource(ctx, retry.ID); err != nil || r.Orphaned {
		t.Errorf("GetResource once the source came back: %+v, %v; want not orphaned", r, err)
	}
	cs := claim(t, s, "a1", 10)
	if got := claimedIDs(cs); len(got) != 2 || !(got[0] == fresh.ID && got[1] == doomed.ID || got[0] == doomed.ID && got[1] == fresh.ID) {
		t.Fatalf("claim after the source came back = %v, want %d and %d", got, fresh.ID, doomed.ID)
	}
	if _, ok, err := s.NextDue(ctx); err != nil || !ok {
		t.Fatalf("NextDue after the source came back = %v, %v; want the retry", ok, err)
	}
}

// testPruneRemovesSource checks that destroying the last resource of a
// source being pruned removes the source and its unused types.
func testPruneRemovesSource(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("old", "types.yaml")
	for _, v := range []string{"v1", "v2"} {
		if _, err := s.PutResourceType(ctx, &store.ResourceType{Name: "Widget", Version: v, Group: "example.com",
			Action: "noop", Schema: []byte(`{"type":"object"}`), Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	a, _, err := s.ApplyResource(ctx, resource("a", `{}`), src)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.ApplyResource(ctx, resource("b", `{}`), src)
	if err != nil {
		t.Fatal(err)
	}
	putSource(t, s, "old", store.SourcePruning)
	if err := s.RequestDeletions(ctx, []int64{a.ID, b.ID}); err != nil {
		t.Fatal(err)
	}
	cs := claim(t, s, "a1", 10)
	if len(cs) != 2 {
		t.Fatalf("claimed %v of a source being pruned, want both", claimedIDs(cs))
	}
	destroyed := func(c *store.Claim) store.Completion {
		return store.Completion{Delete: true, Status: store.StatusUpdate{Phase: manifest.PhaseDeleting}}
	}
	complete(t, s, cs[0], destroyed(cs[0]))
	if _, err := s.GetSource(ctx, "old"); err != nil {
		t.Fatalf("source went before its last resource: %v", err)
	}
	complete(t, s, cs[1], destroyed(cs[1]))
	if _, err := s.GetSource(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("source after its last resource was destroyed: %v, want ErrNotFound", err)
	}
	if types, err := s.ListResourceTypes(ctx, store.TypeFilter{Source: "old"}); err != nil || len(types) != 0 {
		t.Fatalf("types of the pruned source: %d, %v; want none", len(types), err)
	}
	// A source that is not being pruned stays when its last resource goes.
	putSource(t, s, "live", store.SourceReady)
	c, _, err := s.ApplyResource(ctx, resource("c", `{}`), gitSource("live", "widgets/c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestDeletion(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	cs = claim(t, s, "a1", 1)
	complete(t, s, cs[0], destroyed(cs[0]))
	if _, err := s.GetSource(ctx, "live"); err != nil {
		t.Fatalf("a served source went with its last resource: %v", err)
	}
}

// checkPending checks that r is pending for generation gen, with Ready Unknown.
func checkPending(t *testing.T, what string, r *store.Resource, gen int64) *manifest.Condition {
	t.Helper()
	ready := manifest.FindCondition(r.Conditions, manifest.ConditionReady)
	if r.Generation != gen || r.Phase != manifest.PhasePending || r.StatusMessage != store.PendingMessage(gen) ||
		ready == nil || ready.Status != manifest.ConditionUnknown || ready.Reason != store.ReasonProgressing {
		t.Fatalf("%s: generation %d phase %q message %q Ready %+v; want generation %d pending, Ready Unknown",
			what, r.Generation, r.Phase, r.StatusMessage, ready, gen)
	}
	return ready
}

// testNewGenerationPending checks that a new generation is pending, with
// Ready Unknown, from the write that stores it, through both apply paths.
func testNewGenerationPending(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	decl := resource("a", `{"v":1}`)
	r, _, err := s.ApplyResource(ctx, decl, src)
	if err != nil {
		t.Fatal(err)
	}
	cs := claim(t, s, "a1", 1)
	complete(t, s, cs[0], ready(cs[0], false))
	readyAt := now().Add(-time.Hour)
	conds := []manifest.Condition{
		{Type: manifest.ConditionReady, Status: manifest.ConditionTrue, Reason: "Succeeded", LastTransitionTime: readyAt},
		{Type: "Custom", Status: manifest.ConditionTrue, Reason: "Mine", LastTransitionTime: readyAt},
	}
	if _, err := s.SetResourceStatus(ctx, r.ID, store.StatusUpdate{Phase: manifest.PhaseReady, Message: "applied",
		Conditions: conds, ObservedGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	before := now()
	got, outcome, err := s.ApplyResource(ctx, withSpec(decl, `{"v":2}`), src)
	if err != nil || outcome != store.Updated {
		t.Fatalf("apply: %v, %v", outcome, err)
	}
	unknown := checkPending(t, "ApplyResource's row", got, 2)
	if unknown.LastTransitionTime.Before(before.Add(-time.Second)) {
		t.Fatalf("Ready went Unknown at %v, before the apply at %v", unknown.LastTransitionTime, before)
	}
	if c := manifest.FindCondition(got.Conditions, "Custom"); c == nil || !c.LastTransitionTime.Equal(readyAt) {
		t.Fatalf("other conditions changed: %+v", got.Conditions)
	}
	stored, err := s.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkPending(t, "stored after ApplyResource", stored, 2)
	// An unchanged apply leaves the status alone, and another generation
	// keeps Ready's transition time: it was Unknown already.
	if _, _, err := s.ApplyResource(ctx, withSpec(decl, `{"v":2}`), src); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{withSpec(decl, `{"v":3}`)}, src); err != nil {
		t.Fatal(err)
	}
	stored, err = s.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again := checkPending(t, "stored after ApplyResources", stored, 3); !again.LastTransitionTime.Equal(unknown.LastTransitionTime) {
		t.Fatalf("Ready's transition time moved from %v to %v with no change of status", unknown.LastTransitionTime, again.LastTransitionTime)
	}

	// A resource claimed when its new generation arrives stays reconciling
	// (a worker holds it), and its completion leaves it pending.
	cs = claim(t, s, "a1", 1)
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{withSpec(decl, `{"v":4}`)}, src); err != nil {
		t.Fatal(err)
	}
	if stored, err = s.GetResource(ctx, r.ID); err != nil || stored.Phase != manifest.PhaseReconciling {
		t.Fatalf("claimed during a new generation: %+v, %v; want reconciling", stored, err)
	}
	checkPending(t, "completed after a new generation", complete(t, s, cs[0], ready(cs[0], false)), 4)
}

// testTransitionTimes checks that a condition's lastTransitionTime moves
// only when its status changes, whatever times the writes carry.
func testTransitionTimes(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, _, err := s.ApplyResource(ctx, resource("a", `{}`), gitSource("infra", "widgets/a.yaml")); err != nil {
		t.Fatal(err)
	}
	t0 := now().Add(-time.Hour)
	cond := func(status manifest.ConditionStatus, at time.Time) []manifest.Condition {
		return []manifest.Condition{{Type: manifest.ConditionReconciling, Status: status, Reason: "R", LastTransitionTime: at}}
	}
	reconciling := func(r *store.Resource) manifest.Condition {
		t.Helper()
		c := manifest.FindCondition(r.Conditions, manifest.ConditionReconciling)
		if c == nil {
			t.Fatalf("no Reconciling condition in %+v", r.Conditions)
		}
		return *c
	}
	// The first attempt ends with Reconciling False at t0.
	cs := claim(t, s, "a1", 1)
	done := ready(cs[0], false)
	done.Status.Conditions = cond(manifest.ConditionFalse, t0)
	first := reconciling(complete(t, s, cs[0], done))
	if !first.LastTransitionTime.Equal(t0) {
		t.Fatalf("first write: transition time %v, want %v as written", first.LastTransitionTime, t0)
	}
	// The next attempt's worker holds the conditions as claimed: it reports
	// Reconciling True (a transition, at t1), then completes with False
	// carrying the claimed time t0, older than t1.
	if _, err := s.RequestReconcile(ctx, cs[0].ID); err != nil {
		t.Fatal(err)
	}
	cs = claim(t, s, "a1", 1)
	t1 := now().Add(-time.Minute)
	if err := s.Heartbeat(ctx, cs[0], lease, &store.Progress{Message: "working", Conditions: cond(manifest.ConditionTrue, t1)}); err != nil {
		t.Fatal(err)
	}
	// A heartbeat with the same status and an older time keeps the later.
	if err := s.Heartbeat(ctx, cs[0], lease, &store.Progress{Message: "still", Conditions: cond(manifest.ConditionTrue, t0)}); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetResource(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := reconciling(r); got.Status != manifest.ConditionTrue || !got.LastTransitionTime.Equal(t1) {
		t.Fatalf("after heartbeats: %+v, want True since %v", got, t1)
	}
	before := now()
	done = ready(cs[0], false)
	done.Status.Conditions = cond(manifest.ConditionFalse, t0)
	got := reconciling(complete(t, s, cs[0], done))
	if got.Status != manifest.ConditionFalse || !got.LastTransitionTime.After(t1) || got.LastTransitionTime.Before(before.Add(-time.Second)) {
		t.Fatalf("after completion: %+v; want False since the completion (about %v), not back to %v", got, before, t0)
	}
	// A writer that saw the status change and change back, with nothing
	// written in between, gives a later time for the same status: it stands.
	if _, err := s.RequestReconcile(ctx, cs[0].ID); err != nil {
		t.Fatal(err)
	}
	cs = claim(t, s, "a1", 1)
	t2 := got.LastTransitionTime.Add(time.Second)
	done = ready(cs[0], false)
	done.Status.Conditions = cond(manifest.ConditionFalse, t2)
	if got := reconciling(complete(t, s, cs[0], done)); !got.LastTransitionTime.Equal(t2) {
		t.Fatalf("after a completion with a later time: %+v, want since %v", got, t2)
	}
}
