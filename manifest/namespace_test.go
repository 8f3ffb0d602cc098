package manifest

import (
	"strings"
	"testing"
)

// clusterType is a ResourceType whose resources take no namespace.
const clusterType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata:
  name: Zone
spec:
  group: dns.example.com
  scope: Cluster
  versions:
    - name: v1
      schema: {type: object}
`

// clusterCRD is a CRD of a cluster-scoped kind, as projects publish them.
const clusterCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterissuers.cert.example.com
spec:
  group: cert.example.com
  names: {kind: ClusterIssuer, plural: clusterissuers}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object}
`

func TestObjectRefString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ref  ObjectRef
		want string
	}{
		{ObjectRef{Kind: "Widget", Name: "a"}, "Widget/a"},
		{ObjectRef{Kind: "Widget", Namespace: "default", Name: "a"}, "Widget/a"},
		{ObjectRef{Kind: "Widget", Namespace: "team-a", Name: "a.b"}, "Widget/team-a/a.b"},
	} {
		if got := tc.ref.String(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.ref, got, tc.want)
		}
		back, err := ParseObjectRef(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		want := tc.ref
		if want.Namespace == "default" {
			want.Namespace = "" // written without it, read without it
		}
		if back != want {
			t.Errorf("ParseObjectRef(%q) = %#v, want %#v", tc.want, back, want)
		}
	}
	for _, bad := range []string{"Widget", "Widget/", "widget/a", "Widget/Team/a", "Widget/a/b/c", "Widget/a_b"} {
		if _, err := ParseObjectRef(bad); err == nil {
			t.Errorf("ParseObjectRef(%q) accepted", bad)
		}
	}
	// Sorted by kind, then namespace, then name.
	a := ObjectRef{Kind: "W", Namespace: "a", Name: "z"}
	b := ObjectRef{Kind: "W", Namespace: "b", Name: "a"}
	if a.Compare(b) >= 0 || b.Compare(a) <= 0 || a.Compare(a) != 0 {
		t.Error("refs do not compare by namespace before name")
	}
}

// TestNamespaces: a resource of a namespaced kind is in the namespace it
// names or else in the default one; two namespaces may hold the same kind
// and name; the same namespace may not.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	ok := "spec: {engine: postgres, storage_gb: 20}\n"
	res := func(meta string) string {
		return "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {" + meta + "}\n" + ok
	}
	set, ps := validateYAML(t, map[string]string{
		"t.yaml": dbType,
		"a.yaml": res("name: pg"),
		"b.yaml": res("name: pg, namespace: team-a"),
		"c.yaml": res("name: pg, namespace: team-b") + "---\n" + res("name: other, namespace: ''"),
	}, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	var got []string
	for _, r := range set.Resources {
		got = append(got, r.Namespace+"/"+r.Name)
	}
	if strings.Join(got, " ") != "default/other default/pg team-a/pg team-b/pg" {
		t.Errorf("resources %v: want them sorted by namespace, then name, each in its namespace", got)
	}

	_, ps = validateYAML(t, map[string]string{
		"t.yaml": dbType,
		"a.yaml": res("name: pg, namespace: team-a"),
		"b.yaml": res("name: pg, namespace: team-a"),
		"c.yaml": res("name: pg") + "---\n" + res("name: pg, namespace: default"),
	}, nil)
	var msgs []string
	for _, p := range ps {
		msgs = append(msgs, p.String())
	}
	want := []string{
		"b.yaml:3: metadata.name: duplicate resource DatabaseCluster/team-a/pg (first declared in a.yaml:1)",
		"c.yaml:8: metadata.name: duplicate resource DatabaseCluster/pg (first declared in c.yaml:1)",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}

	// Another default namespace.
	docs, _ := DecodeFile("a.yaml", []byte(dbType+"---\n"+res("name: pg")+"---\n"+res("name: pg, namespace: default")), DecodeOptions{})
	set, err := ValidateWith(docs, nil, UnknownFieldsStrict, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Resources) != 2 || set.Resources[0].Namespace != "default" || set.Resources[1].Namespace != "ops" {
		t.Errorf("with the default namespace ops: %+v", set.Resources)
	}
}

