package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// widgetCRD is a CRD as controller-gen writes one: creationTimestamp: null,
// a storage version, an unserved old version, printer columns and status.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
  creationTimestamp: null
  annotations:
    no8s.io/action: make-widget
    no8s.io/drift-interval: 2h
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object}
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns: [{name: Size, type: integer, jsonPath: .spec.size}]
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        description: |-
          Widget is a thing.
          It has a size.
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              colour: {type: string, default: blue}
              parts:
                type: array
                items:
                  type: object
                  properties:
                    name: {type: string}
                    count: {type: integer, default: 1}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
status:
  acceptedNames: {kind: "", plural: ""}
  conditions: null
  storedVersions: null
`

func TestCRDAsType(t *testing.T) {
	t.Parallel()
	res := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 2, parts: [{name: a}]}\n"
	set, ps := validateYAML(t, map[string]string{"crd.yaml": widgetCRD, "w.yaml": res}, nil)
	if len(ps) > 0 {
		t.Fatalf("problems: %v", ps)
	}
	if len(set.Types) != 1 {
		t.Fatalf("types: %+v", set.Types)
	}
	typ := set.Types[0]
	if typ.Name != "Widget" || typ.Group != "example.com" || typ.Action != "make-widget" || typ.DriftInterval != 2*time.Hour ||
		typ.Description != "Widget is a thing." || len(typ.Versions) != 1 || typ.Versions[0].Name != "v1" {
		t.Errorf("type: %+v", typ)
	}
	if got := string(set.Resources[0].Spec); got != `{"colour":"blue","parts":[{"count":1,"name":"a"}],"size":2}` {
		t.Errorf("spec with the CRD's defaults: %s", got)
	}
	if got := string(typ.Versions[0].Schema); strings.Contains(got, "status") || !strings.Contains(got, `"size"`) {
		t.Errorf("the version's schema is the spec's: %s", got)
	}
}

func TestCRDProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, from, to, want string
	}{
		{"name not plural.group", "name: widgets.example.com", "name: widget.example.com", `metadata.name: must be "widgets.example.com"`},
		{"no kind", "kind: Widget, listKind", "listKind", "spec.names.kind: required field is missing"},
		{"group without a dot", "group: example.com", "group: example", "spec.group: invalid group"},
		{"two storage versions", "served: false\n    storage: false", "served: false\n    storage: true", "exactly one version must have storage: true, not 2"},
		{"no schema", "    schema:\n      openAPIV3Schema:\n        description", "    x:\n      openAPIV3Schema:\n        description", "spec.versions[1].x: unknown field"},
		{"bad schema", "size: {type: integer, minimum: 1}", "size: {type: integer, minimum: one}", "spec.versions[1].schema.openAPIV3Schema.properties.spec.properties.size.minimum"},
		{"bad default", "colour: {type: string, default: blue}", "colour: {type: string, default: 7}", "default is invalid"},
		{"CEL syntax error", "size: {type: integer, minimum: 1}", "size: {type: integer, minimum: 1, x-kubernetes-validations: [{rule: 'self >', message: m}]}",
			"properties.size.x-kubernetes-validations[0].rule"},
		{"transition rule on a list item", "name: {type: string}", "name: {type: string, x-kubernetes-validations: [{rule: 'self == oldSelf'}]}",
			"oldSelf"},
		{"bad action annotation", "no8s.io/action: make-widget", "no8s.io/action: Make Widget", "invalid action instance name"},
		{"resource at an unserved version", "", "", `has no version "v1alpha1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			crd := strings.Replace(widgetCRD, tt.from, tt.to, 1)
			if tt.from != "" && crd == widgetCRD {
				t.Fatalf("%q is not in the CRD", tt.from)
			}
			files, file := map[string]string{"crd.yaml": crd}, "crd.yaml"
			if tt.from == "" {
				files["w.yaml"], file = "apiVersion: example.com/v1alpha1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 2}\n", "w.yaml"
			}
			_, ps := validateYAML(t, files, nil)
			assertProblem(t, ps, file, tt.want)
		})
	}
}

