package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// appType declares fields of every kind the unknown-field check walks:
// nested objects, lists of objects, maps (additionalProperties), a subtree
// that keeps unknown fields, an embedded resource, references, a schema
// that says nothing of its shape and an object that declares no fields.
const appType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata:
  name: App
spec:
  group: apps.example.com
  versions:
    - name: v1
      schema:
        type: object
        definitions:
          node: {type: object, properties: {number: {type: integer}, next: {$ref: '#/definitions/node'}}}
        properties:
          secretName: {type: string}
          replicas: {type: integer, default: 1}
          containers:
            type: array
            items:
              type: object
              properties:
                name: {type: string}
                image: {type: string}
                ports: {type: array, items: {type: object, properties: {containerPort: {type: integer}}}}
          labels: {type: object, additionalProperties: {type: string}}
          volumes: {type: object, additionalProperties: {type: object, properties: {size: {type: string}}}}
          values:
            type: object
            x-kubernetes-preserve-unknown-fields: true
            properties: {mode: {type: object, properties: {fast: {type: boolean}}}}
          template:
            type: object
            x-kubernetes-embedded-resource: true
            properties: {spec: {type: object, properties: {image: {type: string}}}}
          chain: {$ref: '#/definitions/node'}
          raw: {description: anything at all}
          empty: {type: object}
          either:
            type: object
            anyOf:
              - properties: {left: {type: string}}
              - properties: {right: {type: string}}
          oneOfTwo:
            type: object
            properties: {a: {type: string}, b: {type: string}}
            anyOf: [{required: [a]}, {required: [b]}]
          pairs:
            type: array
            items: {type: object, properties: {key: {type: string}}}
            anyOf: [{maxItems: 3}, {minItems: 5}]
          loose: {anyOf: [{minProperties: 1}, {maxProperties: 0}]}
