package sync_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// nsWidget is a Widget in namespace ns ("" names none).
func nsWidget(ns, name, spec string) string {
	meta := "name: " + name
	if ns != "" {
		meta += ", namespace: " + ns
	}
	return fmt.Sprintf("---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {%s}\nspec: %s\n", meta, spec)
}

// stored lists the stored Widgets as "namespace/name@generation", sorted.
func stored(t *testing.T, st store.Store) string {
	t.Helper()
	rs, err := st.ListResources(t.Context(), store.ResourceFilter{Kind: "Widget"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		s := fmt.Sprintf("%s/%s@%d", r.Namespace, r.Name, r.Generation)
		if r.DeletionRequestedAt != nil {
			s += "(deleting)"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestSyncNamespaces: two namespaces' same kind and name are synced,
// changed and deleted apart, by one source or two; a namespace owned by
// another source is a conflict only for the same namespace.
func TestSyncNamespaces(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			s := sync.New(st, nil)
			tg := target("infra")
			files := map[string]string{"types.yaml": widgetType,
				"a.yaml": nsWidget("team-a", "web", "{size: 1}") + nsWidget("team-b", "web", "{size: 2}") + nsWidget("", "web", "{size: 3}")}
			res := mustSync(t, s, tg, snapshot(files))
			if len(res.Plan.Creates) != 3 {
				t.Fatalf("first sync: %s", res.Plan.Summary())
			}
			var refs []string
			for _, c := range res.Plan.Creates {
				refs = append(refs, c.Ref().String())
			}
			if strings.Join(refs, " ") != "Widget/web Widget/team-a/web Widget/team-b/web" {
				t.Errorf("creates %v: want them in (kind, namespace, name) order, the default namespace written as before", refs)
			}
			if got := stored(t, st); got != "default/web@1 team-a/web@1 team-b/web@1" {
				t.Fatalf("stored %s", got)
			}
			// The same revision again, and a reordered file: nothing changes.
			files["a.yaml"] = nsWidget("team-b", "web", "{size: 2}") + nsWidget("", "web", "{size: 3}") + nsWidget("team-a", "web", "{size: 1}")
			if res := mustSync(t, s, tg, snapshot(files)); res.Plan.Changes() != 0 || res.Plan.Unchanged != 3 {
				t.Fatalf("reordered: %s", res.Plan.Summary())
			}
			// One changes: a new generation of that one.
			files["a.yaml"] = nsWidget("team-b", "web", "{size: 20}") + nsWidget("", "web", "{size: 3}") + nsWidget("team-a", "web", "{size: 1}")
			res = mustSync(t, s, tg, snapshot(files))
			if len(res.Plan.Updates) != 1 || res.Plan.Updates[0].Namespace != "team-b" || res.Plan.Unchanged != 2 {
				t.Fatalf("one changed: %s %+v", res.Plan.Summary(), res.Plan.Updates)
			}
			if got := stored(t, st); got != "default/web@1 team-a/web@1 team-b/web@2" {
				t.Fatalf("stored %s", got)
			}
			// One goes: only it is deleted.
			files["a.yaml"] = nsWidget("team-b", "web", "{size: 20}") + nsWidget("", "web", "{size: 3}")
			res = mustSync(t, s, tg, snapshot(files))
			if len(res.Plan.Deletes) != 1 || res.Plan.Deletes[0].Ref().String() != "Widget/team-a/web" {
				t.Fatalf("one removed: %s %+v", res.Plan.Summary(), res.Plan.Deletes)
			}
			if got := stored(t, st); got != "default/web@1 team-a/web@1(deleting) team-b/web@2" {
				t.Fatalf("stored %s", got)
			}

			// Another source may declare the name in another namespace, not
			// in one this source holds.
			other := target("other")
			mustSync(t, s, other, snapshot(map[string]string{"o.yaml": nsWidget("team-c", "web", "{size: 4}")}))
			_, err := s.Sync(t.Context(), other, snapshot(map[string]string{"o.yaml": nsWidget("team-b", "web", "{size: 4}")}), false)
			var serr *sync.Error
			if !errors.As(err, &serr) || serr.Reason != sync.ReasonConflict || !strings.Contains(serr.Message, "Widget/team-b/web") {
				t.Fatalf("another source declaring team-b/web: %v", err)
			}
		})
	}
}

// TestSyncPruneGuardCountsNamespaces: moving resources to another
// namespace destroys them in the one they leave, and the prune guard counts
// those.
func TestSyncPruneGuardCountsNamespaces(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := target("infra")
	tg.Prune.MaxDeletes = &sync.MaxDeletes{Value: 1}
	var decl strings.Builder
	for i := range 4 {
		decl.WriteString(nsWidget("", fmt.Sprint("w", i), "{size: 1}"))
	}
	files := map[string]string{"types.yaml": widgetType, "w.yaml": decl.String()}
	mustSync(t, s, tg, snapshot(files))
	// The same names in another namespace: four new resources, four gone.
	files["w.yaml"] = strings.ReplaceAll(decl.String(), "metadata: {name: w", "metadata: {namespace: moved, name: w")
	_, err := s.Sync(t.Context(), tg, snapshot(files), false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonPruneLimitExceeded || !strings.Contains(serr.Message, "would delete 4 of 4") {
		t.Fatalf("moving 4 resources with maxDeletes 1: %v", err)
	}
	if got := stored(t, st); got != "default/w0@1 default/w1@1 default/w2@1 default/w3@1" {
		t.Fatalf("a refused move changed the store: %s", got)
	}
}

// TestSyncDefaultNamespace: resources declared without a namespace go to
// the Syncer's default one; a cluster-scoped kind's go to none; changing
// the default namespace moves them (which is why the agent refuses to when
// the store holds resources in the recorded one).
func TestSyncDefaultNamespace(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	s.UseDefaultNamespace("platform")
	// As the agent does at start.
	if err := st.SetDefaultNamespace(t.Context(), "platform"); err != nil {
		t.Fatal(err)
	}
	tg := target("infra")
	zoneType := strings.NewReplacer("name: Widget", "name: Zone", "group: example.com", "group: example.com\n  scope: Cluster").Replace(widgetType)
	files := map[string]string{"types.yaml": widgetType + "---\n" + zoneType,
		"w.yaml": nsWidget("", "a", "{size: 1}") + nsWidget("ops", "b", "{size: 1}") +
			"---\napiVersion: example.com/v1\nkind: Zone\nmetadata: {name: example.com}\nspec: {size: 1}\n"}
	mustSync(t, s, tg, snapshot(files))
	if got := stored(t, st); got != "ops/b@1 platform/a@1" {
		t.Fatalf("stored %s", got)
	}
	z, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Zone", Name: "example.com"})
	if err != nil || z.Namespace != "" {
		t.Fatalf("the cluster-scoped zone: %v, %v", z, err)
	}
	types, err := st.ListResourceTypes(t.Context(), store.TypeFilter{Name: "Zone"})
	if err != nil || len(types) != 1 || types[0].Scope != manifest.ScopeCluster {
		t.Fatalf("Zone stored as %+v, %v", types, err)
	}
	// Zone cannot become namespaced while a zone exists.
	files["types.yaml"] = widgetType + "---\n" + strings.Replace(zoneType, "scope: Cluster", "scope: Namespaced", 1)
	files["w.yaml"] = strings.Replace(files["w.yaml"], "metadata: {name: example.com}", "metadata: {name: example.com, namespace: ops}", 1)
	_, err = s.Sync(t.Context(), tg, snapshot(files), true)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonScopeChange || len(serr.Problems) != 1 {
		t.Fatalf("changing Zone's scope with a zone in the store: %v", err)
	}
	if p := serr.Problems[0]; p.File != "types.yaml" || p.Line != 21 || !strings.Contains(p.Message,
		"spec.scope: ResourceType Zone cannot change its scope from Cluster to Namespaced while resources of it exist (Zone/example.com (source infra))") {
		t.Errorf("problem %s", p)
	}
	if z, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Zone", Name: "example.com"}); err != nil || z.Generation != 1 {
		t.Fatalf("the zone after a refused change of scope: %v, %v", z, err)
	}
}

// TestSyncRefusesAnotherDefaultNamespace: an agent started with another
// defaultNamespace records it while no resource is in the recorded one;
// an agent on the same store still running with the old one must then not
// sync, or the two would each destroy what the other placed in its own
// default namespace and create it again in theirs, over and over.
func TestSyncRefusesAnotherDefaultNamespace(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	running := sync.New(st, nil) // started earlier, with the default "default"
	restarted := sync.New(st, nil)
	restarted.UseDefaultNamespace("prod")
	if err := st.SetDefaultNamespace(t.Context(), "prod"); err != nil {
		t.Fatalf("recording prod over an empty store: %v", err)
	}
	tg := target("infra")
	files := map[string]string{"types.yaml": widgetType, "w.yaml": nsWidget("", "w", "{size: 1}")}
	var serr *sync.Error
	if _, err := running.Sync(t.Context(), tg, snapshot(files), false); !errors.As(err, &serr) || serr.Reason != sync.ReasonDefaultNamespace {
		t.Errorf("an agent whose default namespace is not the one the store records synced (%v): stored %s", err, stored(t, st))
	}
	mustSync(t, restarted, tg, snapshot(files))
	if got := stored(t, st); got != "prod/w@1" {
		t.Fatalf("stored %s, want prod/w@1 and nothing destroyed", got)
	}
}
