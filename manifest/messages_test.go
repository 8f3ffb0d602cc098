package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// TestV1beta1CRD: a CRD of apiextensions.k8s.io/v1beta1 (removed from
// Kubernetes in 1.22) is refused with one line that says only v1 is
// supported, not read as a resource of an unknown kind; its resources
// point at it.
func TestV1beta1CRD(t *testing.T) {
	t.Parallel()
	const v1beta1 = `apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  version: v1
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  validation:
    openAPIV3Schema:
      type: object
      properties:
        spec: {type: object, properties: {size: {type: integer}}}
`
	tests := []struct {
		name, apiVersion string
		files            map[string]string
		want             []string
	}{
		{"alone", "apiextensions.k8s.io/v1beta1", map[string]string{"crd.yaml": v1beta1},
			[]string{"crd.yaml:1: apiVersion: apiextensions.k8s.io/v1beta1 is not supported: only apiextensions.k8s.io/v1 CustomResourceDefinitions are (use the v1 CRD the project publishes)"}},
		{"with a resource", "apiextensions.k8s.io/v1beta1", map[string]string{"crd.yaml": v1beta1, "w.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 2}\n"},
			[]string{"crd.yaml:1: apiVersion: apiextensions.k8s.io/v1beta1 is not supported: only apiextensions.k8s.io/v1 CustomResourceDefinitions are",
				"w.yaml:2: kind: cannot validate: ResourceType Widget (crd.yaml:1) is invalid"}},
		{"a made-up version", "apiextensions.k8s.io/v2", map[string]string{"crd.yaml": strings.Replace(v1beta1, "v1beta1", "v2", 1)},
			[]string{"crd.yaml:1: apiVersion: apiextensions.k8s.io/v2 is not supported: only apiextensions.k8s.io/v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !IsTypeDocument(map[string]any{"apiVersion": tt.apiVersion, "kind": KindCRD}) {
				t.Errorf("%s is not a type document", tt.apiVersion)
			}
			_, ps := validateYAML(t, tt.files, nil)
			if len(ps) != len(tt.want) {
				t.Fatalf("problems %q, want %q", ps, tt.want)
			}
			for i, p := range ps {
				if !strings.HasPrefix(p.String(), tt.want[i]) {
					t.Errorf("problem %q, want %q", p, tt.want[i])
				}
			}
		})
	}
	if IsTypeDocument(map[string]any{"apiVersion": "example.com/v1", "kind": KindCRD}) {
		t.Error("a CustomResourceDefinition of another group is a type document")
	}
}

// TestTransitionRuleLine: a broken transition rule (oldSelf, checked on an
// update) is reported at its field's line once the problems are placed in
// their files, not at the document's first line.
func TestTransitionRuleLine(t *testing.T) {
	t.Parallel()
	const typ = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Network}
spec:
  versions:
    - name: v1
      schema:
        type: object
        properties:
          region: {type: string, maxLength: 64, x-kubernetes-validations: [{rule: self == oldSelf, message: region is immutable}]}
          subnets:
            type: array
            x-kubernetes-list-type: map
            x-kubernetes-list-map-keys: [name]
            maxItems: 16
            items:
              type: object
              required: [name]
              properties:
                name: {type: string, maxLength: 64}
                cidr: {type: string, maxLength: 64, x-kubernetes-validations: [{rule: self == oldSelf, message: cidr is immutable}]}