`

// appResource is an App whose spec is given line by line: the first spec
// line is line 5 of the file.
func appResource(spec ...string) string {
	return "apiVersion: apps.example.com/v1\nkind: App\nmetadata: {name: a}\nspec:\n  " + strings.Join(spec, "\n  ") + "\n"
}

// TestUnknownFieldsStrict: a field the schema does not declare refuses the
// file, at the field's own line, with its path as a server writes it and a
// suggestion when a declared sibling is one or two edits away; what the
// schema leaves open is accepted.
func TestUnknownFieldsStrict(t *testing.T) {
	t.Parallel()
	type want struct {
		line int
		msg  string
	}
	tests := []struct {
		name string
		spec []string
		want []want
	}{
		{"everything declared or open", []string{
			"secretName: s",
			"containers: [{name: web, image: nginx, ports: [{containerPort: 80}]}]",
			"labels: {any-key: x, other: y}",
			"volumes: {data: {size: 1Gi}}",
			"values: {mode: {fast: true}, anything: {deep: [1, {x: y}]}}",
			"template: {apiVersion: v1, kind: Pod, metadata: {name: p, whatever: 1}, spec: {image: nginx}}",
			"chain: {number: 1, next: {number: 2, next: {number: 3}}}",
			"raw: {free: {form: [true]}}",
			"empty: {}",
			"either: {left: l, right: r}",
			"oneOfTwo: {a: x}",
			"pairs: [{key: k}]",
			"loose: {any: thing}",
		}, nil},
		{"list whose schema has branches", []string{"pairs: [{key: k}, {kye: k}]"},
			[]want{{5, `unknown field "spec.pairs[1].kye", did you mean "key"?`}}},
		{"object whose branches only require", []string{"oneOfTwo: {a: x, c: y}"},
			[]want{{5, `unknown field "spec.oneOfTwo.c"`}}},
		{"misspelt top-level field", []string{"replicas: 2", "secretNmae: s"},
			[]want{{6, `unknown field "spec.secretNmae", did you mean "secretName"? (unknownFields: strict refuses it; warn keeps it, prune drops it)`}}},
		{"misspelt field of a list item", []string{"containers:", "- {name: web, image: nginx}", "- name: db", "  imgae: postgres"},
			[]want{{8, `unknown field "spec.containers[1].imgae", did you mean "image"?`}}},
		{"list in a list item", []string{"containers:", "- name: web", "  ports:", "  - containerPrt: 80"},
			[]want{{8, `unknown field "spec.containers[0].ports[0].containerPrt", did you mean "containerPort"?`}}},
		{"map value", []string{"volumes:", "  data: {size: 1Gi}", "  logs:", "    sise: 2Gi"},
			[]want{{8, `unknown field "spec.volumes.logs.sise", did you mean "size"?`}}},
		{"declared field below a subtree that keeps unknown fields", []string{"values:", "  other: 1", "  mode:", "    fsat: true"},
			[]want{{8, `unknown field "spec.values.mode.fsat", did you mean "fast"?`}}},
		{"embedded resource's own fields", []string{"template:", "  kind: Pod", "  spec: {image: x, imagePullPolicy: Always}"},
			[]want{{7, `unknown field "spec.template.spec.imagePullPolicy"`}}},
		{"through a reference", []string{"chain:", "  next:", "    numbr: 2"},
			[]want{{7, `unknown field "spec.chain.next.numbr", did you mean "number"?`}}},
		{"object that declares no fields", []string{"empty:", "  a: 1"},
			[]want{{6, `unknown field "spec.empty.a": the schema declares no fields here (x-kubernetes-preserve-unknown-fields: true accepts any)`}}},
		{"field of none of the branches", []string{"either: {left: l, center: c}"},
			[]want{{5, `unknown field "spec.either.center"`}}},
		{"nothing close enough to suggest", []string{"colour: red"},
			[]want{{5, `unknown field "spec.colour" (unknownFields: strict`}}},
		{"every unknown field, with the schema's own problems", []string{"secretname: s", "replicas: many", "labls: {a: b}"},
			[]want{
				{5, `unknown field "spec.secretname", did you mean "secretName"?`},
				{6, `spec.replicas: expected integer, but got string`},
				{7, `unknown field "spec.labls", did you mean "labels"?`},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, map[string]string{"t.yaml": appType, "r.yaml": appResource(tt.spec...)}, nil)
			if len(ps) != len(tt.want) {
				t.Fatalf("problems %v, want %d", ps, len(tt.want))
			}
			for i, w := range tt.want {
				p := ps[i]
				if p.File != "r.yaml" || p.Line != w.line || !strings.Contains(p.Message, w.msg) {
					t.Errorf("problem %d: %s (line %d), want line %d with %q", i, p, p.Line, w.line, w.msg)
				}
			}
			if len(tt.want) == 1 && !strings.Contains(tt.want[0].msg, "did you mean") && strings.Contains(ps[0].Message, "did you mean") {
				t.Errorf("suggests a field that is not close: %s", ps[0])
			}
		})
	}
}

// TestUnknownFieldsModes: warn keeps the fields and says so, prune drops
// them and says so, and the stored spec of a resource without such fields
// is the same in every mode.
func TestUnknownFieldsModes(t *testing.T) {
	t.Parallel()
	misspelt := appResource("secretName: s", "containers: [{name: web, imgae: nginx}]", "secretNmae: t")
	clean := strings.Replace(appResource("secretName: s", "containers: [{name: web}]"), "name: a", "name: b", 1)
	tests := []struct {
		mode     UnknownFields
		spec     string
		warnings []string
	}{
		{UnknownFieldsWarn, `{"containers":[{"imgae":"nginx","name":"web"}],"replicas":1,"secretName":"s","secretNmae":"t"}`, []string{
			`r.yaml:6: unknown field "spec.containers[0].imgae" kept, did you mean "image"?`,
			`r.yaml:7: unknown field "spec.secretNmae" kept, did you mean "secretName"?`,
		}},
		{UnknownFieldsPrune, `{"containers":[{"name":"web"}],"replicas":1,"secretName":"s"}`, []string{
			`r.yaml:6: unknown field "spec.containers[0].imgae" dropped, did you mean "image"?`,
			`r.yaml:7: unknown field "spec.secretNmae" dropped, did you mean "secretName"?`,
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			docs := decodeAll(t, map[string]string{"t.yaml": appType, "r.yaml": misspelt, "s.yaml": clean})
			set, err := ValidateWith(docs, nil, tt.mode, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := string(set.Resources[0].Spec); got != tt.spec {
				t.Errorf("spec\n got %s\nwant %s", got, tt.spec)
			}
			if got := string(set.Resources[1].Spec); got != `{"containers":[{"name":"web"}],"replicas":1,"secretName":"s"}` {
				t.Errorf("the spec without unknown fields is %s", got)
			}
			var got []string
			for _, w := range set.UnknownFields {
				got = append(got, w.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.warnings, "\n") {
				t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.warnings, "\n"))
			}
		})
	}
}

func decodeAll(t *testing.T, files map[string]string) []*Document {
	t.Helper()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var docs []*Document
	for _, name := range names {
		d, ps := DecodeFile(name, []byte(files[name]), DecodeOptions{})
		if len(ps) > 0 {
			t.Fatal(ps)
		}
		docs = append(docs, d...)
	}
	return docs
}

// TestValidatorUnknownFieldsChange: a Validator whose mode changes
// validates its cached files again.
func TestValidatorUnknownFieldsChange(t *testing.T) {
	t.Parallel()
	files := []File{
		{Path: "r.yaml", Data: []byte(appResource("secretNmae: t")), Hash: "r"},
		{Path: "t.yaml", Data: []byte(appType), Hash: "t"},
	}
	v := &Validator{UnknownFields: UnknownFieldsWarn}
	set, err := v.ValidateFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(set.Resources[0].Spec); got != `{"replicas":1,"secretNmae":"t"}` || len(set.UnknownFields) != 1 {
		t.Fatalf("warn: %s, %v", got, set.UnknownFields)
	}
	v.UnknownFields = UnknownFieldsPrune
	if set, err = v.ValidateFiles(files, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(set.Resources[0].Spec); got != `{"replicas":1}` || len(set.UnknownFields) != 1 || !strings.Contains(set.UnknownFields[0].Message, "dropped") {
		t.Errorf("prune: %s, %v", got, set.UnknownFields)
	}
	v.UnknownFields = ""
	_, err = v.ValidateFiles(files, nil)
	if err == nil || !strings.Contains(err.Error(), `r.yaml:5: unknown field "spec.secretNmae"`) {
		t.Errorf("strict: %v", err)
	}
}

// TestParseResourceObjectUnknownFields: a document a program changed
// follows the same rule.
func TestParseResourceObjectUnknownFields(t *testing.T) {
	t.Parallel()
	set, ps := validateYAML(t, map[string]string{"t.yaml": appType}, nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	lookup := func(string) (*ResourceType, error) { return set.Types[0], nil }
	obj := json.RawMessage(`{"apiVersion":"apps.example.com/v1","kind":"App","metadata":{"name":"a"},"spec":{"replicas":2,"replica":3}}`)
	at := Origin{File: "r.yaml", Line: 3}
	if _, ps, _ := ParseResourceObject(obj, at, lookup, UnknownFieldsStrict, ""); len(ps) != 1 || ps[0].String() != `r.yaml:3: unknown field "spec.replica", did you mean "replicas"? (unknownFields: strict refuses it; warn keeps it, prune drops it)` {
		t.Errorf("strict: %v", ps)
	}
	r, ps, ws := ParseResourceObject(obj, at, lookup, UnknownFieldsPrune, "")
	if len(ps) > 0 || string(r.Spec) != `{"replicas":2}` || len(ws) != 1 {
		t.Errorf("prune: %v %v %v", r, ps, ws)
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	names := []string{"image", "imagePullPolicy", "name", "port", "ports", "secretName"}
	for _, tt := range []struct{ field, want string }{
		{"secretNmae", "secretName"}, // two letters swapped
		{"secretname", "secretName"}, // case
		{"imag", "image"},            // one letter missing
		{"imagee", "image"},          // one too many
		{"prot", "port"},             // swapped, short
		{"portz", "port"},            // port and ports are one edit away: the first wins
		{"nmea", "name"},             // two edits
		{"colour", ""},               // nothing close
		{"nm", ""},                   // two edits, but all of it
		{"x", ""},
	} {
		if got := suggest(tt.field, names); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.field, got, tt.want)
		}
	}
}

// listType has lists of each x-kubernetes-list-type.
const listType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata:
  name: Lists
spec:
  group: lists.example.com
  versions:
    - name: v1
      schema:
        type: object
        properties:
          tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
          sizes: {type: array, x-kubernetes-list-type: set, items: {type: integer}}
          objects:
            type: array
            x-kubernetes-list-type: set
            items: {type: object, properties: {a: {type: integer}, b: {type: integer}}}
          atomic: {type: array, x-kubernetes-list-type: atomic, items: {type: string}}
          env:
            type: array
            x-kubernetes-list-type: map
            x-kubernetes-list-map-keys: [name]
            items:
              type: object
              properties:
                name: {type: string, default: main}
                value: {type: string}
                flags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
          ports:
            type: array
            x-kubernetes-list-type: map
            x-kubernetes-list-map-keys: [port, protocol]
            items:
              type: object
              properties: {port: {type: integer}, protocol: {type: string}, name: {type: string}}
          byName:
            type: object
            additionalProperties: {type: array, x-kubernetes-list-type: set, items: {type: string}}
`

// TestListTypes: list-type sets refuse repeated items and list-type maps
// repeated keys, with the message and the path an API server gives, at the
// repeated item's line.
func TestListTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec []string
		// want are the problems as printed, in order.
		want []string
	}{
		{"distinct items and keys", []string{
			"tags: [a, b]", "sizes: [1, 2]", "objects: [{a: 1}, {a: 1, b: 2}]", "atomic: [x, x]",
			"env: [{name: a, value: x, flags: [f, g]}, {name: b, value: x}]",
			"ports: [{port: 80, protocol: TCP}, {port: 80, protocol: UDP}, {port: 81, protocol: TCP}]",
			"byName: {a: [x], b: [x]}",
		}, nil},
		{"repeated string", []string{"tags:", "- a", "- b", "- a"},
			[]string{`r.yaml:8: spec.tags[2]: Duplicate value: "a"`}},
		{"three times is one problem", []string{"tags: [a, a, a]"},
			[]string{`r.yaml:5: spec.tags[1]: Duplicate value: "a"`}},
		{"repeated number", []string{"sizes: [1, 2, 1, 2]"},
			[]string{`r.yaml:5: spec.sizes[2]: Duplicate value: 1`, `r.yaml:5: spec.sizes[3]: Duplicate value: 2`}},
		{"objects equal whatever the key order", []string{"objects:", "- {a: 1, b: 2}", "- {b: 2, a: 1}"},
			[]string{`r.yaml:7: spec.objects[1]: Duplicate value: {"a":1,"b":2}`}},
		{"map key repeated", []string{"env:", "- {name: a, value: x}", "- name: a", "  value: y"},
			[]string{`r.yaml:7: spec.env[1]: Duplicate value: {"name":"a"}`}},
		{"map key absent takes its default", []string{"env:", "- {name: main, value: x}", "- {value: y}"},
			[]string{`r.yaml:7: spec.env[1]: Duplicate value: {"name":"main"}`}},
		{"two map keys", []string{"ports:", "- {port: 80, protocol: TCP}", "- {port: 80, protocol: TCP, name: b}"},
			[]string{`r.yaml:7: spec.ports[1]: Duplicate value: {"port":80,"protocol":"TCP"}`}},
		{"map keys absent alike", []string{"ports:", "- {name: a}", "- {name: b}"},
			[]string{`r.yaml:7: spec.ports[1]: Duplicate value: {}`}},
		{"set inside a map item", []string{"env:", "- name: a", "  flags: [f, f]"},
			[]string{`r.yaml:7: spec.env[0].flags[1]: Duplicate value: "f"`}},
		{"set in a map value", []string{"byName:", "  a: [x, y, x]"},
			[]string{`r.yaml:6: spec.byName.a[2]: Duplicate value: "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := "apiVersion: lists.example.com/v1\nkind: Lists\nmetadata: {name: l}\nspec:\n  " + strings.Join(tt.spec, "\n  ") + "\n"
			_, ps := validateYAML(t, map[string]string{"t.yaml": listType, "r.yaml": doc}, nil)
			var got []string
			for _, p := range ps {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestGatewayAPIExamples: Gateway API's HTTPRoute CRD and examples as the
// project publishes them (testdata/crds and testdata/examples/gateway-api,
// see testdata/crds/NOTICE.md): the valid examples load unchanged, each
// invalid one is refused at the field path an API server reports, and a
// misspelt field in a valid one is refused with a suggestion.
func TestGatewayAPIExamples(t *testing.T) {
	t.Parallel()
	types, ps := validateYAML(t, map[string]string{"crd.yaml": readTestdata(t, "crds", "gateway-api-httproutes.yaml")}, nil)
	if len(ps) > 0 || len(types.Types) != 1 {
		t.Fatalf("the CRD: %v", ps)
	}
	route := types.Types[0]
	route.Fingerprint() // cached now, read by the subtests
	known := func(kind string) *ResourceType {
		if kind == route.Name {
			return route
		}
		return nil
	}
	dir := filepath.Join("testdata", "examples", "gateway-api")
	valid, err := filepath.Glob(filepath.Join(dir, "valid", "*.yaml"))
	if err != nil || len(valid) == 0 {
		t.Fatalf("no valid examples: %v", err)
	}
	for _, path := range valid {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			set, ps := validateYAML(t, map[string]string{"r.yaml": readTestdata(t, "examples", "gateway-api", "valid", filepath.Base(path))}, known)
			if len(ps) > 0 {
				t.Fatalf("refused: %v", ps)
			}
			if len(set.Resources) != 1 || set.Resources[0].Kind != "HTTPRoute" || len(set.UnknownFields) > 0 {
				t.Errorf("resources %v, warnings %v", set.Resources, set.UnknownFields)
			}
		})
	}
	for _, tt := range []struct {
		file string
		// want is the problem as printed; the part after the line is what
		// an API server answers.
		want string
	}{
		{"duplicate-header-match.yaml", `r.yaml:11: spec.rules[0].matches[0].headers[1]: Duplicate value: {"name":"foo"}`},
		{"duplicate-query-match.yaml", `r.yaml:11: spec.rules[0].matches[0].queryParams[1]: Duplicate value: {"name":"foo"}`},
		{"invalid-filter-duplicate-header.yaml", `r.yaml:12: spec.rules[0].filters[0].requestHeaderModifier.remove[1]: Duplicate value: "foo"`},
		{"invalid-filter-duplicate.yaml", `r.yaml:7: spec.rules[0].filters: RequestHeaderModifier filter cannot be repeated`},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, map[string]string{"r.yaml": readTestdata(t, "examples", "gateway-api", "invalid", tt.file)}, known)
			if len(ps) != 1 || ps[0].String() != tt.want {
				t.Errorf("problems %v, want %s", ps, tt.want)
			}
		})
	}
	// One change to a valid example: a misspelt field in a list of objects.
	doc := strings.Replace(readTestdata(t, "examples", "gateway-api", "valid", "http-request-header-add.yaml"), "port: 8080", "prot: 8080", 1)
	_, ps = validateYAML(t, map[string]string{"r.yaml": doc}, known)
	want := `r.yaml:23: unknown field "spec.rules[0].backendRefs[0].prot", did you mean "port"?`
	if len(ps) != 1 || !strings.HasPrefix(ps[0].String(), want) {
		t.Errorf("problems %v, want %s", ps, want)
	}
}

func readTestdata(t *testing.T, path ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
