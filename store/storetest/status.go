package storetest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

func testSetResourceStatus(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	decl := resource("a", `{"size":1}`)
	created, err := s.CreateResource(ctx, decl, src)
	if err != nil {
		t.Fatal(err)
	}
	// Times given in another zone come back as the same instant in UTC.
	zone := time.FixedZone("CEST", 2*60*60)
	transition := now().Add(-time.Hour).In(zone)
	next := now().Add(10 * time.Minute)
	last := now().Add(-time.Second).In(zone)
	u := store.StatusUpdate{
		Phase:   manifest.PhaseFailed,
		Message: "apply failed: quota exceeded",
		Conditions: []manifest.Condition{
			{Type: manifest.ConditionReady, Status: manifest.ConditionFalse, Reason: "ApplyFailed",
				Message: "quota exceeded", LastTransitionTime: transition, ObservedGeneration: 1},
			{Type: "example.com/Billing", Status: manifest.ConditionUnknown, LastTransitionTime: transition},
		},
		ObservedGeneration: 1,
		Outputs:            json.RawMessage(`{"endpoint":"db.internal:5432","ports":[5432]}`),
		RetryCount:         3,
		NextReconcileAt:    &next,
		LastReconcileTime:  &last,
	}
	got, err := s.SetResourceStatus(ctx, created.ID, u)
	if err != nil {
		t.Fatalf("SetResourceStatus: %v", err)
	}
	for _, read := range []struct {
		name string
		r    *store.Resource
	}{{"returned", got}, {"stored", mustGet(t, s, created.ID)}} {
		r := read.r
		if r.Phase != u.Phase || r.StatusMessage != u.Message || r.ObservedGeneration != 1 || r.RetryCount != 3 {
			t.Errorf("%s: phase %q message %q observed %d retries %d", read.name, r.Phase, r.StatusMessage, r.ObservedGeneration, r.RetryCount)
		}
		if !bytes.Equal(r.Outputs, u.Outputs) {
			t.Errorf("%s: Outputs = %s, want %s", read.name, r.Outputs, u.Outputs)
		}
		if !sameTime(r.NextReconcileAt, &next) || !sameTime(r.LastReconcileTime, &last) {
			t.Errorf("%s: next %v last %v, want %v %v", read.name, r.NextReconcileAt, r.LastReconcileTime, next, last)
		} else {
			checkUTC(t, read.name+" NextReconcileAt", *r.NextReconcileAt)
			checkUTC(t, read.name+" LastReconcileTime", *r.LastReconcileTime)
		}
		if len(r.Conditions) != 2 {
			t.Fatalf("%s: conditions = %+v, want 2", read.name, r.Conditions)
		}
		for i, c := range r.Conditions {
			want := u.Conditions[i]
			if c.Type != want.Type || c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message ||
				c.ObservedGeneration != want.ObservedGeneration || !c.LastTransitionTime.Equal(want.LastTransitionTime) {
				t.Errorf("%s: condition %d = %+v, want %+v", read.name, i, c, want)
			}
			checkUTC(t, read.name+" LastTransitionTime", c.LastTransitionTime)
		}
		// Status writes leave the desired state alone.
		if r.Generation != 1 {
			t.Errorf("%s: generation = %d, want 1", read.name, r.Generation)
		}
		checkDesired(t, r, decl, src)
	}

	// Every field is written as given: clearing works too.
	cleared, err := s.SetResourceStatus(ctx, created.ID, store.StatusUpdate{Phase: manifest.PhaseReady, ObservedGeneration: 1})
	if err != nil {
		t.Fatal(err)
	}
	if cleared.Outputs != nil || len(cleared.Conditions) != 0 || cleared.NextReconcileAt != nil ||
		cleared.LastReconcileTime != nil || cleared.RetryCount != 0 || cleared.StatusMessage != "" {
		t.Errorf("after clearing: outputs %s conditions %v next %v last %v retries %d message %q",
			cleared.Outputs, cleared.Conditions, cleared.NextReconcileAt, cleared.LastReconcileTime,
			cleared.RetryCount, cleared.StatusMessage)
	}

	_, err = s.SetResourceStatus(ctx, created.ID, store.StatusUpdate{Phase: "sleeping"})
	wantErr(t, "SetResourceStatus(unknown phase)", err, store.ErrInvalid)
	_, err = s.SetResourceStatus(ctx, created.ID+1, store.StatusUpdate{Phase: manifest.PhaseReady})
	wantErr(t, "SetResourceStatus(missing)", err, store.ErrNotFound)
}

func mustGet(t *testing.T, s store.Store, id int64) *store.Resource {
	t.Helper()
	r, err := s.GetResource(t.Context(), id)
	if err != nil {
		t.Fatalf("GetResource(%d): %v", id, err)
	}
	return r
}

func testDeletion(t *testing.T, s store.Store) {
	ctx := t.Context()
	created, err := s.CreateResource(ctx, resource("a", `{}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	before := now().Add(-time.Minute)
	first, err := s.RequestDeletion(ctx, created.ID)
	if err != nil {
		t.Fatalf("RequestDeletion: %v", err)
	}
	if first.Phase != manifest.PhaseDeleting || first.DeletionRequestedAt == nil || first.DeletionRequestedAt.Before(before) {
		t.Fatalf("after RequestDeletion: phase %q, requested at %v", first.Phase, first.DeletionRequestedAt)
	}
	checkUTC(t, "DeletionRequestedAt", *first.DeletionRequestedAt)
	if first.Generation != 1 {
		t.Errorf("RequestDeletion changed the generation to %d", first.Generation)
	}
	second, err := s.RequestDeletion(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !sameTime(second.DeletionRequestedAt, first.DeletionRequestedAt) {
		t.Errorf("a second request moved the deletion time from %v to %v", first.DeletionRequestedAt, second.DeletionRequestedAt)
	}
	listed, err := s.ListResources(ctx, store.ResourceFilter{Phase: manifest.PhaseDeleting})
	if err != nil || len(listed) != 1 || listed[0].ID != created.ID {
		t.Errorf("ListResources(deleting) = %v, %v", names(listed), err)
	}

	if err := s.DeleteResource(ctx, created.ID); err != nil {
		t.Fatalf("DeleteResource: %v", err)
	}
	_, err = s.GetResource(ctx, created.ID)
	wantErr(t, "GetResource after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteResource twice", s.DeleteResource(ctx, created.ID), store.ErrNotFound)
	_, err = s.RequestDeletion(ctx, created.ID)
	wantErr(t, "RequestDeletion(missing)", err, store.ErrNotFound)

	// The name is free again; the new resource starts over.
	again, err := s.CreateResource(ctx, resource("a", `{}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatalf("CreateResource after delete: %v", err)
	}
	if again.ID == created.ID || again.Generation != 1 || again.Phase != manifest.PhasePending {
		t.Errorf("recreated: id %d (old %d) generation %d phase %q", again.ID, created.ID, again.Generation, again.Phase)
	}
}
