package sync_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestRenamedSource renames a source in the configuration: the old name is
// orphaned with its resources intact, the new name's sync conflicts and
// says to forget the old one, and after forgetting it the new name takes
// the resources over as new ones (nothing was destroyed).
func TestRenamedSource(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	ctx := t.Context()
	files := map[string]string{"types.yaml": widgetType, "w.yaml": widget("w1", "{size: 1}")}
	mustSync(t, s, target("infra"), snapshot(files))
	before := get(t, st, "Widget", "w1")

	marked, err := s.MarkOrphans(ctx, []string{"platform"})
	if err != nil || len(marked) != 1 || marked[0] != "infra" {
		t.Fatalf("MarkOrphans = %v, %v; want [infra]", marked, err)
	}
	src, err := st.GetSource(ctx, "infra")
	if err != nil || src.Phase != store.SourceOrphaned || !strings.Contains(src.Message, "forget") {
		t.Fatalf("renamed-away source: %+v, %v; want orphaned, saying how to forget it", src, err)
	}
	_, err = s.Sync(ctx, target("platform"), snapshot(files), false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonConflict || len(serr.Problems) != 2 {
		t.Fatalf("sync under the new name: %v; want two ownership conflicts", err)
	}
	for _, p := range serr.Problems {
		if !strings.Contains(p.Message, "source infra is orphaned") || !strings.Contains(p.Message, "--mode forget") {
			t.Errorf("conflict %q does not say that infra is orphaned and how to forget it", p.Message)
		}
	}
	if after := get(t, st, "Widget", "w1"); after.Source.Name != "infra" || after.Generation != before.Generation ||
		after.DeletionRequestedAt != nil {
		t.Fatalf("the rename touched the old source's resource: %+v", after)
	}

	if _, err := s.RemoveSource(ctx, "infra", sync.ModeForget, false); err != nil {
		t.Fatal(err)
	}
	mustSync(t, s, target("platform"), snapshot(files))
	if after := get(t, st, "Widget", "w1"); after.Source.Name != "platform" || after.Generation != 1 {
		t.Fatalf("after forgetting the old name: %+v", after)
	}
}

// TestOrphanComesBack checks that a source back in the configuration is
// made normal by its next sync, even of the revision it had applied.
func TestOrphanComesBack(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	ctx := t.Context()
	snap := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("w1", "{size: 1}")})
	mustSync(t, s, target("infra"), snap)
	// The API's pseudo-source is never orphaned, nor is a configured one.
	if _, err := st.PutSource(ctx, &store.Source{Name: store.APISource, Kind: store.SourceAPI, Phase: store.SourceReady}); err != nil {
		t.Fatal(err)
	}
	if marked, err := s.MarkOrphans(ctx, []string{"infra"}); err != nil || len(marked) != 0 {
		t.Fatalf("MarkOrphans with every source configured = %v, %v", marked, err)
	}
	if marked, err := s.MarkOrphans(ctx, nil); err != nil || len(marked) != 1 || marked[0] != "infra" {
		t.Fatalf("MarkOrphans = %v, %v; want [infra]", marked, err)
	}
	// Marked once: a second start finds it orphaned already.
	if marked, err := s.MarkOrphans(ctx, nil); err != nil || len(marked) != 0 {
		t.Fatalf("second MarkOrphans = %v, %v; want none", marked, err)
	}
	res := mustSync(t, s, target("infra"), snap)
	if res.Skipped {
		t.Fatalf("the sync of an orphaned source's applied revision was skipped")
	}
	if src, err := st.GetSource(ctx, "infra"); err != nil || src.Phase != store.SourceReady {
		t.Fatalf("source after it came back: %+v, %v; want ready", src, err)
	}
	if r := get(t, st, "Widget", "w1"); r.Generation != 1 {
		t.Fatalf("coming back changed the resource: generation %d", r.Generation)
	}
}

// TestRemoveSourceRules checks what forgetting and pruning refuse, and
// that a refusal changes nothing.
func TestRemoveSourceRules(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	ctx := t.Context()
	mustSync(t, s, target("types"), snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("w0", "{size: 1}")}))
	mustSync(t, s, target("infra"), snapshot(map[string]string{
		"w1.yaml": widget("w1", "{size: 1}"),
		"w2.yaml": "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\n  annotations: {no8s.io/prune: disabled}\nspec: {size: 2}\n",
	}))
	if _, err := s.RemoveSource(ctx, "infra", sync.ModeForget, false); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("forget a served source: %v, want ErrConflict", err)
	}
	if _, err := s.RemoveSource(ctx, "nope", sync.ModeForget, false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("forget an unknown source: %v, want ErrNotFound", err)
	}
	if _, err := s.RemoveSource(ctx, "infra", "drop", false); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown mode: %v, want ErrInvalid", err)
	}
	if _, err := s.MarkOrphans(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// types owns the type infra's resources use.
	if _, err := s.RemoveSource(ctx, "types", sync.ModeForget, false); !errors.Is(err, store.ErrInUse) ||
		!strings.Contains(err.Error(), "Widget/w1 (source infra)") {
		t.Fatalf("forget a source whose type others use: %v, want ErrInUse naming the users", err)
	}
	var perr *sync.PruneApprovalError
	if _, err := s.RemoveSource(ctx, "infra", sync.ModePrune, false); !errors.As(err, &perr) || perr.Destroying != 1 ||
		!errors.Is(err, store.ErrConflict) {
		t.Fatalf("unapproved prune: %v, want a PruneApprovalError for 1 resource", err)
	}
	for _, name := range []string{"w0", "w1", "w2"} {
		if r := get(t, st, "Widget", name); r.DeletionRequestedAt != nil {
			t.Fatalf("a refused removal marked %s for deletion", name)
		}
	}
	// Approved: w1 is destroyed, w2 (prune disabled) forgotten.
	rm, err := s.RemoveSource(ctx, "infra", sync.ModePrune, true)
	if err != nil || rm.Destroying != 1 || rm.Forgotten != 1 || rm.Removed {
		t.Fatalf("approved prune = %+v, %v", rm, err)
	}
	if r := get(t, st, "Widget", "w1"); r.Phase != manifest.PhaseDeleting {
		t.Fatalf("w1 after the prune: %s, want deleting", r.Phase)
	}
	if _, err := st.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "w2"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("w2 (prune disabled) after the prune: %v, want forgotten", err)
	}
	if src, err := st.GetSource(ctx, "infra"); err != nil || src.Phase != store.SourcePruning {
		t.Fatalf("source after the prune: %+v, %v; want pruning", src, err)
	}
	// A pruning source is not marked orphaned again by a restart.
	if marked, err := s.MarkOrphans(ctx, nil); err != nil || len(marked) != 0 {
		t.Fatalf("MarkOrphans after the prune = %v, %v", marked, err)
	}
}