func TestNamespaceProblems(t *testing.T) {
	t.Parallel()
	ok := "spec: {engine: postgres, storage_gb: 20}\n"
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"not a label", map[string]string{"t.yaml": dbType,
			"r.yaml": "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: a\n  namespace: team.a\n" + ok},
			`r.yaml:5: metadata.namespace: Invalid value: "team.a": a lowercase RFC 1123 label must consist of`},
		{"too long", map[string]string{"t.yaml": dbType,
			"r.yaml": "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: a\n  namespace: " + strings.Repeat("n", 64) + "\n" + ok},
			`r.yaml:5: metadata.namespace: Invalid value: "` + strings.Repeat("n", 64) + `": must be no more than 63 characters`},
		{"not a string", map[string]string{"t.yaml": dbType,
			"r.yaml": "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: a\n  namespace: 7\n" + ok},
			`r.yaml:5: metadata.namespace: must be a string, not a number`},
		{"on a cluster-scoped kind", map[string]string{"t.yaml": clusterType,
			"r.yaml": "apiVersion: dns.example.com/v1\nkind: Zone\nmetadata:\n  name: example.com\n  namespace: team-a\nspec: {}\n"},
			`r.yaml:5: metadata.namespace: Invalid value: "team-a": Zone is cluster-scoped and takes no namespace`},
		{"default on a cluster-scoped kind", map[string]string{"t.yaml": clusterType,
			"r.yaml": "apiVersion: dns.example.com/v1\nkind: Zone\nmetadata:\n  name: example.com\n  namespace: default\nspec: {}\n"},
			`r.yaml:5: metadata.namespace: Invalid value: "default": Zone is cluster-scoped and takes no namespace`},
		{"on a cluster-scoped CRD's kind", map[string]string{"t.yaml": clusterCRD,
			"r.yaml": "apiVersion: cert.example.com/v1\nkind: ClusterIssuer\nmetadata: {name: ca, namespace: cert-manager}\nspec: {}\n"},
			`r.yaml:3: metadata.namespace: Invalid value: "cert-manager": ClusterIssuer is cluster-scoped and takes no namespace`},
		{"on a ResourceType", map[string]string{"t.yaml": strings.Replace(dbType, "  name: DatabaseCluster\n", "  name: DatabaseCluster\n  namespace: infra\n", 1)},
			`t.yaml:5: metadata.namespace: Invalid value: "infra": ResourceType is cluster-scoped and takes no namespace`},
		{"on a CRD", map[string]string{"t.yaml": strings.Replace(clusterCRD, "  name: clusterissuers.cert.example.com\n", "  name: clusterissuers.cert.example.com\n  namespace: cert-manager\n", 1)},
			`t.yaml:5: metadata.namespace: Invalid value: "cert-manager": CustomResourceDefinition is cluster-scoped and takes no namespace`},
		{"unknown scope", map[string]string{"t.yaml": strings.Replace(clusterType, "scope: Cluster", "scope: Global", 1)},
			`t.yaml:7: spec.scope: must be "Namespaced" (the default) or "Cluster", not "Global"`},
		{"unknown CRD scope", map[string]string{"t.yaml": strings.Replace(clusterCRD, "scope: Cluster", "scope: cluster", 1)},
			`t.yaml:8: spec.scope: must be "Namespaced" (the default) or "Cluster", not "cluster"`},
		{"dependency on a cluster-scoped kind with a namespace", map[string]string{"t.yaml": dbType + "---\n" + clusterType,
			"r.yaml": "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok +
				"dependsOn:\n  - {kind: Zone, name: example.com, namespace: default}\n"},
			`r.yaml:6: dependsOn[0].namespace: Invalid value: "default": Zone is cluster-scoped and takes no namespace`},
		{"dependency in an invalid namespace", map[string]string{"t.yaml": dbType,
			"r.yaml": "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok +
				"dependsOn:\n  - {kind: DatabaseCluster, name: b, namespace: Team}\n"},
			`r.yaml:6: dependsOn[0].namespace: Invalid value: "Team": a lowercase RFC 1123 label`},
		{"dependency on itself through its namespace", map[string]string{"t.yaml": dbType,
			"r.yaml": "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a, namespace: ops}\n" + ok +
				"dependsOn:\n  - {kind: DatabaseCluster, name: a}\n"},
			`r.yaml:6: dependsOn[0]: a resource cannot depend on itself`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, tt.files, nil)
			var msgs []string
			for _, p := range ps {
				msgs = append(msgs, p.String())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tt.want) {
				t.Errorf("problems\n%s\nwant one that starts\n%s", strings.Join(msgs, "\n"), tt.want)
			}
		})
	}
}

