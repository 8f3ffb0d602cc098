package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

func testApplyResources(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "")
	var batch []*manifest.Resource
	for i := range 50 {
		batch = append(batch, resource(fmt.Sprintf("w%02d", i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	applied, err := s.ApplyResources(ctx, batch, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(batch) {
		t.Fatalf("%d results for %d resources", len(applied), len(batch))
	}
	for i, a := range applied {
		if a.Outcome != store.Created || a.Generation != 1 || a.ID == 0 {
			t.Fatalf("result %d = %+v, want created at generation 1", i, a)
		}
		got, err := s.GetResource(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Results come in input order: the ID is the one of the same resource.
		checkDesired(t, got, batch[i], store.SourceRef{Name: src.Name, Path: batch[i].Origin.File, Revision: src.Revision})
	}

	// A second batch: one new spec, one new label only, one revived after a
	// deletion request, one brand new; the rest are not sent.
	if err := s.RequestDeletions(ctx, []int64{applied[3].ID}); err != nil {
		t.Fatal(err)
	}
	relabelled := *batch[2]
	relabelled.Labels = map[string]string{"tier": "gold"}
	src2 := store.SourceRef{Name: "infra", Revision: "main@sha1:2222222222222222222222222222222222222222"}
	second := []*manifest.Resource{withSpec(batch[1], `{"n":"changed"}`), &relabelled, batch[3], resource("new", `{}`)}
	applied2, err := s.ApplyResources(ctx, second, src2)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		outcome store.ApplyOutcome
		gen     int64
	}{{store.Updated, 2}, {store.Unchanged, 1}, {store.Updated, 2}, {store.Created, 1}}
	for i, w := range want {
		if applied2[i].Outcome != w.outcome || applied2[i].Generation != w.gen {
			t.Errorf("second batch %d: %+v, want %s at generation %d", i, applied2[i], w.outcome, w.gen)
		}
	}
	revived, err := s.GetResource(ctx, applied[3].ID)
	if err != nil {
		t.Fatal(err)
	}
	if revived.DeletionRequestedAt != nil || revived.Phase != manifest.PhasePending {
		t.Errorf("revived resource: deletion %v phase %s", revived.DeletionRequestedAt, revived.Phase)
	}
	gotLabels, err := s.GetResource(ctx, applied[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if gotLabels.Labels["tier"] != "gold" || gotLabels.Source.Revision != src2.Revision || gotLabels.Generation != 1 {
		t.Errorf("relabelled: labels %v revision %s generation %d", gotLabels.Labels, gotLabels.Source.Revision, gotLabels.Generation)
	}
	untouched, err := s.GetResource(ctx, applied[10].ID)
	if err != nil {
		t.Fatal(err)
	}
	if untouched.Source.Revision != src.Revision {
		t.Errorf("a resource not in the batch moved to revision %s", untouched.Source.Revision)
	}
	if empty, err := s.ApplyResources(ctx, nil, src); err != nil || len(empty) != 0 {
		t.Errorf("empty batch: %v %v", empty, err)
	}
}

func testApplyResourcesOwnerConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	theirs := gitSource("platform", "shared/db.yaml")
	if _, _, err := s.ApplyResource(ctx, resource("shared", `{"owner":"platform"}`), theirs); err != nil {
		t.Fatal(err)
	}
	mine := gitSource("infra", "")
	err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		_, err := tx.ApplyResources(ctx, []*manifest.Resource{resource("mine", `{}`), resource("shared", `{"owner":"infra"}`)}, mine)
		return err
	})
	var oc *store.OwnerConflictError
	if !errors.As(err, &oc) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("err = %v, want an owner conflict", err)
	}
	if oc.What != "Widget/shared" || oc.Owner.Name != "platform" || oc.Owner.Path != "shared/db.yaml" {
		t.Errorf("conflict %+v does not name the owner", oc)
	}
	got, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Source.Name != "platform" || string(got.Spec) != `{"owner":"platform"}` || got.Generation != 1 {
		t.Errorf("the other source's resource changed: %+v", got.Source)
	}
	if _, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "mine"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the rolled-back batch left Widget/mine behind: %v", err)
	}
}

func testBulkDeletionsAndOwners(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "")
	applied, err := s.ApplyResources(ctx, []*manifest.Resource{resource("a", `{}`), resource("b", `{}`), resource("c", `{}`)}, src)
	if err != nil {
		t.Fatal(err)
	}
	other := gitSource("platform", "p.yaml")
	if _, _, err := s.ApplyResource(ctx, resource("p", `{}`), other); err != nil {
		t.Fatal(err)
	}
	owners, err := s.Owners(ctx, []manifest.ObjectRef{{Kind: "Widget", Name: "a"}, {Kind: "Widget", Name: "p"}, {Kind: "Widget", Name: "none"}, {Kind: "Gadget", Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 2 || owners[manifest.ObjectRef{Kind: "Widget", Name: "a"}].Name != "infra" ||
		owners[manifest.ObjectRef{Kind: "Widget", Name: "p"}] != other {
		t.Errorf("owners = %+v", owners)
	}
	if err := s.RequestDeletions(ctx, []int64{applied[0].ID, applied[1].ID, 999999}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []manifest.Phase{manifest.PhaseDeleting, manifest.PhaseDeleting, manifest.PhasePending} {
		got, err := s.GetResource(ctx, applied[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Phase != want || (want == manifest.PhaseDeleting) != (got.DeletionRequestedAt != nil) {
			t.Errorf("resource %d: phase %s, deletion requested %v", i, got.Phase, got.DeletionRequestedAt)
		}
	}
	if _, err := s.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: applied[1].ID, Kind: "Widget", Name: "b",
		Generation: 1, Trigger: store.TriggerDelete, Success: true, StartedAt: now(), FinishedAt: now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteResources(ctx, []int64{applied[1].ID, applied[2].ID, 999999}); err != nil {
		t.Fatal(err)
	}
	left, err := s.ListResources(ctx, store.ResourceFilter{Source: "infra"})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Name != "a" {
		t.Errorf("left after delete: %d resources", len(left))
	}
	history, err := s.ListReconcileRecords(ctx, applied[1].ID, 10)
	if err != nil || len(history) != 1 {
		t.Errorf("history after bulk delete: %d records, %v", len(history), err)
	}
	if err := s.RequestDeletions(ctx, nil); err != nil {
		t.Error(err)
	}
	if err := s.DeleteResources(ctx, nil); err != nil {
		t.Error(err)
	}
}

func testLockSourceAndNotify(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.LockSource(ctx, "infra"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("LockSource outside a transaction: %v, want ErrInvalid", err)
	}
	err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.LockSource(ctx, "infra"); err != nil {
			return err
		}
		// Taking it again in the same transaction does not block.
		if err := tx.LockSource(ctx, "infra"); err != nil {
			return err
		}
		return tx.Notify(ctx, store.TopicResources, "infra")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Notify(ctx, "", "x"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Notify without topic: %v", err)
	}
}

func testListResourceDigests(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "")
	kept := resource("kept", `{"a":1}`)
	kept.Annotations = map[string]string{manifest.AnnotationPrune: "disabled"}
	kept.Action = "make"
	plain := resource("plain", `{"a":2}`)
	applied, err := s.ApplyResources(ctx, []*manifest.Resource{kept, plain}, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ApplyResource(ctx, resource("other", `{}`), gitSource("platform", "o.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestDeletions(ctx, []int64{applied[1].ID}); err != nil {
		t.Fatal(err)
	}
	digests, err := s.ListResourceDigests(ctx, "infra")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ResourceDigest{
		{ID: applied[0].ID, Kind: "Widget", Name: "kept", SpecHash: kept.SpecHash, Action: "make", MetaHash: kept.MetaHash(),
			Generation: 1, PruneDisabled: true, Path: "widgets/kept.yaml"},
		{ID: applied[1].ID, Kind: "Widget", Name: "plain", SpecHash: plain.SpecHash, MetaHash: plain.MetaHash(),
			Generation: 1, Deleting: true, Path: "widgets/plain.yaml"},
	}
	if len(digests) != len(want) {
		t.Fatalf("digests %+v", digests)
	}
	for i := range want {
		if digests[i] != want[i] {
			t.Errorf("digest %d = %+v\nwant %+v", i, digests[i], want[i])
		}
	}
	// A metadata change shows in the digest, with no new generation.
	fresh := manifest.Resource{Kind: kept.Kind, Group: kept.Group, Version: kept.Version, Name: kept.Name,
		Labels: map[string]string{"tier": "gold"}, Annotations: kept.Annotations, Spec: kept.Spec,
		SpecHash: kept.SpecHash, Action: kept.Action, Origin: kept.Origin}
	if fresh.MetaHash() == kept.MetaHash() {
		t.Fatal("labels do not change the metadata hash")
	}
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{&fresh}, src); err != nil {
		t.Fatal(err)
	}
	digests, _ = s.ListResourceDigests(ctx, "infra")
	if digests[0].MetaHash != fresh.MetaHash() || digests[0].Generation != 1 {
		t.Errorf("after relabelling: %+v", digests[0])
	}
	// The IDs filter selects exactly those rows.
	got, err := s.ListResources(ctx, store.ResourceFilter{IDs: []int64{applied[1].ID, 424242}})
	if err != nil || len(got) != 1 || got[0].Name != "plain" {
		t.Errorf("IDs filter: %v %v", got, err)
	}
	if got, err := s.ListResources(ctx, store.ResourceFilter{IDs: []int64{}}); err != nil || len(got) != 0 {
		t.Errorf("empty IDs filter: %d rows, %v", len(got), err)
	}
	if none, err := s.ListResourceDigests(ctx, "nobody"); err != nil || len(none) != 0 {
		t.Errorf("digests of an unknown source: %v %v", none, err)
	}
}