`
	doc := func(region, cidr string) string {
		return fmt.Sprintf("# a comment first\n---\napiVersion: no8s.io/v1\nkind: Network\nmetadata:\n  name: prod\n"+
			"spec:\n  subnets:\n    - {name: a, cidr: 10.0.0.0/24}\n    - name: b\n      cidr: %s\n  region: %s\n", cidr, region)
	}
	validated := func(data string) (*Set, []File) {
		t.Helper()
		files := []File{{Path: "t.yaml", Data: []byte(typ), Hash: "t"}, {Path: "nets/prod.yaml", Data: []byte(data), Hash: data}}
		set, err := (&Validator{}).ValidateFiles(files, nil)
		if err != nil {
			t.Fatal(err)
		}
		return set, files
	}
	old, _ := validated(doc("eu-west-1", "10.0.1.0/24"))
	tests := []struct {
		name, region, cidr string
		want               []string
	}{
		{"unchanged", "eu-west-1", "10.0.1.0/24", nil},
		{"a top field", "us-east-1", "10.0.1.0/24", []string{"nets/prod.yaml:12: spec.region: region is immutable"}},
		{"a list item's field", "eu-west-1", "10.0.2.0/24", []string{"nets/prod.yaml:11: spec.subnets[1].cidr: cidr is immutable"}},
		{"both", "us-east-1", "10.0.2.0/24", []string{"nets/prod.yaml:11: spec.subnets[1].cidr: cidr is immutable", "nets/prod.yaml:12: spec.region: region is immutable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, files := validated(doc(tt.region, tt.cidr))
			r := set.Resources[0]
			ps := set.Types[0].CheckTransition(r, old.Resources[0].Version, old.Resources[0].Spec)
			for _, p := range ps {
				if p.Line != r.Origin.Line || r.Origin.Line != 3 {
					t.Errorf("before placing, %q is not at the document's line %d", p, r.Origin.Line)
				}
			}
			PlaceProblems(files, ps)
			SortProblems(ps)
			if len(ps) != len(tt.want) {
				t.Fatalf("problems %q, want %q", ps, tt.want)
			}
			for i, p := range ps {
				if p.String() != tt.want[i] {
					t.Errorf("problem %q, want %q", p, tt.want[i])
				}
			}
		})
	}
	// A problem whose file is not at hand keeps its line.
	ps := []Problem{{File: "gone.yaml", Line: 3, Pointer: "/spec/region", Message: "m"}, {File: "t.yaml", Line: 2, Message: "no pointer"}}
	PlaceProblems(nil, ps)
	if ps[0].Line != 3 || ps[1].Line != 2 {
		t.Errorf("lines changed: %+v", ps)
	}
}

// jsonschemaQuote is the quoting santhosh-tekuri/jsonschema applies to
// patterns in its messages (its unexported quote).
func jsonschemaQuote(s string) string {
	s = fmt.Sprintf("%q", s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

// TestPatternQuotedOnce: a pattern in a message reads as the schema writes
// it, in single quotes, as an API server shows it, whatever it holds.
func TestPatternQuotedOnce(t *testing.T) {
	t.Parallel()
	const typ = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Certificate}
spec:
  versions:
    - name: v1
      schema:
        type: object
        properties:
          dnsName: {type: string, pattern: '^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'}
          quoted: {type: string, pattern: '^[''"]\d+$'}
`
	tests := []struct {
		name, spec, want string
	}{
		{"backslashes", "{dnsName: 'Web_1'}",
			`r.yaml:4: spec.dnsName: does not match pattern '^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'`},
		{"quotes", "{quoted: x}", `r.yaml:4: spec.quoted: does not match pattern '^['"]\d+$'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, map[string]string{"t.yaml": typ, "r.yaml": "apiVersion: no8s.io/v1\nkind: Certificate\nmetadata: {name: c}\nspec: " + tt.spec + "\n"}, nil)
			if len(ps) != 1 || ps[0].String() != tt.want {
				t.Fatalf("problems %q, want %q", ps, tt.want)
			}
		})
	}
	// Whatever a pattern holds, the message gives it back as written.
	for _, pattern := range []string{`^(\*\.)?`, `a'b`, `a"b`, `\`, `\'`, `\\'`, `''`, `"'"`, "é\u2028", "tab\there", `\x41\u00e9`, `[^\]]`} {
		msg := patternPrefix + jsonschemaQuote(pattern)
		if got, want := quotePatternOnce(msg), patternPrefix+"'"+pattern+"'"; got != want {
			t.Errorf("quotePatternOnce(%q) = %q, want %q", msg, got, want)
		}
	}
	for _, msg := range []string{"does not match pattern", "does not match pattern 'unterminated", "missing properties: 'a'"} {
		if got := quotePatternOnce(msg); got != msg {
			t.Errorf("quotePatternOnce(%q) = %q: changed a message it does not know", msg, got)
		}
	}
}

// TestYAMLErrorLine: a YAML syntax error has one line number, the
// problem's, which the message does not repeat.
func TestYAMLErrorLine(t *testing.T) {
	t.Parallel()
	good := "apiVersion: no8s.io/v1\nkind: Thing\nmetadata:\n  name: a\nspec:\n  a: 1\n  b: 2\n  c: 3\n"
	tests := []struct {
		name, data, want string
	}{
		// The sequence left open on line 9, which yaml.v3 calls "line 8"
		// (its parser counts from zero).
		{"parser error", good + "  d: [1, 2\n  e: 3\n", "two.yaml:9: invalid YAML: did not find expected ',' or ']'"},
		// The quoted string left open on line 9.
		{"scanner error", good + "  d: 'open\n", "two.yaml:9: invalid YAML: found unexpected end of stream"},
		{"mapping in a scalar", good + "  d: a: b\n", "two.yaml:9: invalid YAML: mapping values are not allowed in this context"},
		{"in a later document", good + "---\na: 1\n b: 2\n", "two.yaml:11: invalid YAML: mapping values are not allowed in this context"},
		{"unknown alias", good + "  d: *nope\n", "two.yaml:9: invalid YAML: unknown anchor 'nope' referenced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := DecodeFile("two.yaml", []byte(tt.data), DecodeOptions{})
			if len(ps) != 1 || ps[0].String() != tt.want {
				t.Fatalf("problems %q, want %q", ps, tt.want)
			}
			if strings.Contains(ps[0].Message, "line ") {
				t.Errorf("a second line number in %q", ps[0].Message)
			}
		})
	}
}
