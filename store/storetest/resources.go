package storetest

import (
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

func testCreateResource(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := resource("prod", `{"replicas":3,"tier":"gold"}`)
	r.Labels = map[string]string{"env": "prod", "team": "core"}
	r.Annotations = map[string]string{"note": "hand made"}
	r.Action = "custom"
	r.DependsOn = []manifest.ObjectRef{{Kind: "Network", Name: "main"}}
	r.Origin = manifest.Origin{File: "widgets/prod.yaml", Document: 2, Line: 17}
	src := gitSource("infra", "widgets/prod.yaml")

	got, err := s.CreateResource(ctx, r, src)
	if err != nil {
		t.Fatalf("CreateResource: %v", err)
	}
	if got.ID <= 0 {
		t.Errorf("ID = %d, want > 0", got.ID)
	}
	checkDesired(t, got, r, src)
	if got.Generation != 1 || got.ObservedGeneration != 0 || got.Phase != manifest.PhasePending {
		t.Errorf("generation %d, observed %d, phase %q; want 1, 0, pending", got.Generation, got.ObservedGeneration, got.Phase)
	}
	if got.StatusMessage != "" || len(got.Conditions) != 0 || got.Outputs != nil || got.RetryCount != 0 {
		t.Errorf("new resource has status: %q %v %s %d", got.StatusMessage, got.Conditions, got.Outputs, got.RetryCount)
	}
	if got.NextReconcileAt != nil || got.DeletionRequestedAt != nil || got.ReconcileRequestedAt != nil ||
		got.LastReconcileTime != nil || got.LeaseOwner != "" || got.LeaseExpiresAt != nil {
		t.Errorf("new resource has queue state: %+v", got)
	}
	checkUTC(t, "CreatedAt", got.CreatedAt)

	for _, read := range []struct {
		name string
		get  func() (*store.Resource, error)
	}{
		{"GetResource", func() (*store.Resource, error) { return s.GetResource(ctx, got.ID) }},
		{"GetResourceByName", func() (*store.Resource, error) {
			return s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "prod"})
		}},
	} {
		again, err := read.get()
		if err != nil {
			t.Fatalf("%s: %v", read.name, err)
		}
		if again.ID != got.ID || again.Generation != 1 {
			t.Errorf("%s = id %d gen %d, want id %d gen 1", read.name, again.ID, again.Generation, got.ID)
		}
		checkDesired(t, again, r, src)
	}

	dup := resource("prod", `{"replicas":1}`)
	_, err = s.CreateResource(ctx, dup, gitSource("infra", "widgets/dup.yaml"))
	wantErr(t, "CreateResource(duplicate kind and name)", err, store.ErrConflict)
	again, err := s.GetResource(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkDesired(t, again, r, src)

	// The same name under another kind is another resource.
	other := resource("prod", `{}`)
	other.Kind = "Gadget"
	if _, err := s.CreateResource(ctx, other, src); err != nil {
		t.Errorf("CreateResource(same name, other kind): %v", err)
	}
}

func testGetResourceNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.CreateResource(ctx, resource("a", `{}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetResource(ctx, r.ID+1)
	wantErr(t, "GetResource(missing)", err, store.ErrNotFound)
	_, err = s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "b"})
	wantErr(t, "GetResourceByName(missing name)", err, store.ErrNotFound)
	_, err = s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Gadget", Name: "a"})
	wantErr(t, "GetResourceByName(missing kind)", err, store.ErrNotFound)
}

func names(rs []*store.Resource) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

func testListResourcesFilters(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, bad := range []store.ResourceFilter{{Limit: -1}, {After: -1}, {Phase: "sleeping"}} {
		_, err := s.ListResources(ctx, bad)
		wantErr(t, fmt.Sprintf("ListResources(%+v)", bad), err, store.ErrInvalid)
	}
	type seed struct {
		kind, name, source string
		labels             map[string]string
		phase              manifest.Phase
	}
	seeds := []seed{
		{"Widget", "w1", "infra", map[string]string{"env": "prod", "team": "core"}, manifest.PhaseReady},
		{"Widget", "w2", "infra", map[string]string{"env": "dev"}, manifest.PhaseFailed},
		{"Gadget", "g1", "apps", map[string]string{"env": "prod"}, manifest.PhaseReady},
		{"Gadget", "g2", "apps", nil, ""},
		{"Widget", "w3", store.APISource, map[string]string{"env": "prod", "team": "edge"}, ""},
	}
	for _, sd := range seeds {
		r := resource(sd.name, `{"n":"`+sd.name+`"}`)
		r.Kind, r.Labels = sd.kind, sd.labels
		switch {
		case sd.kind == "Gadget":
			r.Action = "gadgets"
		case sd.name == "w2":
			r.Action = "exec" // a plugin's name, which runs its only instance
		}
		created, err := s.CreateResource(ctx, r, gitSource(sd.source, sd.name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if sd.phase != "" {
			if _, err := s.SetResourceStatus(ctx, created.ID, store.StatusUpdate{Phase: sd.phase}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		filter store.ResourceFilter
		want   []string
	}{
		{"all", store.ResourceFilter{}, []string{"Widget/w1", "Widget/w2", "Gadget/g1", "Gadget/g2", "Widget/w3"}},
		{"kind", store.ResourceFilter{Kind: "Gadget"}, []string{"Gadget/g1", "Gadget/g2"}},
		{"phase ready", store.ResourceFilter{Phase: manifest.PhaseReady}, []string{"Widget/w1", "Gadget/g1"}},
		{"phase pending", store.ResourceFilter{Phase: manifest.PhasePending}, []string{"Gadget/g2", "Widget/w3"}},
		{"phase deleting", store.ResourceFilter{Phase: manifest.PhaseDeleting}, nil},
		{"source", store.ResourceFilter{Source: "infra"}, []string{"Widget/w1", "Widget/w2"}},
		{"api source", store.ResourceFilter{Source: store.APISource}, []string{"Widget/w3"}},
		{"action", store.ResourceFilter{Action: "gadgets"}, []string{"Gadget/g1", "Gadget/g2"}},
		{"action and source", store.ResourceFilter{Action: "gadgets", Source: "infra"}, nil},
		{"actions", store.ResourceFilter{Action: "act", Actions: []string{"act", "exec"}}, []string{"Widget/w2"}},
		{"actions, either name", store.ResourceFilter{Actions: []string{"gadgets", "exec"}}, []string{"Widget/w2", "Gadget/g1", "Gadget/g2"}},
		{"actions, none", store.ResourceFilter{Action: "gadgets", Actions: []string{}}, nil},
		{"actions and kind", store.ResourceFilter{Kind: "Gadget", Actions: []string{"exec", "gadgets"}}, []string{"Gadget/g1", "Gadget/g2"}},
		{"one label", store.ResourceFilter{Labels: map[string]string{"env": "prod"}}, []string{"Widget/w1", "Gadget/g1", "Widget/w3"}},
		{"two labels", store.ResourceFilter{Labels: map[string]string{"env": "prod", "team": "core"}}, []string{"Widget/w1"}},
		{"label value differs", store.ResourceFilter{Labels: map[string]string{"env": "staging"}}, nil},
		{"label missing", store.ResourceFilter{Labels: map[string]string{"owner": "x"}}, nil},
		{"kind and label", store.ResourceFilter{Kind: "Widget", Labels: map[string]string{"env": "prod"}}, []string{"Widget/w1", "Widget/w3"}},
		{"kind, source and phase", store.ResourceFilter{Kind: "Widget", Source: "infra", Phase: manifest.PhaseFailed}, []string{"Widget/w2"}},
		{"limit", store.ResourceFilter{Kind: "Widget", Limit: 2}, []string{"Widget/w1", "Widget/w2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListResources(ctx, tt.filter)
			if err != nil {
				t.Fatalf("ListResources: %v", err)
			}
			if n := names(got); !equalStrings(n, tt.want) {
				t.Errorf("ListResources(%+v) = %v, want %v", tt.filter, n, tt.want)
			}
		})
	}
}

func testListResourcesPagination(t *testing.T, s store.Store) {
	ctx := t.Context()
	var all []int64
	for i := range 25 {
		r := resource(fmt.Sprintf("r%02d", i), fmt.Sprintf(`{"i":%d}`, i))
		if i%2 == 1 {
			r.Kind = "Gadget"
		}
		created, err := s.CreateResource(ctx, r, gitSource("infra", "all.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, created.ID)
	}
	pages := func(f store.ResourceFilter) (sizes []int, ids []int64) {
		t.Helper()
		for range 10 {
			page, err := s.ListResources(ctx, f)
			if err != nil {
				t.Fatalf("ListResources(%+v): %v", f, err)
			}
			sizes = append(sizes, len(page))
			if len(page) == 0 {
				return sizes, ids
			}
			for _, r := range page {
				if r.ID <= f.After {
					t.Errorf("page after %d holds ID %d", f.After, r.ID)
				}
				ids = append(ids, r.ID)
			}
			f.After = page[len(page)-1].ID
		}
		t.Fatalf("pagination did not end")
		return nil, nil
	}

	sizes, ids := pages(store.ResourceFilter{Limit: 10})
	if fmt.Sprint(sizes) != "[10 10 5 0]" {
		t.Errorf("page sizes = %v, want [10 10 5 0]", sizes)
	}
	if fmt.Sprint(ids) != fmt.Sprint(all) {
		t.Errorf("paged IDs = %v, want %v", ids, all)
	}
	if !sort.SliceIsSorted(ids, func(i, j int) bool { return ids[i] < ids[j] }) {
		t.Errorf("IDs not ascending: %v", ids)
	}

	sizes, ids = pages(store.ResourceFilter{Kind: "Gadget", Limit: 5})
	if fmt.Sprint(sizes) != "[5 5 2 0]" {
		t.Errorf("Gadget page sizes = %v, want [5 5 2 0]", sizes)
	}
	var gadgets []int64
	for i, id := range all {
		if i%2 == 1 {
			gadgets = append(gadgets, id)
		}
	}
	if fmt.Sprint(ids) != fmt.Sprint(gadgets) {
		t.Errorf("paged Gadget IDs = %v, want %v", ids, gadgets)
	}

	rest, err := s.ListResources(ctx, store.ResourceFilter{After: all[20]})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 4 || rest[0].ID != all[21] {
		t.Errorf("After %d without limit = %v, want the last 4", all[20], names(rest))
	}

	// Paging while resources come and go between pages: every resource
	// there throughout is listed exactly once, in ID order.
	f := store.ResourceFilter{Kind: "Widget", Limit: 4}
	seen := map[int64]int{}
	removed := map[int64]bool{}
	var widgets []int64
	for i, id := range all {
		if i%2 == 0 {
			widgets = append(widgets, id)
		}
	}
	for page := 0; ; page++ {
		if page > 20 {
			t.Fatal("pagination while writing did not end")
		}
		rows, err := s.ListResources(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if r.ID <= f.After {
				t.Errorf("page after %d holds ID %d", f.After, r.ID)
			}
			seen[r.ID]++
		}
		f.After = rows[len(rows)-1].ID
		// One listed and one not yet listed go; a new one comes, after
		// every page but the last few so that the walk ends.
		for _, pick := range []func(id int64) bool{
			func(id int64) bool { return seen[id] == 1 },
			func(id int64) bool { return seen[id] == 0 && id > f.After+1 },
		} {
			for _, id := range widgets {
				if !removed[id] && pick(id) {
					if err := s.DeleteResource(ctx, id); err != nil {
						t.Fatal(err)
					}
					removed[id] = true
					break
				}
			}
		}
		if page < 5 {
			created, err := s.CreateResource(ctx, resource(fmt.Sprintf("new%02d", page), `{}`), gitSource("infra", "all.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			widgets = append(widgets, created.ID)
		}
	}
	gone := 0
	for _, id := range widgets {
		switch {
		case seen[id] > 1:
			t.Errorf("resource %d listed %d times", id, seen[id])
		case seen[id] == 0 && !removed[id]:
			t.Errorf("resource %d, there throughout, never listed", id)
		case seen[id] == 0:
			gone++
		}
	}
	if gone == 0 || len(removed) < 4 {
		t.Errorf("%d removed, %d of them before their page: the walk did not test removals", len(removed), gone)
	}
}

func testApplyResourceOutcomes(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	base := resource("a", `{"size":1}`)
	base.Labels = map[string]string{"env": "dev"}

	relabeled := withSpec(base, `{"size":1}`)
	relabeled.Labels = map[string]string{"env": "prod"}
	relabeled.Annotations = map[string]string{"note": "moved"}
	relabeled.DependsOn = []manifest.ObjectRef{{Kind: "Network", Name: "main"}}

	resized := withSpec(relabeled, `{"size":2}`)
	rebound := withSpec(resized, `{"size":2}`)
	rebound.Action = "other-action"

	steps := []struct {
		name    string
		r       *manifest.Resource
		src     store.SourceRef
		outcome store.ApplyOutcome
		gen     int64
	}{
		{"create", base, src, store.Created, 1},
		{"same spec", base, src, store.Unchanged, 1},
		{"same spec, new labels and revision", relabeled, gitSource("infra", "widgets/moved.yaml"), store.Unchanged, 1},
		{"new spec", resized, src, store.Updated, 2},
		{"new action", rebound, src, store.Updated, 3},
		{"again", rebound, src, store.Unchanged, 3},
		{"action back to the type's", resized, src, store.Updated, 4},
	}
	var id int64
	for _, st := range steps {
		got, outcome, err := s.ApplyResource(ctx, st.r, st.src)
		if err != nil {
			t.Fatalf("%s: ApplyResource: %v", st.name, err)
		}
		if outcome != st.outcome || got.Generation != st.gen {
			t.Errorf("%s: outcome %q generation %d, want %q %d", st.name, outcome, got.Generation, st.outcome, st.gen)
		}
		if id == 0 {
			id = got.ID
		} else if got.ID != id {
			t.Errorf("%s: ID changed from %d to %d", st.name, id, got.ID)
		}
		if got.Phase != manifest.PhasePending {
			t.Errorf("%s: phase = %q, want pending", st.name, got.Phase)
		}
		checkDesired(t, got, st.r, st.src)
		stored, err := s.GetResource(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Generation != st.gen {
			t.Errorf("%s: stored generation %d, want %d", st.name, stored.Generation, st.gen)
		}
		checkDesired(t, stored, st.r, st.src)
	}
}

func testApplyResourceOwnerConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	owner := gitSource("infra", "widgets/a.yaml")
	r := resource("a", `{"size":1}`)
	r.Labels = map[string]string{"env": "prod"}
	if _, _, err := s.ApplyResource(ctx, r, owner); err != nil {
		t.Fatal(err)
	}
	for _, intruder := range []store.SourceRef{gitSource("team-b", "a.yaml"), {Name: store.APISource}} {
		other := withSpec(r, `{"size":99}`)
		other.Labels = map[string]string{"env": "hijacked"}
		_, _, err := s.ApplyResource(ctx, other, intruder)
		var oc *store.OwnerConflictError
		if !errors.As(err, &oc) {
			t.Fatalf("ApplyResource by %s: err = %v, want *store.OwnerConflictError", intruder.Name, err)
		}
		wantErr(t, "owner conflict", err, store.ErrConflict)
		if oc.Owner != owner {
			t.Errorf("Owner = %+v, want %+v", oc.Owner, owner)
		}
		got, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != 1 {
			t.Errorf("generation = %d after a refused apply, want 1", got.Generation)
		}
		checkDesired(t, got, r, owner)
	}
}

func testApplyResourceRevivesDeletion(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "widgets/a.yaml")
	r := resource("a", `{"size":1}`)
	created, _, err := s.ApplyResource(ctx, r, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetResourceStatus(ctx, created.ID, store.StatusUpdate{Phase: manifest.PhaseReady, ObservedGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	del, err := s.RequestDeletion(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if del.Phase != manifest.PhaseDeleting || del.DeletionRequestedAt == nil {
		t.Fatalf("after RequestDeletion: phase %q, deletion requested at %v", del.Phase, del.DeletionRequestedAt)
	}
	got, outcome, err := s.ApplyResource(ctx, r, src)
	if err != nil {
		t.Fatalf("ApplyResource after RequestDeletion: %v", err)
	}
	if outcome != store.Updated || got.Generation != 2 {
		t.Errorf("outcome %q generation %d, want updated 2", outcome, got.Generation)
	}
	if got.DeletionRequestedAt != nil || got.Phase != manifest.PhasePending {
		t.Errorf("revived resource: phase %q, deletion requested at %v; want pending, nil", got.Phase, got.DeletionRequestedAt)
	}
	if got.ObservedGeneration != 1 {
		t.Errorf("ObservedGeneration = %d, want 1 (status is not the apply's to change)", got.ObservedGeneration)
	}
}