// TestRealCRDs: CRDs published by well-known projects (testdata/crds, see
// NOTICE.md there) are accepted as types, and their resources validate
// with the CRDs' defaults and schema checks.
func TestRealCRDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file, kind, group string
		versions          []string
		resource          string
		// spec is the stored spec of resource: defaults applied.
		spec string
		// invalid is a resource the schema refuses, with the problem it gets.
		invalid, problem string
	}{
		{"gateway-api-gatewayclasses.yaml", "GatewayClass", "gateway.networking.k8s.io", []string{"v1", "v1beta1"},
			"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: gc}\nspec: {controllerName: example.net/gateway-controller}\n",
			`{"controllerName":"example.net/gateway-controller"}`,
			"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: gc}\nspec: {controllerName: no-slash}\n",
			"spec.controllerName"},
		{"crossplane-compositeresourcedefinitions.yaml", "CompositeResourceDefinition", "apiextensions.crossplane.io", []string{"v1"},
			"apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {name: xdatabases}\nspec:\n  group: example.org\n  names: {kind: XDatabase, plural: xdatabases}\n  versions: [{name: v1alpha1, served: true, referenceable: true}]\n",
			`{"defaultCompositeDeletePolicy":"Background","defaultCompositionUpdatePolicy":"Automatic","group":"example.org","names":{"kind":"XDatabase","plural":"xdatabases"},"versions":[{"name":"v1alpha1","referenceable":true,"served":true}]}`,
			"apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {name: xdatabases}\nspec: {group: example.org}\n",
			"spec: missing properties: 'names', 'versions'"},
		{"crossplane-cronoperations.yaml", "CronOperation", "ops.crossplane.io", []string{"v1alpha1"},
			"apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata: {name: nightly}\nspec:\n  schedule: \"*/5 * * * *\"\n  operationTemplate: {spec: {pipeline: [{step: s1, functionRef: {name: fn}}]}}\n",
			`{"concurrencyPolicy":"Allow","failedHistoryLimit":1,"operationTemplate":{"spec":{"mode":"Pipeline","pipeline":[{"functionRef":{"name":"fn"},"step":"s1"}]}},"schedule":"*/5 * * * *","successfulHistoryLimit":3}`,
			"apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata: {name: nightly}\nspec:\n  schedule: \"*/5 * * * *\"\n  operationTemplate: {spec: {pipeline: []}}\n",
			"spec.operationTemplate.spec.pipeline"},
		{"cert-manager-certificaterequests.yaml", "CertificateRequest", "cert-manager.io", []string{"v1"},
			"apiVersion: cert-manager.io/v1\nkind: CertificateRequest\nmetadata: {name: web}\nspec: {issuerRef: {name: ca-issuer, kind: Issuer}, request: dGVzdA==}\n",
			`{"issuerRef":{"group":"cert-manager.io","kind":"Issuer","name":"ca-issuer"},"request":"dGVzdA=="}`,
			"apiVersion: cert-manager.io/v1\nkind: CertificateRequest\nmetadata: {name: web}\nspec: {issuerRef: {name: ca-issuer}, request: dGVzdA==, usages: [bogus]}\n",
			"spec.usages[0]"},
		{"crossplane-usages.yaml", "Usage", "protection.crossplane.io", []string{"v1beta1"},
			"apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {name: keep-cm}\nspec: {of: {apiVersion: v1, kind: ConfigMap, resourceRef: {name: cm}}, reason: protected}\n",
			`{"of":{"apiVersion":"v1","kind":"ConfigMap","resourceRef":{"name":"cm"}},"reason":"protected"}`,
			"apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {name: keep-cm}\nspec: {}\n",
			"spec: missing properties: 'of'"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata", "crds", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			set, ps := validateYAML(t, map[string]string{"crd.yaml": string(data), "r.yaml": tt.resource}, nil)
			if len(ps) > 0 {
				t.Fatalf("problems: %v", ps)
			}
			typ := set.Types[0]
			var versions []string
			for _, v := range typ.Versions {
				versions = append(versions, v.Name)
			}
			if typ.Name != tt.kind || typ.Group != tt.group || !slices.Equal(versions, tt.versions) {
				t.Errorf("type %s %s %v, want %s %s %v", typ.Name, typ.Group, versions, tt.kind, tt.group, tt.versions)
			}
			if got := string(set.Resources[0].Spec); got != tt.spec {
				t.Errorf("spec\n got %s\nwant %s", got, tt.spec)
			}
			_, ps = validateYAML(t, map[string]string{"crd.yaml": string(data), "r.yaml": tt.invalid}, nil)
			assertProblem(t, ps, "r.yaml", tt.problem)
		})
	}
}