// TestScope: a type's scope is Namespaced unless it says Cluster, in a
// ResourceType or a CRD; a cluster-scoped kind's resources have no
// namespace.
func TestScope(t *testing.T) {
	t.Parallel()
	set, ps := validateYAML(t, map[string]string{
		"t.yaml": dbType + "---\n" + clusterType + "---\n" + clusterCRD,
		"r.yaml": "apiVersion: dns.example.com/v1\nkind: Zone\nmetadata: {name: example.com}\nspec: {}\n---\n" +
			"apiVersion: cert.example.com/v1\nkind: ClusterIssuer\nmetadata: {name: ca, namespace: ''}\nspec: {}\n",
	}, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	scopes := map[string]Scope{}
	for _, ty := range set.Types {
		scopes[ty.Name] = ty.Scope
	}
	if scopes["DatabaseCluster"] != ScopeNamespaced || scopes["Zone"] != ScopeCluster || scopes["ClusterIssuer"] != ScopeCluster {
		t.Errorf("scopes %v", scopes)
	}
	for _, r := range set.Resources {
		if r.Namespace != "" {
			t.Errorf("%s of a cluster-scoped kind is in namespace %q", r.Name, r.Namespace)
		}
	}
	// The scope is part of the type's fingerprint: resources are validated
	// again when it changes.
	var fps []string
	for _, scope := range []string{"", "  scope: Namespaced\n", "  scope: Cluster\n"} {
		docs, _ := DecodeFile("t.yaml", []byte(strings.Replace(dbType, "spec:\n", "spec:\n"+scope, 1)), DecodeOptions{})
		set, err := Validate(docs, nil)
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, set.Types[0].Fingerprint())
	}
	if fps[0] != fps[1] || fps[1] == fps[2] {
		t.Errorf("fingerprints %v: the default scope and Namespaced alike, Cluster apart", fps)
	}
}

// TestDependsOnNamespaces: a dependency names its namespace, or is in its
// dependent's, or has none when its kind is cluster-scoped; a
// cluster-scoped dependent's dependencies are in the default namespace.
func TestDependsOnNamespaces(t *testing.T) {
	t.Parallel()
	ok := "spec: {engine: postgres, storage_gb: 20}\n"
	set, ps := validateYAML(t, map[string]string{
		"t.yaml": dbType + "---\n" + clusterType,
		"a.yaml": "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a, namespace: ops}\n" + ok +
			"dependsOn:\n  - {kind: DatabaseCluster, name: b}\n  - {kind: DatabaseCluster, name: b, namespace: shared}\n" +
			"  - {kind: Zone, name: example.com}\n  - {kind: Network, name: vpc}\n",
		"z.yaml": "apiVersion: dns.example.com/v1\nkind: Zone\nmetadata: {name: example.com}\nspec: {}\n" +
			"dependsOn:\n  - {kind: DatabaseCluster, name: b}\n  - {kind: DatabaseCluster, name: b, namespace: ops}\n",
	}, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	got := map[string][]string{}
	for _, r := range set.Resources {
		for _, d := range r.DependsOn {
			got[r.Name] = append(got[r.Name], d.Kind+"/"+d.Namespace+"/"+d.Name)
		}
	}
	want := map[string]string{
		"a":           "DatabaseCluster/ops/b DatabaseCluster/shared/b Zone//example.com Network/ops/vpc",
		"example.com": "DatabaseCluster/default/b DatabaseCluster/ops/b",
	}
	for name, w := range want {
		if g := strings.Join(got[name], " "); g != w {
			t.Errorf("%s depends on %s, want %s", name, g, w)
		}
	}
}

// TestValidatorNamespaceChanges: a Validator validates a file again when
// the scope of a kind it uses changes, also a kind it only depends on, or
// when its default namespace changes.
func TestValidatorNamespaceChanges(t *testing.T) {
	t.Parallel()
	zone := func(scope string) string { return strings.Replace(clusterType, "scope: Cluster", "scope: "+scope, 1) }
	res := "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\nspec: {engine: postgres, storage_gb: 20}\n" +
		"dependsOn:\n  - {kind: Zone, name: example.com}\n"
	tree := map[string]string{"t.yaml": dbType + "---\n" + zone("Cluster"), "a.yaml": res}
	var v Validator
	check := func(wantNS, wantDep string) {
		t.Helper()
		set, err := v.ValidateFiles(files(tree), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := byName(set)["a"]
		if r.Namespace != wantNS || r.DependsOn[0].Namespace != wantDep {
			t.Errorf("a in %q depends on Zone in %q, want %q and %q", r.Namespace, r.DependsOn[0].Namespace, wantNS, wantDep)
		}
	}
	check("default", "")
	tree["t.yaml"] = dbType + "---\n" + zone("Namespaced")
	check("default", "default")
	v.DefaultNamespace = "ops"
	check("ops", "ops")
}
