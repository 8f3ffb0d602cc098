package sync_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	gosync "sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore returns a migrated store on a fresh database, and its URL.
func newStore(t *testing.T) (*postgres.Store, string) {
	t.Helper()
	url := pgtest.URL(t)
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, url
}

const widgetType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Widget}
spec:
  group: example.com
  action: make-widget
  versions:
    - name: v1
      schema:
        type: object
        required: [size]
        properties:
          size: {type: integer, minimum: 1}
          color: {type: string, default: grey}
`

func widget(name, spec string) string {
	return fmt.Sprintf("---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: %s\nspec: %s\n", name, spec)
}

// snapshot builds a snapshot of in-memory files, with a revision derived
// from their content as a folder source would.
func snapshot(files map[string]string) *source.Snapshot {
	var fs []manifest.File
	for path, data := range files {
		fs = append(fs, manifest.File{Path: path, Data: []byte(data), Hash: manifest.HashJSON([]byte(data))})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	return &source.Snapshot{Revision: source.DigestRevision(fs, nil), Files: fs}
}

func target(name string) sync.Target {
	return sync.Target{Name: name, Kind: store.SourceDir, Path: "/srv/" + name, Prune: sync.Prune{Enabled: true}}
}

func mustSync(t *testing.T, s *sync.Syncer, tg sync.Target, snap *source.Snapshot) *sync.Result {
	t.Helper()
	res, err := s.Sync(t.Context(), tg, snap, false)
	if err != nil {
		t.Fatalf("sync %s: %v", tg.Name, err)
	}
	return res
}

// get returns the resource kind/name: in the default namespace, or
// cluster-scoped.
func get(t *testing.T, st store.Store, kind, name string) *store.Resource {
	t.Helper()
	r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: kind, Namespace: "default", Name: name})
	if errors.Is(err, store.ErrNotFound) {
		r, err = st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: kind, Name: name})
	}
	if err != nil {
		t.Fatalf("get %s/%s: %v", kind, name, err)
	}
	return r
}

func TestSyncGenerations(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")

	files := map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}") + widget("b", "{size: 2}")}
	res := mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Creates) != 2 || len(res.Plan.Types) != 1 {
		t.Fatalf("first sync: %s, types %v", res.Plan.Summary(), res.Plan.Types)
	}
	a := get(t, st, "Widget", "a")
	if a.Generation != 1 || a.Action != "make-widget" || string(a.Spec) != `{"color":"grey","size":1}` || a.Source.Name != "infra" || a.Source.Path != "w.yaml" {
		t.Fatalf("created: generation %d action %q spec %s source %+v", a.Generation, a.Action, a.Spec, a.Source)
	}

	// Spec change: generation 2.
	files["w.yaml"] = widget("a", "{size: 5}") + widget("b", "{size: 2}")
	res = mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Updates) != 1 || res.Plan.Unchanged != 1 || res.Plan.Updates[0].Generation != 2 {
		t.Fatalf("spec change: %s %+v", res.Plan.Summary(), res.Plan.Updates)
	}
	// Label-only change, and key order and formatting: still generation 2.
	files["w.yaml"] = strings.Replace(widget("a", "{color: grey,   size: 5}"), "name: a", "name: a\n  labels: {team: x}", 1) + widget("b", "{size: 2}")
	res = mustSync(t, s, tg, snapshot(files))
	if res.Plan.Changes() != 0 || res.Plan.Unchanged != 2 {
		t.Fatalf("label change: %s", res.Plan.Summary())
	}
	a = get(t, st, "Widget", "a")
	if a.Generation != 2 || a.Labels["team"] != "x" {
		t.Errorf("after label change: generation %d labels %v", a.Generation, a.Labels)
	}
	// The type's default changes: every resource relying on it gets a new generation.
	files["types.yaml"] = strings.Replace(widgetType, "default: grey", "default: blue", 1)
	res = mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Updates) != 1 || res.Plan.Updates[0].Name != "b" {
		t.Errorf("default change: %s %+v (a sets color itself)", res.Plan.Summary(), res.Plan.Updates)
	}
	if b := get(t, st, "Widget", "b"); b.Generation != 2 || string(b.Spec) != `{"color":"blue","size":2}` {
		t.Errorf("b after default change: generation %d spec %s", b.Generation, b.Spec)
	}

	// File removed: its resources are marked for deletion, not removed.
	delete(files, "w.yaml")
	files["keep.yaml"] = widget("c", "{size: 3}")
	tg.Prune.AllowEmpty = true
	res = mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Deletes) != 2 || len(res.Plan.Creates) != 1 {
		t.Fatalf("removal: %s", res.Plan.Summary())
	}
	for _, name := range []string{"a", "b"} {
		if r := get(t, st, "Widget", name); r.Phase != manifest.PhaseDeleting || r.DeletionRequestedAt == nil {
			t.Errorf("%s: phase %s, deletion %v", name, r.Phase, r.DeletionRequestedAt)
		}
	}
	// Coming back before it is destroyed revives it with a new generation.
	files["w.yaml"] = widget("a", "{size: 5}")
	res = mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Updates) != 1 {
		t.Fatalf("revival: %s", res.Plan.Summary())
	}
	if a := get(t, st, "Widget", "a"); a.Phase != manifest.PhasePending || a.DeletionRequestedAt != nil || a.Generation != 3 {
		t.Errorf("revived: phase %s deletion %v generation %d", a.Phase, a.DeletionRequestedAt, a.Generation)
	}
}

func TestSyncForgetsWhenPruneDisabled(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	kept := strings.Replace(widget("kept", "{size: 1}"), "name: kept", "name: kept\n  annotations: {no8s.io/prune: disabled}", 1)
	files := map[string]string{"types.yaml": widgetType, "w.yaml": kept + widget("gone", "{size: 1}") + widget("stay", "{size: 1}")}
	mustSync(t, s, tg, snapshot(files))
	keptID := get(t, st, "Widget", "kept").ID
	if _, err := st.AddReconcileRecord(t.Context(), &store.ReconcileRecord{ResourceID: keptID, Kind: "Widget", Name: "kept",
		Generation: 1, Trigger: store.TriggerCreate, Success: true}); err != nil {
		t.Fatal(err)
	}

	files["w.yaml"] = widget("stay", "{size: 1}")
	res := mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Forgets) != 1 || res.Plan.Forgets[0].Name != "kept" || len(res.Plan.Deletes) != 1 || res.Plan.Deletes[0].Name != "gone" {
		t.Fatalf("plan: forgets %v deletes %v", res.Plan.Forgets, res.Plan.Deletes)
	}
	if _, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "kept"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("forgotten resource still stored: %v", err)
	}
	if h, err := st.ListReconcileRecords(t.Context(), keptID, 10); err != nil || len(h) != 1 {
		t.Errorf("history of the forgotten resource: %d, %v", len(h), err)
	}

	// With pruning disabled for the whole source, removals are forgotten too.
	tg.Prune.Enabled = false
	files["w.yaml"] = ""
	tg.Prune.AllowEmpty = true
	res = mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Forgets) != 1 || len(res.Plan.Deletes) != 0 {
		t.Errorf("prune disabled: %s", res.Plan.Summary())
	}
}

func TestSyncSameRevisionDoesNothing(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	snap := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")})
	mustSync(t, s, tg, snap)
	before, _ := st.GetSource(t.Context(), "infra")
	res := mustSync(t, s, tg, snap)
	if !res.Skipped || res.Plan != nil {
		t.Fatalf("same revision: %+v", res)
	}
	after, _ := st.GetSource(t.Context(), "infra")
	history, _ := st.ListSyncRecords(t.Context(), "infra", 10)
	if len(history) != 1 || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a skipped sync wrote: %d history rows, source updated %v -> %v", len(history), before.UpdatedAt, after.UpdatedAt)
	}
	// Forcing it syncs again, and finds nothing to change.
	res, err := s.Sync(t.Context(), tg, snap, true)
	if err != nil || res.Skipped || res.Plan.Changes() != 0 {
		t.Errorf("forced: %+v %v", res, err)
	}
}

func TestSyncBrokenCommitChangesNothing(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	files := map[string]string{"types.yaml": widgetType, "a.yaml": widget("a", "{size: 1}"), "b.yaml": widget("b", "{size: 1}")}
	good := snapshot(files)
	mustSync(t, s, tg, good)

	// One broken file: another file changes and b.yaml breaks.
	files["a.yaml"] = widget("a", "{size: 2}")
	files["b.yaml"] = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: b\nspec:\n  size: 0\n"
	files["c.yaml"] = "this: [is: broken\n"
	bad := snapshot(files)
	_, err := s.Sync(t.Context(), tg, bad, false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonValidationFailed {
		t.Fatalf("broken commit: %v", err)
	}
	if len(serr.Problems) != 2 {
		t.Fatalf("problems: %v", serr.Problems)
	}
	p := serr.Problems[0]
	if p.File != "b.yaml" || p.Line != 6 || p.Pointer != "/spec/size" || !strings.Contains(p.Message, "must be >= 1") {
		t.Errorf("first problem %+v", p)
	}
	if a := get(t, st, "Widget", "a"); a.Generation != 1 {
		t.Errorf("a changed by a failed sync: generation %d", a.Generation)
	}
	if b := get(t, st, "Widget", "b"); b.DeletionRequestedAt != nil {
		t.Error("the broken file's resource was marked for deletion")
	}
	src, err := st.GetSource(t.Context(), "infra")
	if err != nil {
		t.Fatal(err)
	}
	if src.LastAppliedRevision != good.Revision || src.LastAttemptedRevision != bad.Revision || src.Phase != store.SourceFailed ||
		len(src.Errors) != 2 || src.Errors[1].File != "c.yaml" || src.Errors[1].Line == 0 {
		t.Errorf("source after failure: applied %s attempted %s phase %s errors %+v", src.LastAppliedRevision, src.LastAttemptedRevision, src.Phase, src.Errors)
	}
	history, _ := st.ListSyncRecords(t.Context(), "infra", 10)
	if len(history) != 2 || history[0].Success || len(history[0].Errors) != 2 {
		t.Errorf("history after failure: %+v", history)
	}

	// The next good commit applies.
	files["b.yaml"] = widget("b", "{size: 3}")
	delete(files, "c.yaml")
	fixed := snapshot(files)
	res := mustSync(t, s, tg, fixed)
	if len(res.Plan.Updates) != 2 {
		t.Errorf("fix: %s", res.Plan.Summary())
	}
	src, _ = st.GetSource(t.Context(), "infra")
	if src.LastAppliedRevision != fixed.Revision || src.Phase != store.SourceReady || len(src.Errors) != 0 {
		t.Errorf("source after fix: %+v", src)
	}
}

func TestSyncOwnershipConflicts(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	mustSync(t, s, target("platform"), snapshot(map[string]string{"types.yaml": widgetType, "shared.yaml": widget("shared", "{size: 1}")}))

	// Another source may use the type, but not declare the same resource.
	_, err := s.Sync(t.Context(), target("team"), snapshot(map[string]string{
		"mine.yaml":  widget("mine", "{size: 2}"),
		"dupes.yaml": widget("other", "{size: 1}") + widget("shared", "{size: 9}"),
	}), false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonConflict || len(serr.Problems) != 1 {
		t.Fatalf("conflict: %v", err)
	}
	p := serr.Problems[0]
	if p.File != "dupes.yaml" || p.Line != 8 || !strings.Contains(p.Message, "Widget/shared is already declared by source platform (shared.yaml)") {
		t.Errorf("problem %+v does not name both places", p)
	}
	if r := get(t, st, "Widget", "shared"); r.Source.Name != "platform" || r.Generation != 1 {
		t.Errorf("the owner's resource changed: %+v gen %d", r.Source, r.Generation)
	}
	if _, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "mine"}); !errors.Is(err, store.ErrNotFound) {
		t.Error("a refused sync created resources")
	}

	// Declaring the other source's type is a conflict too.
	_, err = s.Sync(t.Context(), target("team"), snapshot(map[string]string{"types.yaml": widgetType}), false)
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonConflict || !strings.Contains(serr.Problems[0].Message, "ResourceType Widget is already declared by source platform") {
		t.Errorf("type conflict: %v", err)
	}

	// Using it without declaring it works.
	res := mustSync(t, s, target("team"), snapshot(map[string]string{"mine.yaml": widget("mine", "{size: 2}")}))
	if len(res.Plan.Creates) != 1 {
		t.Errorf("using another source's type: %s", res.Plan.Summary())
	}
}

func TestSyncPruneGuard(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	tg.Prune.MaxDeletes = &sync.MaxDeletes{Value: 25, Percent: true}
	files := map[string]string{"types.yaml": widgetType}
	for i := range 10 {
		files[fmt.Sprintf("w%d.yaml", i)] = widget(fmt.Sprintf("w%d", i), "{size: 1}")
	}
	mustSync(t, s, tg, snapshot(files))

	// An empty snapshot (every file gone, or a wrong path) is refused.
	empty := snapshot(map[string]string{"types.yaml": widgetType})
	_, err := s.Sync(t.Context(), tg, empty, false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonEmptySnapshot {
		t.Fatalf("empty snapshot: %v", err)
	}
	if src, _ := st.GetSource(t.Context(), "infra"); src.Phase != store.SourceStalled {
		t.Errorf("phase %s, want stalled", src.Phase)
	}

	// Deleting 3 of 10 (30%) is over 25%.
	for i := range 3 {
		delete(files, fmt.Sprintf("w%d.yaml", i))
	}
	thirty := snapshot(files)
	_, err = s.Sync(t.Context(), tg, thirty, false)
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonPruneLimitExceeded {
		t.Fatalf("30%% deletion: %v", err)
	}
	if !strings.Contains(serr.Message, "would delete 3 of 10 resources, over maxDeletes 25%") {
		t.Errorf("message %q", serr.Message)
	}
	live, _ := st.ListResources(t.Context(), store.ResourceFilter{Source: "infra"})
	for _, r := range live {
		if r.DeletionRequestedAt != nil {
			t.Fatalf("%s marked for deletion by a refused sync", r.Name)
		}
	}
	// A preview says the same and changes nothing.
	plan, err := s.Plan(t.Context(), tg, thirty)
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonPruneLimitExceeded || plan == nil || len(plan.Deletes) != 3 {
		t.Errorf("preview of the refused plan: %v %+v", err, plan)
	}

	// Approving another revision is refused and changes nothing; approving
	// this one lets it through.
	for _, rev := range []manifest.Revision{empty.Revision, "main@sha1:" + manifest.Revision(strings.Repeat("0", 40))} {
		err := s.Approve(t.Context(), "infra", rev)
		if !errors.As(err, &serr) || serr.Reason != sync.ReasonNotApprovable || !strings.Contains(serr.Message, "stalled on revision "+string(thirty.Revision)) {
			t.Fatalf("approving %s: %v", rev, err)
		}
	}
	if src, _ := st.GetSource(t.Context(), "infra"); src.ApprovedRevision != "" {
		t.Fatalf("a refused approval was recorded: %s", src.ApprovedRevision)
	}
	if _, err := s.Sync(t.Context(), tg, thirty, true); !errors.As(err, &serr) || serr.Reason != sync.ReasonPruneLimitExceeded {
		t.Fatalf("approval of another revision let it through: %v", err)
	}
	if err := s.Approve(t.Context(), "infra", thirty.Revision); err != nil {
		t.Fatal(err)
	}
	res, err := s.Sync(t.Context(), tg, thirty, true)
	if err != nil || len(res.Plan.Deletes) != 3 {
		t.Fatalf("approved: %v %+v", err, res)
	}
	// Two more deletions (2 of 7, under 25%) need no approval.
	delete(files, "w3.yaml")
	res = mustSync(t, s, tg, snapshot(files))
	if len(res.Plan.Deletes) != 1 {
		t.Errorf("small deletion: %s", res.Plan.Summary())
	}
	// A source that is not stalled has nothing to approve.
	if err := s.Approve(t.Context(), "infra", thirty.Revision); !errors.As(err, &serr) || serr.Reason != sync.ReasonNotApprovable ||
		!strings.Contains(serr.Message, "not stalled") {
		t.Errorf("approving on a ready source: %v", err)
	}
	if err := s.Approve(t.Context(), "nope", thirty.Revision); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("approving an unknown source: %v", err)
	}
}

func TestSyncTypeStillInUse(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	platform := target("platform")
	mustSync(t, s, platform, snapshot(map[string]string{"types.yaml": widgetType, "own.yaml": widget("own", "{size: 1}")}))
	mustSync(t, s, target("team"), snapshot(map[string]string{"w.yaml": widget("theirs", "{size: 1}")}))

	// Removing the type while another source's resource uses it is refused.
	_, err := s.Sync(t.Context(), platform, snapshot(map[string]string{"own.yaml": "# moved\n", "other.yaml": ""}), false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonTypeInUse ||
		!strings.Contains(serr.Message, "ResourceType Widget v1 was removed but 1 resource(s) still use it: Widget/theirs (source team)") {
		t.Fatalf("type in use: %v", err)
	}
	if _, err := st.GetResourceTypeByName(t.Context(), "Widget", "v1"); err != nil {
		t.Errorf("type removed by a refused sync: %v", err)
	}
}

func TestSyncRemovesTypeOnceUnused(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	tg.Prune.AllowEmpty = true
	mustSync(t, s, tg, snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")}))
	// The type and its last resource leave together: the resource is
	// destroyed first, so the type stays until then.
	res := mustSync(t, s, tg, snapshot(map[string]string{"README.yaml": ""}))
	if len(res.Plan.Deletes) != 1 {
		t.Fatalf("plan %s", res.Plan.Summary())
	}
	if _, err := st.GetResourceTypeByName(t.Context(), "Widget", "v1"); err != nil {
		t.Fatalf("type removed while its resource is being destroyed: %v", err)
	}
	if err := st.DeleteResources(t.Context(), []int64{get(t, st, "Widget", "a").ID}); err != nil {
		t.Fatal(err)
	}
	mustSync(t, s, tg, snapshot(map[string]string{"README.yaml": "# nothing\n"}))
	if _, err := st.GetResourceTypeByName(t.Context(), "Widget", "v1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unused type not removed: %v", err)
	}
}

func TestSyncNotifiesOnChange(t *testing.T) {
	t.Parallel()
	st, url := newStore(t)
	s := sync.New(st, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30e9)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+store.TopicResources); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")})
	mustSync(t, s, target("infra"), snap)
	n, err := conn.WaitForNotification(ctx)
	if err != nil || n.Payload != "infra" {
		t.Fatalf("notification %+v %v", n, err)
	}
}

func TestSyncConcurrentAgents(t *testing.T) {
	t.Parallel()
	st, url := newStore(t)
	// Two agents: two stores (pools) on one database, one Syncer each.
	other, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	agents := []*sync.Syncer{sync.New(st, nil), sync.New(other, nil)}
	snap := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}") + widget("b", "{size: 1}")})
	var wg gosync.WaitGroup
	results := make([]*sync.Result, len(agents))
	errs := make([]error, len(agents))
	for i, a := range agents {
		wg.Go(func() { results[i], errs[i] = a.Sync(t.Context(), target("infra"), snap, false) })
	}
	wg.Wait()
	applied := 0
	for i := range agents {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].Skipped {
			applied++
		}
	}
	history, _ := st.ListSyncRecords(t.Context(), "infra", 10)
	if applied != 1 || len(history) != 1 || get(t, st, "Widget", "a").Generation != 1 {
		t.Errorf("%d agents applied, %d history rows", applied, len(history))
	}
}

func TestPlanChangesNothing(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	mustSync(t, s, tg, snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")}))
	before, _ := st.GetSource(t.Context(), "infra")
	plan, err := s.Plan(t.Context(), tg, snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 2}") + widget("b", "{size: 2}")}))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Creates) != 1 || len(plan.Updates) != 1 || string(plan.Updates[0].Before) != `{"color":"grey","size":1}` {
		t.Errorf("plan %s %+v", plan.Summary(), plan.Updates)
	}
	after, _ := st.GetSource(t.Context(), "infra")
	if a := get(t, st, "Widget", "a"); a.Generation != 1 || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Error("planning changed the store")
	}
	if _, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "b"}); !errors.Is(err, store.ErrNotFound) {
		t.Error("planning created a resource")
	}
}

// TestSyncWarnsOfDeprecatedVersions syncs resources of a type version the
// source marks deprecated: they are applied, and the sync says so, naming
// the version and how many use it; another source's resources of that
// version are warned of too.
func TestSyncWarnsOfDeprecatedVersions(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	deprecated := strings.Replace(widgetType, "    - name: v1\n", "    - name: v1\n      deprecated: true\n", 1)
	res := mustSync(t, s, target("infra"), snapshot(map[string]string{"types.yaml": deprecated,
		"w.yaml": widget("a", "{size: 1}") + widget("b", "{size: 2}")}))
	want := "warning: resource type Widget version v1 is deprecated (used by 2 resource(s))"
	if !strings.Contains(res.Plan.Summary(), want) || len(res.Plan.Creates) != 2 {
		t.Errorf("plan %s; want two creates and %q", res.Plan.Summary(), want)
	}
	recs, err := st.ListSyncRecords(t.Context(), "infra", 1)
	if err != nil || len(recs) != 1 || !strings.Contains(recs[0].Message, want) {
		t.Errorf("sync record: %+v %v", recs, err)
	}
	if ty, err := st.GetResourceTypeByName(t.Context(), "Widget", "v1"); err != nil || !ty.Deprecated {
		t.Errorf("stored type: %+v %v", ty, err)
	}
	other := mustSync(t, s, target("apps"), snapshot(map[string]string{"w.yaml": widget("c", "{size: 3}")}))
	// Its count is of every user: infra's two and its own.
	if !strings.Contains(other.Plan.Summary(), "Widget version v1 is deprecated (used by 3 resource(s))") {
		t.Errorf("another source's plan: %s", other.Plan.Summary())
	}
	// A deprecated flag that is not a boolean is refused like any mistake.
	bad := strings.Replace(widgetType, "    - name: v1\n", "    - name: v1\n      deprecated: soon\n", 1)
	_, err = s.Sync(t.Context(), target("bad"), snapshot(map[string]string{"types.yaml": strings.Replace(bad, "Widget", "Gizmo", 1)}), false)
	if err == nil || !strings.Contains(err.Error(), "deprecated: must be true or false") {
		t.Errorf("a deprecated flag of soon: %v", err)
	}
}
