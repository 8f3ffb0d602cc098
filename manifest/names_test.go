package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Messages an API server gives for invalid names (k8s.io/apimachinery's
// IsDNS1123Label and IsDNS1123Subdomain, under field.Invalid).
const (
	wantLabelRule     = `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`
	wantSubdomainRule = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
)

// labelDBType is dbType asking for label names.
var labelDBType = strings.Replace(dbType, "  driftInterval: 30m\n", "  driftInterval: 30m\n  nameFormat: label\n", 1)

// labelWidgetCRD is widgetCRD asking for label names, as a CRD can: with
// the annotation.
var labelWidgetCRD = strings.Replace(widgetCRD, "    no8s.io/drift-interval: 2h\n", "    no8s.io/drift-interval: 2h\n    no8s.io/name-format: label\n", 1)

// TestNameFormats: names are DNS-1123 subdomains unless the type asks for
// labels, for ResourceTypes and CRDs alike, refused with the API server's
// words; no name that could climb out of a folder or split a path is
// valid under either rule.
func TestNameFormats(t *testing.T) {
	t.Parallel()
	if labelDBType == dbType || labelWidgetCRD == widgetCRD {
		t.Fatal("the label variants of the types are not")
	}
	long := func(n int) string { // n characters: labels of 62 letters between dots
		s := strings.Repeat(strings.Repeat("a", 62)+".", n/63+1)[:n]
		if strings.HasSuffix(s, ".") {
			s = s[:n-1] + "b"
		}
		return s
	}
	invalid := func(name, rule string) string {
		return "metadata.name: Invalid value: " + strconv.Quote(name) + ": " + rule
	}
	types := map[string]struct{ typ, resource string }{
		"type":           {dbType, "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: %s\nspec: {engine: postgres, storage_gb: 20}\n"},
		"label type":     {labelDBType, "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: %s\nspec: {engine: postgres, storage_gb: 20}\n"},
		"CRD":            {widgetCRD, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: %s\nspec: {size: 2}\n"},
		"label-only CRD": {labelWidgetCRD, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: %s\nspec: {size: 2}\n"},
	}
	tests := []struct {
		typ, name string
		want      []string // nil: valid
	}{
		{"type", "xnopresources.nop.example.org", nil},
		{"CRD", "xnopresources.nop.example.org", nil},
		{"type", "web-1", nil},
		{"label type", "web-1", nil},
		{"label-only CRD", "web-1", nil},
		{"type", long(253), nil},
		{"type", long(254), []string{invalid(long(254), "must be no more than 253 characters")}},
		{"type", strings.Repeat("a", 64), nil},
		{"label type", strings.Repeat("a", 63), nil},
		{"label type", strings.Repeat("a", 64), []string{invalid(strings.Repeat("a", 64), "must be no more than 63 characters")}},
		{"label type", "xnopresources.nop.example.org", []string{invalid("xnopresources.nop.example.org", wantLabelRule)}},
		{"label-only CRD", "a.b", []string{invalid("a.b", wantLabelRule)}},
		{"label type", long(300), []string{invalid(long(300), "must be no more than 253 characters")}},
		{"type", "Web_1", []string{invalid("Web_1", wantSubdomainRule)}},
		{"label type", "Web_1", []string{invalid("Web_1", wantSubdomainRule)}},
		// Names that would be dangerous in a path, a URL or a key.
		{"type", "..", []string{invalid("..", wantSubdomainRule)}},
		{"type", ".", []string{invalid(".", wantSubdomainRule)}},
		{"type", "a..b", []string{invalid("a..b", wantSubdomainRule)}},
		{"CRD", ".hidden", []string{invalid(".hidden", wantSubdomainRule)}},
		{"CRD", "a.", []string{invalid("a.", wantSubdomainRule)}},
		{"type", "a/b", []string{invalid("a/b", wantSubdomainRule)}},
		{"type", "../../etc", []string{invalid("../../etc", wantSubdomainRule)}},
		{"type", "a.b/..", []string{invalid("a.b/..", wantSubdomainRule)}},
		{"type", `a\b`, []string{invalid(`a\b`, wantSubdomainRule)}},
		{"type", "a.-b", []string{invalid("a.-b", wantSubdomainRule)}},
		{"type", "a-.b", []string{invalid("a-.b", wantSubdomainRule)}},
		{"type", "a b", []string{invalid("a b", wantSubdomainRule)}},
		{"type", "a\nb", []string{invalid("a\nb", wantSubdomainRule)}},
		{"type", "a%2fb", []string{invalid("a%2fb", wantSubdomainRule)}},
		{"type", "ä.example.org", []string{invalid("ä.example.org", wantSubdomainRule)}},
		{"type", long(254) + "_", []string{invalid(long(254)+"_", "must be no more than 253 characters"), invalid(long(254)+"_", wantSubdomainRule)}},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+strconv.Quote(tt.name), func(t *testing.T) {
			t.Parallel()
			ty := types[tt.typ]
			if ty.typ == "" {
				t.Fatalf("no type %q", tt.typ)
			}
			set, ps := validateYAML(t, map[string]string{"t.yaml": ty.typ, "r.yaml": fmt.Sprintf(ty.resource, strconv.Quote(tt.name))}, nil)
			var got []string
			for _, p := range ps {
				if p.File != "r.yaml" || p.Line != 4 || p.Pointer != "/metadata/name" {
					t.Errorf("problem not at r.yaml:4 metadata.name: %+v", p)
				}
				got = append(got, EscapeControl(p.Message))
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, EscapeControl(w))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("problems\n %q\nwant\n %q", got, want)
			}
			if tt.want == nil && (len(set.Resources) != 1 || set.Resources[0].Name != tt.name) {
				t.Errorf("resources %+v", set.Resources)
			}
			if tt.want != nil && ValidName(tt.name) && !strings.HasPrefix(tt.typ, "label") {
				t.Errorf("ValidName(%q) = true", tt.name)
			}
		})
	}
	// dependsOn takes the names of any type: subdomains.
	dep := "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\nspec: {engine: postgres, storage_gb: 20}\n" +
		"dependsOn: [{kind: Composition, name: xnopresources.nop.example.org}]\n"
	set, ps := validateYAML(t, map[string]string{"t.yaml": dbType, "r.yaml": dep}, nil)
	if len(ps) > 0 || set.Resources[0].DependsOn[0].Name != "xnopresources.nop.example.org" {
		t.Errorf("a dotted dependency: %v", ps)
	}
}

// TestNameFormatSetting: how a type asks for label names, what it may not
// write, and that the type records it where the store keeps it.
func TestNameFormatSetting(t *testing.T) {
	t.Parallel()
	withAnnotation := func(typ, value string) string {
		return strings.Replace(typ, "metadata:\n  name: DatabaseCluster\n", "metadata:\n  name: DatabaseCluster\n  annotations: {no8s.io/name-format: "+value+"}\n", 1)
	}
	tests := []struct {
		name, file, typ string
		format          NameFormat
		want            string // a problem; empty: valid
	}{
		{"default", "t.yaml", dbType, NameSubdomain, ""},
		{"label", "t.yaml", labelDBType, NameLabel, ""},
		{"subdomain written", "t.yaml", strings.Replace(dbType, "  driftInterval: 30m\n", "  driftInterval: 30m\n  nameFormat: subdomain\n", 1), NameSubdomain, ""},
		{"annotation on a ResourceType", "t.yaml", withAnnotation(dbType, "label"), NameLabel, ""},
		{"field and annotation agree", "t.yaml", withAnnotation(labelDBType, "label"), NameLabel, ""},
		{"field and annotation differ", "t.yaml", withAnnotation(labelDBType, "subdomain"), "",
			`t.yaml:10: spec.nameFormat: "label", but the annotation no8s.io/name-format says "subdomain": write one of them`},
		{"unknown format", "t.yaml", strings.Replace(labelDBType, "nameFormat: label", "nameFormat: dns", 1), "",
			`t.yaml:9: spec.nameFormat: must be "label" (DNS-1123 label: no dots, at most 63 characters) or "subdomain" (DNS-1123 subdomain, the default), not "dns"`},
		{"format not a string", "t.yaml", strings.Replace(labelDBType, "nameFormat: label", "nameFormat: 63", 1), "",
			`t.yaml:9: spec.nameFormat: must be "label" (DNS-1123 label: no dots, at most 63 characters) or "subdomain" (DNS-1123 subdomain, the default), not a number`},
		{"CRD default", "crd.yaml", widgetCRD, NameSubdomain, ""},
		{"CRD label", "crd.yaml", labelWidgetCRD, NameLabel, ""},
		{"CRD unknown format", "crd.yaml", strings.Replace(labelWidgetCRD, "name-format: label", "name-format: short", 1), "",
			`crd.yaml:9: metadata.annotations.no8s.io/name-format: must be "label" or "subdomain", not "short"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, ps := validateYAML(t, map[string]string{tt.file: tt.typ}, nil)
			if tt.want != "" {
				if len(ps) != 1 || ps[0].String() != tt.want {
					t.Fatalf("problems %q, want %q", ps, tt.want)
				}
				return
			}
			if len(ps) > 0 {
				t.Fatalf("problems: %v", ps)
			}
			ty := set.Types[0]
			if ty.NameFormat != tt.format || NameFormatOf(ty.Annotations) != tt.format {
				t.Errorf("format %q, recorded in annotations as %q (%v), want %q", ty.NameFormat, NameFormatOf(ty.Annotations), ty.Annotations, tt.format)
			}
		})
	}
}

// TestLabelFormatHeldAcrossSources: a type read back from the store (its
// annotations are all that say its format) holds another source's
// resources to label names, and its fingerprint tells the formats apart,
// so that cached resources are judged again when the format changes.
func TestLabelFormatHeldAcrossSources(t *testing.T) {
	t.Parallel()
	stored := func(typ string) *ResourceType {
		t.Helper()
		set, ps := validateYAML(t, map[string]string{"t.yaml": typ}, nil)
		if len(ps) > 0 {
			t.Fatal(ps)
		}
		// What the store keeps of a type: no format but its annotations.
		from := set.Types[0]
		ty := &ResourceType{Name: from.Name, Group: from.Group, Action: from.Action, Annotations: from.Annotations,
			NameFormat: NameFormatOf(from.Annotations)}
		for _, v := range from.Versions {
			ty.Versions = append(ty.Versions, TypeVersion{Name: v.Name, Schema: v.Schema})
		}
		if err := ty.Compile(); err != nil {
			t.Fatal(err)
		}
		return ty
	}
	label, subdomain := stored(labelDBType), stored(dbType)
	if label.Fingerprint() == subdomain.Fingerprint() {
		t.Error("the formats share a fingerprint")
	}
	res := map[string]string{"r.yaml": dbResource("db.example.org", "  engine: postgres\n  storage_gb: 20\n")}
	if _, ps := validateYAML(t, res, func(string) *ResourceType { return subdomain }); len(ps) > 0 {
		t.Errorf("a dotted name of a subdomain type from another source: %v", ps)
	}
	_, ps := validateYAML(t, res, func(string) *ResourceType { return label })
	if len(ps) != 1 || ps[0].Message != `metadata.name: Invalid value: "db.example.org": `+wantLabelRule {
		t.Errorf("a dotted name of a label type from another source: %q", ps)
	}
}

// TestGeneratorMetadata: the metadata a server sets, as generators write
// it, is accepted and ignored, with one warning per file, through a
// Validator's cache too; null says nothing and is not warned of.
func TestGeneratorMetadata(t *testing.T) {
	t.Parallel()
	generated := func(name string) string {
		return "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: " + name + "\n" +
			"  creationTimestamp: \"2025-03-01T10:00:00Z\"\n  uid: 7c0b7e0e-6a3b-4a8f-9d5e-0c1f2a3b4c5d\n  resourceVersion: \"4711\"\n" +
			"  generation: 3\n  managedFields:\n  - manager: kubectl\n    operation: Update\n" +
			"spec: {engine: postgres, storage_gb: 20}\n"
	}
	plain := func(name string) string {
		return "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: " + name + "\nspec: {engine: postgres, storage_gb: 20}\n"
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"none", map[string]string{"a.yaml": plain("a")}, nil},
		{"two documents of one file", map[string]string{"a.yaml": generated("a") + "---\n" + generated("b")},
			[]string{"a.yaml:5: metadata.creationTimestamp, metadata.uid, metadata.resourceVersion, metadata.generation, metadata.managedFields ignored (in 2 documents): a server sets them, and a manifest need not carry them"}},
		{"one field in a later document", map[string]string{"a.yaml": plain("a") + "---\n" + strings.Replace(plain("b"), "  name: b\n", "  name: b\n  uid: x\n", 1)},
			[]string{"a.yaml:11: metadata.uid ignored: a server sets them, and a manifest need not carry them"}},
		{"one warning per file", map[string]string{"a.yaml": generated("a"), "b.yaml": generated("b"), "c.yaml": plain("c")},
			[]string{"a.yaml:5: metadata.creationTimestamp", "b.yaml:5: metadata.creationTimestamp"}},
		{"null is not warned of", map[string]string{"a.yaml": strings.Replace(plain("a"), "  name: a\n", "  name: a\n  creationTimestamp: null\n", 1)}, nil},
		{"a published CRD", map[string]string{"crd.yaml": widgetCRD}, nil},
		{"generation alone", map[string]string{"a.yaml": strings.Replace(plain("a"), "  name: a\n", "  name: a\n  generation: 2\n", 1)},
			[]string{"a.yaml:5: metadata.generation ignored"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var files []File
			for _, name := range slices.Sorted(maps.Keys(tt.files)) {
				files = append(files, File{Path: name, Data: []byte(tt.files[name]), Hash: name + tt.files[name]})
			}
			files = append([]File{{Path: "0-type.yaml", Data: []byte(dbType), Hash: "t"}}, files...)
			v := &Validator{}
			for call := range 2 { // the second from the cache
				set, err := v.ValidateFiles(files, nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, w := range set.Warnings {
					got = append(got, w.String())
				}
				if len(got) != len(tt.want) {
					t.Fatalf("call %d: warnings %q, want %q", call, got, tt.want)
				}
				for i := range got {
					if !strings.HasPrefix(got[i], tt.want[i]) {
						t.Errorf("call %d: warning %q, want %q", call, got[i], tt.want[i])
					}
				}
				// Ignored: the resources are those declared without them.
				for _, r := range set.Resources {
					clean, ps := validateYAML(t, map[string]string{"t.yaml": dbType, r.Origin.File: plain(r.Name)}, nil)
					if len(ps) > 0 {
						t.Fatal(ps)
					}
					var twin *Resource
					for _, c := range clean.Resources {
						if c.Name == r.Name {
							twin = c
						}
					}
					if twin == nil || r.SpecHash != twin.SpecHash || string(r.Spec) != string(twin.Spec) || len(r.Labels)+len(r.Annotations) != 0 {
						t.Errorf("%s: spec %s (%s), want %s", r.Name, r.Spec, r.SpecHash, twin.Spec)
					}
				}
			}
		})
	}
	// Validate, on decoded documents, warns the same way.
	set, ps := validateYAML(t, map[string]string{"t.yaml": dbType, "a.yaml": generated("a")}, nil)
	if len(ps) > 0 || len(set.Warnings) != 1 || set.Warnings[0].File != "a.yaml" || set.Warnings[0].Line != 5 {
		t.Errorf("Validate: warnings %v, problems %v", set.Warnings, ps)
	}
	if !json.Valid(set.Resources[0].Spec) {
		t.Errorf("spec %s", set.Resources[0].Spec)
	}
}
