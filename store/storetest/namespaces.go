package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// inNamespace returns resource(name, spec) in namespace ns.
func inNamespace(ns, name, spec string) *manifest.Resource {
	r := resource(name, spec)
	r.Namespace = ns
	r.Origin.File = "widgets/" + ns + "/" + name + ".yaml"
	return r
}

// nsNames returns "namespace/name" of each resource, in order.
func nsNames(rs []*store.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Namespace + "/" + r.Name
	}
	return out
}

// testNamespaces: the same kind and name in two namespaces are two
// resources, each found, listed, owned, applied and deleted apart.
func testNamespaces(t *testing.T, s store.Store) {
	ctx := t.Context()
	teamA, teamB := gitSource("team-a", "a.yaml"), gitSource("team-b", "b.yaml")
	a := inNamespace("team-a", "web", `{"size":1}`)
	b := inNamespace("team-b", "web", `{"size":2}`)
	ra, err := s.CreateResource(ctx, a, teamA)
	if err != nil {
		t.Fatal(err)
	}
	checkDesired(t, ra, a, teamA)
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{b}, teamB); err != nil {
		t.Fatalf("the same kind and name in another namespace, another source: %v", err)
	}
	// The same namespace again is a conflict, whoever asks.
	_, err = s.CreateResource(ctx, inNamespace("team-a", "web", `{}`), teamB)
	wantErr(t, "CreateResource of an existing kind, namespace and name", err, store.ErrConflict)
	var oc *store.OwnerConflictError
	if _, _, err := s.ApplyResource(ctx, inNamespace("team-a", "web", `{}`), teamB); !errors.As(err, &oc) ||
		oc.Owner.Name != "team-a" || oc.What != "Widget/team-a/web" {
		t.Fatalf("ApplyResource of another source's resource: %v, want an owner conflict naming Widget/team-a/web", err)
	}
	// Cluster-scoped: no namespace, a third resource of the same name.
	cluster := resource("web", `{"size":3}`)
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{cluster}, teamA); err != nil {
		t.Fatal(err)
	}
	// A namespace that is not a DNS-1123 label is refused.
	_, err = s.CreateResource(ctx, inNamespace("Team_A", "web", `{}`), teamA)
	wantErr(t, "CreateResource in an invalid namespace", err, store.ErrInvalid)

	for _, tc := range []struct {
		ref  manifest.ObjectRef
		spec string
	}{
		{a.Ref(), `{"size":1}`},
		{b.Ref(), `{"size":2}`},
		{cluster.Ref(), `{"size":3}`},
	} {
		got, err := s.GetResourceByName(ctx, tc.ref)
		if err != nil || got.Ref() != tc.ref || string(got.Spec) != tc.spec {
			t.Fatalf("GetResourceByName(%s) = %v, %v", tc.ref, got, err)
		}
	}
	_, err = s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Namespace: "team-c", Name: "web"})
	wantErr(t, "GetResourceByName in a namespace without it", err, store.ErrNotFound)

	list := func(f store.ResourceFilter) []string {
		t.Helper()
		rs, err := s.ListResources(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got := nsNames(rs)
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		name string
		f    store.ResourceFilter
		want string
	}{
		{"all", store.ResourceFilter{}, "/web team-a/web team-b/web"},
		{"one namespace", store.ResourceFilter{Namespaces: []string{"team-b"}}, "team-b/web"},
		{"two namespaces", store.ResourceFilter{Namespaces: []string{"team-a", "team-b"}}, "team-a/web team-b/web"},
		{"cluster-scoped", store.ResourceFilter{Namespaces: []string{""}}, "/web"},
		{"no namespace at all", store.ResourceFilter{Namespaces: []string{}}, ""},
		{"a name in every namespace", store.ResourceFilter{Kind: "Widget", Name: "web"}, "/web team-a/web team-b/web"},
		{"a name not there", store.ResourceFilter{Name: "api"}, ""},
		{"refs", store.ResourceFilter{Refs: []manifest.ObjectRef{b.Ref(), cluster.Ref(), {Kind: "Widget", Namespace: "team-c", Name: "web"}}}, "/web team-b/web"},
		{"source and namespace", store.ResourceFilter{Source: "team-a", Namespaces: []string{"team-a"}}, "team-a/web"},
	} {
		if got := strings.Join(list(tc.f), " "); got != tc.want {
			t.Errorf("%s: listed %q, want %q", tc.name, got, tc.want)
		}
	}

	owners, err := s.Owners(ctx, []manifest.ObjectRef{a.Ref(), b.Ref(), cluster.Ref(), {Kind: "Widget", Namespace: "team-c", Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 3 || owners[a.Ref()].Name != "team-a" || owners[b.Ref()].Name != "team-b" || owners[cluster.Ref()].Name != "team-a" {
		t.Fatalf("owners %v", owners)
	}
	digests, err := s.ListResourceDigests(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, d := range digests {
		refs = append(refs, d.Ref().String())
	}
	slices.Sort(refs)
	if strings.Join(refs, " ") != "Widget/team-a/web Widget/web" {
		t.Fatalf("digests of team-a: %v", refs)
	}

	// A new spec for one is a new generation of that one only.
	if _, out, err := s.ApplyResource(ctx, inNamespace("team-b", "web", `{"size":20}`), teamB); err != nil || out != store.Updated {
		t.Fatalf("ApplyResource team-b/web: %v, %v", out, err)
	}
	if got, _ := s.GetResourceByName(ctx, a.Ref()); got.Generation != 1 {
		t.Errorf("team-a/web went to generation %d when team-b/web changed", got.Generation)
	}
	// Deleting one leaves the others.
	if err := s.DeleteResource(ctx, ra.ID); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(list(store.ResourceFilter{}), " "); got != "/web team-b/web" {
		t.Fatalf("after deleting team-a/web: %q", got)
	}
	// And its place may be taken again.
	if _, _, err := s.ApplyResource(ctx, inNamespace("team-a", "web", `{}`), teamB); err != nil {
		t.Fatalf("another source declares team-a/web once it is gone: %v", err)
	}
}

// testNamespaceDependencies: a dependency names the namespace of what it
// depends on; the same name elsewhere is another resource.
func testNamespaceDependencies(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "a.yaml")
	dbA := inNamespace("team-a", "db", `{}`)
	dbB := inNamespace("team-b", "db", `{}`)
	app := inNamespace("team-a", "app", `{}`)
	app.DependsOn = []manifest.ObjectRef{dbB.Ref()}
	// A cluster-scoped resource depending on one in a namespace.
	edge := resource("edge", `{}`)
	edge.DependsOn = []manifest.ObjectRef{{Kind: "Widget", Namespace: "team-a", Name: "app"}}
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{dbA, dbB, app, edge}, src); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetResourceByName(ctx, app.Ref()); err != nil || len(got.DependsOn) != 1 || got.DependsOn[0] != dbB.Ref() {
		t.Fatalf("app depends on %v, %v; want team-b/db", got.DependsOn, err)
	}
	dependents := func(ref manifest.ObjectRef) string {
		t.Helper()
		rs, err := s.ListResources(ctx, store.ResourceFilter{DependsOn: &ref})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(nsNames(rs), " ")
	}
	if got := dependents(dbB.Ref()); got != "team-a/app" {
		t.Errorf("dependents of team-b/db: %q", got)
	}
	if got := dependents(dbA.Ref()); got != "" {
		t.Errorf("dependents of team-a/db: %q, want none: app depends on team-b's", got)
	}
	if got := dependents(manifest.ObjectRef{Kind: "Widget", Name: "app"}); got != "" {
		t.Errorf("dependents of a cluster-scoped Widget/app: %q, want none", got)
	}
	if got := dependents(app.Ref()); got != "/edge" {
		t.Errorf("dependents of team-a/app: %q", got)
	}

	byName := map[string]*store.Claim{}
	for _, c := range claim(t, s, "a1", 4) {
		byName[c.Namespace+"/"+c.Name] = c
	}
	if len(byName) != 4 {
		t.Fatalf("claimed %v", byName)
	}
	complete(t, s, byName["team-a/app"], store.Completion{Status: store.StatusUpdate{Phase: manifest.PhasePending},
		Waiting: true, WaitForReady: app.DependsOn, Requeue: true, RequeueAfter: time.Hour})
	complete(t, s, byName["/edge"], store.Completion{Status: store.StatusUpdate{Phase: manifest.PhasePending},
		Waiting: true, WaitForReady: edge.DependsOn, Requeue: true, RequeueAfter: time.Hour})
	// team-a/db is not what app waits for.
	complete(t, s, byName["team-a/db"], ready(byName["team-a/db"], false))
	if cs := claim(t, s, "a1", 4); len(cs) != 0 {
		t.Fatalf("team-a/db ready woke %v; app waits for team-b/db", cs)
	}
	complete(t, s, byName["team-b/db"], ready(byName["team-b/db"], false))
	cs := claim(t, s, "a1", 4)
	if len(cs) != 1 || cs[0].Ref() != app.Ref() {
		t.Fatalf("team-b/db ready woke %v; want team-a/app", cs)
	}
	complete(t, s, cs[0], ready(cs[0], false))
	if cs := claim(t, s, "a1", 4); len(cs) != 1 || cs[0].Ref() != edge.Ref() {
		t.Fatalf("team-a/app ready woke %v; want the cluster-scoped edge", cs)
	}
}

// testNamespaceRecords: status events, history, notices and resource
// states name the namespace.
func testNamespaceRecords(t *testing.T, s store.Store) {
	ctx := t.Context()
	notes, err := s.Listen(ctx, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CreateResource(ctx, inNamespace("team-a", "web", `{}`), gitSource("infra", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextStatus(t, notes); ev.Namespace != "team-a" || ev.Name != "web" || ev.ID != r.ID {
		t.Fatalf("create: event %+v", ev)
	}
	cs := claim(t, s, "a1", 1)
	if len(cs) != 1 || cs[0].Namespace != "team-a" {
		t.Fatalf("claimed %v", cs)
	}
	if ev := nextStatus(t, notes); ev.Namespace != "team-a" || ev.Phase != manifest.PhaseReconciling {
		t.Fatalf("claim: event %+v", ev)
	}
	done := ready(cs[0], true)
	done.Record.Namespace = cs[0].Namespace
	done.Status.Phase = manifest.PhaseFailed
	complete(t, s, cs[0], done)
	if ev := nextStatus(t, notes); ev.Namespace != "team-a" || ev.Phase != manifest.PhaseFailed {
		t.Fatalf("complete: event %+v", ev)
	}
	if _, err := s.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: r.ID, Kind: "Widget", Namespace: "team-a", Name: "web",
		Generation: 1, Trigger: store.TriggerManual, Phase: "completed", Success: true, StartedAt: now(), FinishedAt: now()}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ListReconcileRecords(ctx, r.ID, 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("history %v, %v", recs, err)
	}
	for _, h := range recs {
		if h.Namespace != "team-a" {
			t.Errorf("history record %d in namespace %q, want team-a", h.ID, h.Namespace)
		}
	}
	notices, err := s.ListNotices(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(notices) != 1 || notices[0].Event != store.EventResourceFailed || notices[0].Namespace != "team-a" || notices[0].Name != "web" {
		t.Fatalf("notices %+v", notices)
	}
	states, err := s.ResourceStates(ctx, 10)
	if err != nil || len(states) != 1 || states[0].Namespace != "team-a" {
		t.Fatalf("resource states %+v, %v", states, err)
	}
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if ev := nextStatus(t, notes); ev.Namespace != "team-a" || !ev.Deleted {
		t.Fatalf("delete: event %+v", ev)
	}
}

// testDefaultNamespace: the store records its default namespace, and
// refuses to move it while resources are in it.
func testDefaultNamespace(t *testing.T, s store.Store) {
	ctx := t.Context()
	recorded := func() string {
		t.Helper()
		ns, err := s.DefaultNamespace(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	if got := recorded(); got != manifest.DefaultNamespace {
		t.Fatalf("a new store records %q, want %q", got, manifest.DefaultNamespace)
	}
	if err := s.SetDefaultNamespace(ctx, manifest.DefaultNamespace); err != nil {
		t.Fatalf("setting the recorded one: %v", err)
	}
	// Resources elsewhere do not hold it.
	if _, err := s.CreateResource(ctx, inNamespace("ops", "a", `{}`), gitSource("infra", "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateResource(ctx, resource("cluster", `{}`), gitSource("infra", "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDefaultNamespace(ctx, "platform"); err != nil {
		t.Fatalf("no resource in the recorded namespace: %v", err)
	}
	if got := recorded(); got != "platform" {
		t.Fatalf("recorded %q after setting platform", got)
	}
	r, err := s.CreateResource(ctx, inNamespace("platform", "b", `{}`), gitSource("infra", "b.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.SetDefaultNamespace(ctx, "ops")
	var dne *store.DefaultNamespaceError
	if !errors.As(err, &dne) || !errors.Is(err, store.ErrConflict) || dne.Recorded != "platform" || dne.Configured != "ops" || dne.Resources != 1 {
		t.Fatalf("moving the default namespace away from a resource: %v, want a DefaultNamespaceError", err)
	}
	for _, part := range []string{"destroy", "metadata.namespace", "defaultNamespace: platform"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("refusal %q does not say %q", err, part)
		}
	}
	if got := recorded(); got != "platform" {
		t.Fatalf("recorded %q after a refusal, want it unchanged", got)
	}
	wantErr(t, "an invalid default namespace", s.SetDefaultNamespace(ctx, "Ops"), store.ErrInvalid)
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDefaultNamespace(ctx, "ops"); err != nil || recorded() != "ops" {
		t.Fatalf("once the namespace is empty: %v, recorded %q", err, recorded())
	}
}

// testTypeScope: a type's scope is stored with it, the same for every
// version of its name, and changes only while no resource of it exists.
func testTypeScope(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := gitSource("infra", "types.yaml")
	v1 := widgetType("v1", "example.com", src)
	v1.Scope = manifest.ScopeCluster
	got, err := s.PutResourceType(ctx, v1)
	if err != nil || got.Scope != manifest.ScopeCluster {
		t.Fatalf("PutResourceType cluster-scoped: %v, %v", got, err)
	}
	// Without one, a type is namespaced: v2 makes the name namespaced,
	// v1 too, as no resource exists yet.
	v2 := widgetType("v2", "example.com", src)
	if got, err := s.PutResourceType(ctx, v2); err != nil || got.Scope != manifest.ScopeNamespaced {
		t.Fatalf("PutResourceType v2: %v, %v", got, err)
	}
	if got, err := s.GetResourceTypeByName(ctx, "Widget", "v1"); err != nil || got.Scope != manifest.ScopeNamespaced {
		t.Fatalf("v1 after v2 came namespaced: %v, %v", got, err)
	}
	if _, err := s.CreateResource(ctx, inNamespace("team-a", "web", `{}`), src); err != nil {
		t.Fatal(err)
	}
	v1.Scope = manifest.ScopeCluster
	_, err = s.PutResourceType(ctx, v1)
	var sce *store.ScopeChangeError
	if !errors.As(err, &sce) || !errors.Is(err, store.ErrConflict) || sce.From != manifest.ScopeNamespaced || sce.To != manifest.ScopeCluster ||
		sce.Resources != 1 || !strings.Contains(err.Error(), "identity") {
		t.Fatalf("a change of scope with a resource of the type: %v, want a ScopeChangeError", err)
	}
	types, err := s.ListResourceTypes(ctx, store.TypeFilter{Name: "Widget"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range types {
		if ty.Scope != manifest.ScopeNamespaced {
			t.Errorf("%s %s is %s after a refused change", ty.Name, ty.Version, ty.Scope)
		}
	}
	// The same scope again is no change.
	v1.Scope = manifest.ScopeNamespaced
	v1.Description = "again"
	if _, err := s.PutResourceType(ctx, v1); err != nil {
		t.Fatal(err)
	}
}
