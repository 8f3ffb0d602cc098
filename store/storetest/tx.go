package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// txWork writes a resource, a source and a sync record through tx, the way a
// sync applies a plan.
func txWork(t *testing.T, ctx context.Context, tx store.Store) {
	t.Helper()
	r, _, err := tx.ApplyResource(ctx, resource("a", `{"size":1}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatalf("ApplyResource in tx: %v", err)
	}
	if _, err := tx.SetResourceStatus(ctx, r.ID, store.StatusUpdate{Phase: "ready", ObservedGeneration: 1}); err != nil {
		t.Fatalf("SetResourceStatus in tx: %v", err)
	}
	if _, err := tx.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceGit, Phase: store.SourceReady,
		LastAppliedRevision: "main@sha1:1111"}); err != nil {
		t.Fatalf("PutSource in tx: %v", err)
	}
	if _, err := tx.AddSyncRecord(ctx, &store.SyncRecord{Source: "infra", Revision: "main@sha1:1111", Success: true,
		Created: 1, StartedAt: now(), FinishedAt: now()}); err != nil {
		t.Fatalf("AddSyncRecord in tx: %v", err)
	}
	// The transaction sees its own writes.
	if got, err := tx.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "a"}); err != nil || got.Phase != "ready" {
		t.Fatalf("GetResourceByName in tx = %v, %v", got, err)
	}
}

func testInTxCommits(t *testing.T, s store.Store) {
	ctx := t.Context()
	err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		txWork(t, ctx, tx)
		return nil
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	r, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "a"})
	if err != nil || r.Phase != "ready" || r.ObservedGeneration != 1 {
		t.Errorf("resource after commit = %+v, %v", r, err)
	}
	src, err := s.GetSource(ctx, "infra")
	if err != nil || src.LastAppliedRevision != "main@sha1:1111" {
		t.Errorf("source after commit = %+v, %v", src, err)
	}
	recs, err := s.ListSyncRecords(ctx, "infra", 0)
	if err != nil || len(recs) != 1 {
		t.Errorf("sync records after commit = %d, %v; want 1", len(recs), err)
	}
}

func testInTxRollsBack(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Something committed before, which the failed transaction changes.
	before, err := s.CreateResource(ctx, resource("old", `{"v":1}`), gitSource("infra", "old.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("plan refused")
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		txWork(t, ctx, tx)
		if _, _, err := tx.ApplyResource(ctx, withSpec(resource("old", ""), `{"v":2}`), gitSource("infra", "old.yaml")); err != nil {
			t.Fatalf("ApplyResource in tx: %v", err)
		}
		if _, err := tx.RequestDeletion(ctx, before.ID); err != nil {
			t.Fatalf("RequestDeletion in tx: %v", err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want the error fn returned", err)
	}
	_, err = s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "a"})
	wantErr(t, "resource created in a rolled back tx", err, store.ErrNotFound)
	_, err = s.GetSource(ctx, "infra")
	wantErr(t, "source put in a rolled back tx", err, store.ErrNotFound)
	if recs, err := s.ListSyncRecords(ctx, "infra", 0); err != nil || len(recs) != 0 {
		t.Errorf("sync records after rollback = %d, %v; want none", len(recs), err)
	}
	old := mustGet(t, s, before.ID)
	if old.Generation != 1 || string(old.Spec) != `{"v":1}` || old.DeletionRequestedAt != nil || old.Phase != "pending" {
		t.Errorf("resource changed by a rolled back tx: generation %d spec %s deletion %v phase %q",
			old.Generation, old.Spec, old.DeletionRequestedAt, old.Phase)
	}
	all, err := s.ListResources(ctx, store.ResourceFilter{})
	if err != nil || len(all) != 1 {
		t.Errorf("ListResources after rollback = %v, %v; want only Widget/old", names(all), err)
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping on a migrated store: %v", err)
	}
}