// TestRealCRDRules: the CEL rules of real CRDs refuse what they refuse in a
// cluster, with the rule's message, the file, the line and the field; the
// transition rules compare with the spec last accepted.
func TestRealCRDRules(t *testing.T) {
	t.Parallel()
	read := func(file string) string {
		data, err := os.ReadFile(filepath.Join("testdata", "crds", file))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, tt := range []struct {
		name, crd, resource, want string
		line                      int
	}{
		{"Usage without by or reason", "crossplane-usages.yaml",
			"apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {name: keep-cm}\nspec:\n  of: {apiVersion: v1, kind: ConfigMap, resourceRef: {name: cm}}\n",
			`spec: either "spec.by" or "spec.reason" must be specified.`, 4},
		{"Usage of nothing", "crossplane-usages.yaml",
			"apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {name: keep-cm}\nspec:\n  reason: protected\n  of: {apiVersion: v1, kind: ConfigMap}\n",
			"spec.of: either a resource reference or a resource selector should be set.", 6},
		{"CronOperation with name and matchLabels", "crossplane-cronoperations.yaml",
			"apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata: {name: nightly}\nspec:\n  schedule: \"*/5 * * * *\"\n  operationTemplate:\n    spec:\n      pipeline:\n      - step: s1\n        functionRef: {name: fn}\n        requirements:\n          requiredResources:\n          - {requirementName: r, apiVersion: v1, kind: ConfigMap, name: cm, matchLabels: {app: x}}\n",
			"spec.operationTemplate.spec.pipeline[0].requirements.requiredResources[0]: name and matchLabels are mutually exclusive", 13},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, map[string]string{"crd.yaml": read(tt.crd), "r.yaml": tt.resource}, nil)
			assertProblem(t, ps, "r.yaml", tt.want)
			if len(ps) != 1 || ps[0].Line != tt.line {
				t.Errorf("problems %v, want one on line %d", ps, tt.line)
			}
		})
	}

	// Transition rules: immutable fields of GatewayClass and of Crossplane's
	// CompositeResourceDefinition.
	for _, tt := range []struct {
		name, crd, old, new, want string
	}{
		{"GatewayClass controllerName", "gateway-api-gatewayclasses.yaml",
			"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: gc}\nspec: {controllerName: example.net/gateway-controller}\n",
			"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: gc}\nspec: {controllerName: example.net/other-controller}\n",
			"spec.controllerName: Value is immutable"},
		{"GatewayClass description only", "gateway-api-gatewayclasses.yaml",
			"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: gc}\nspec: {controllerName: example.net/gateway-controller}\n",
			"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: gc}\nspec: {controllerName: example.net/gateway-controller, description: fast}\n",
			""},
		{"XRD group", "crossplane-compositeresourcedefinitions.yaml",
			"apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {name: xdatabases}\nspec:\n  group: example.org\n  names: {kind: XDatabase, plural: xdatabases}\n  versions: [{name: v1alpha1, served: true, referenceable: true}]\n",
			"apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {name: xdatabases}\nspec:\n  group: example.com\n  names: {kind: XDatabase, plural: xdatabases}\n  versions: [{name: v1alpha1, served: true, referenceable: true}]\n",
			"spec.group: Value is immutable"},
		{"XRD claimNames added", "crossplane-compositeresourcedefinitions.yaml",
			"apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {name: xdatabases}\nspec:\n  group: example.org\n  names: {kind: XDatabase, plural: xdatabases}\n  versions: [{name: v1alpha1, served: true, referenceable: true}]\n",
			"apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata: {name: xdatabases}\nspec:\n  group: example.org\n  names: {kind: XDatabase, plural: xdatabases}\n  claimNames: {kind: Database, plural: databases}\n  versions: [{name: v1alpha1, served: true, referenceable: true}]\n",
			""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			old, ps := validateYAML(t, map[string]string{"crd.yaml": read(tt.crd), "r.yaml": tt.old}, nil)
			if len(ps) > 0 {
				t.Fatal(ps)
			}
			cur, ps := validateYAML(t, map[string]string{"crd.yaml": read(tt.crd), "r.yaml": tt.new}, nil)
			if len(ps) > 0 {
				t.Fatalf("the new spec alone is valid: %v", ps)
			}
			typ, r, prev := cur.Types[0], cur.Resources[0], old.Resources[0]
			if !typ.HasRules(r.Version) {
				t.Fatal("the CRD's rules were not compiled")
			}
			ps = typ.CheckTransition(r, prev.Version, prev.Spec)
			switch {
			case tt.want == "" && len(ps) > 0:
				t.Errorf("refused: %v", ps)
			case tt.want != "":
				assertProblem(t, ps, "r.yaml", tt.want)
			}
			if ps := typ.CheckTransition(r, "v0", prev.Spec); len(ps) > 0 {
				t.Errorf("checked across versions: %v", ps)
			}
		})
	}
}
