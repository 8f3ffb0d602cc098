package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// validateYAML decodes files (name -> content) and validates them together.
func validateYAML(t *testing.T, files map[string]string, known TypeResolver) (*Set, []Problem) {
	t.Helper()
	var docs []*Document
	var ps []Problem
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	// Files in name order, as a source reads them, so "first declared" is stable.
	sort.Strings(names)
	for _, name := range names {
		data := files[name]
		d, p := DecodeFile(name, []byte(data), DecodeOptions{})
		docs = append(docs, d...)
		ps = append(ps, p...)
	}
	if len(ps) > 0 {
		t.Fatalf("decode problems: %v", ps)
	}
	set, err := Validate(docs, known)
	var verr *ValidationError
	if errors.As(err, &verr) {
		return nil, verr.Problems
	}
	if err != nil {
		t.Fatal(err)
	}
	return set, nil
}

const dbType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata:
  name: DatabaseCluster
spec:
  group: infra.example.com
  action: provision-db
  driftInterval: 30m
  versions:
    - name: v1
      schema:
        type: object
        required: [engine, storage_gb]
        properties:
          engine: {type: string, enum: [postgres, mysql]}
          storage_gb: {type: integer, minimum: 10}
          replicas: {type: integer, default: 0}
          comment: {type: string, nullable: true}
          tier: {type: string, nullable: true, enum: [gold, silver]}
          backup: {type: object, default: {}, properties: {days: {type: integer, default: 7}, window: {type: string}}}
          nodes:
            type: array
            items: {type: object, properties: {size: {type: string, default: small}, name: {type: string}}}
          tags: {type: object, additionalProperties: {type: object, properties: {on: {type: boolean, default: true}}}}
          retention: {type: integer, default: 14}
          x-ignored: {type: string, x-kubernetes-preserve-unknown-fields: true}
`

// assertProblem checks that there are problems, all in file with a line,
// and that one of them says want.
func assertProblem(t *testing.T, ps []Problem, file, want string) {
	t.Helper()
	if len(ps) == 0 {
		t.Fatal("no problem reported")
	}
	var msgs []string
	for _, p := range ps {
		msgs = append(msgs, p.String())
		if p.File != file || p.Line == 0 {
			t.Errorf("problem without file and line: %+v", p)
		}
	}
	if !strings.Contains(strings.Join(msgs, "\n"), want) {
		t.Errorf("problems %q do not mention %q", msgs, want)
	}
}

func dbResource(name, spec string) string {
	return "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata:\n  name: " + name + "\nspec:\n" + spec
}

func TestValidateAppliesDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec string
		want string
	}{
		{
			name: "top-level and nested defaults",
			spec: "  engine: postgres\n  storage_gb: 20\n",
			want: `{"backup":{"days":7},"engine":"postgres","replicas":0,"retention":14,"storage_gb":20}`,
		},
		{
			name: "explicit values win over defaults",
			spec: "  engine: postgres\n  storage_gb: 20\n  replicas: 3\n  backup: {days: 1}\n",
			want: `{"backup":{"days":1},"engine":"postgres","replicas":3,"retention":14,"storage_gb":20}`,
		},
		{
			name: "defaults in list items and map values",
			spec: "  engine: mysql\n  storage_gb: 20\n  nodes: [{name: a}, {name: b, size: big}]\n  tags: {x: {}, y: {on: false}}\n",
			want: `{"backup":{"days":7},"engine":"mysql","nodes":[{"name":"a","size":"small"},{"name":"b","size":"big"}],"replicas":0,"retention":14,"storage_gb":20,"tags":{"x":{"on":true},"y":{"on":false}}}`,
		},
		{
			name: "nullable fields keep null",
			spec: "  engine: mysql\n  storage_gb: 20\n  comment: null\n  tier: null\n",
			want: `{"backup":{"days":7},"comment":null,"engine":"mysql","replicas":0,"retention":14,"storage_gb":20,"tier":null}`,
		},
		{
			name: "null in a non-nullable field takes the default",
			spec: "  engine: mysql\n  storage_gb: 20\n  retention: null\n",
			want: `{"backup":{"days":7},"engine":"mysql","replicas":0,"retention":14,"storage_gb":20}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, ps := validateYAML(t, map[string]string{"t.yaml": dbType, "r.yaml": dbResource("db", tt.spec)}, nil)
			if len(ps) > 0 {
				t.Fatalf("problems: %v", ps)
			}
			r := set.Resources[0]
			if string(r.Spec) != tt.want {
				t.Errorf("spec\n got  %s\n want %s", r.Spec, tt.want)
			}
			if r.SpecHash != HashJSON([]byte(tt.want)) {
				t.Errorf("hash %s does not match spec", r.SpecHash)
			}
		})
	}
}

func TestValidateSpecProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		spec        string
		wantPointer string
		wantLine    int
		wantMsg     string
	}{
		{"below minimum", "  engine: postgres\n  storage_gb: 5\n", "/spec/storage_gb", 7, "must be >= 10"},
		{"wrong type", "  engine: postgres\n  storage_gb: lots\n", "/spec/storage_gb", 7, "expected integer, but got string"},
		{"not in enum", "  engine: oracle\n  storage_gb: 20\n", "/spec/engine", 6, `value must be one of "postgres", "mysql"`},
		{"missing required", "  storage_gb: 20\n", "/spec", 5, "missing properties: 'engine'"},
		{"null in a required field", "  engine: null\n  storage_gb: 20\n", "/spec", 5, "missing properties: 'engine'"},
		{"null not in nullable enum", "  engine: mysql\n  storage_gb: 20\n  tier: bronze\n", "/spec/tier", 8, "value must be one of"},
		{"nested field", "  engine: mysql\n  storage_gb: 20\n  nodes: [{size: 3}]\n", "/spec/nodes/0/size", 8, "expected string, but got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, map[string]string{"t.yaml": dbType, "r.yaml": dbResource("db", tt.spec)}, nil)
			if len(ps) != 1 {
				t.Fatalf("want one problem, got %v", ps)
			}
			p := ps[0]
			if p.File != "r.yaml" || p.Pointer != tt.wantPointer || p.Line != tt.wantLine || !strings.Contains(p.Message, tt.wantMsg) {
				t.Errorf("got %+v\nwant pointer %s line %d message containing %q", p, tt.wantPointer, tt.wantLine, tt.wantMsg)
			}
			if !strings.HasPrefix(p.Message, FieldPath(tt.wantPointer)+": ") {
				t.Errorf("message %q does not name the field %s", p.Message, FieldPath(tt.wantPointer))
			}
		})
	}
}

func TestValidateTypeProblems(t *testing.T) {
	t.Parallel()
	typ := func(spec string) string {
		return "apiVersion: no8s.io/v1\nkind: ResourceType\nmetadata:\n  name: Cache\nspec:\n" + spec
	}
	tests := []struct {
		name    string
		doc     string
		wantMsg string
	}{
		{"no versions", typ("  group: a.b\n"), "spec.versions: required field is missing"},
		{"empty versions", typ("  versions: []\n"), "spec.versions: must be a non-empty list"},
		{"duplicate version", typ("  versions:\n  - {name: v1, schema: {type: object}}\n  - {name: v1, schema: {type: object}}\n"), `duplicate version "v1"`},
		{"bad version name", typ("  versions:\n  - {name: one, schema: {type: object}}\n"), "invalid version name one"},
		{"missing schema", typ("  versions:\n  - {name: v1}\n"), "schema: required field is missing"},
		{"schema not an object type", typ("  versions:\n  - {name: v1, schema: {type: string}}\n"), "type: the schema of a spec must have type: object"},
		{"schema keyword of the wrong type", typ("  versions:\n  - {name: v1, schema: {type: object, required: yes}}\n"), "schema.required: invalid schema"},
		{"unknown type", typ("  versions:\n  - {name: v1, schema: {type: object, properties: {a: {type: strin}}}}\n"), "properties.a.type: invalid schema"},
		{"invalid default", typ("  versions:\n  - {name: v1, schema: {type: object, properties: {a: {type: integer, minimum: 3, default: 1}}}}\n"), "properties.a.default: default is invalid: must be >= 3"},
		{"remote reference", typ("  versions:\n  - {name: v1, schema: {type: object, properties: {a: {$ref: 'https://example.com/s.json'}}}}\n"), "only references within the schema"},
		{"bad pattern", typ("  versions:\n  - {name: v1, schema: {type: object, properties: {a: {type: string, pattern: '('}}}}\n"), "invalid schema"},
		{"bad group", typ("  group: Not_A_Group\n  versions:\n  - {name: v1, schema: {type: object}}\n"), "spec.group: invalid group"},
		{"bad drift interval", typ("  driftInterval: often\n  versions:\n  - {name: v1, schema: {type: object}}\n"), `spec.driftInterval: invalid duration "often"`},
		{"bad action", typ("  action: Provision DB\n  versions:\n  - {name: v1, schema: {type: object}}\n"), "spec.action: invalid action instance name"},
		{"unknown spec field", typ("  version: v1\n  versions:\n  - {name: v1, schema: {type: object}}\n"), "spec.version: unknown field"},
		{"wrong apiVersion", strings.Replace(typ("  versions:\n  - {name: v1, schema: {type: object}}\n"), "no8s.io/v1", "no8s.io/v2", 1), "a ResourceType must have apiVersion no8s.io/v1"},
		{"lower-case name", strings.Replace(typ("  versions:\n  - {name: v1, schema: {type: object}}\n"), "Cache", "cache", 1), "invalid resource type name"},
		{"reserved name", strings.Replace(typ("  versions:\n  - {name: v1, schema: {type: object}}\n"), "name: Cache", "name: ResourceType", 1), "invalid resource type name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, map[string]string{"t.yaml": tt.doc}, nil)
			assertProblem(t, ps, "t.yaml", tt.wantMsg)
		})
	}
}

func TestValidateResourceProblems(t *testing.T) {
	t.Parallel()
	ok := "spec: {engine: postgres, storage_gb: 20}\n"
	tests := []struct {
		name    string
		doc     string
		wantMsg string
	}{
		{"no apiVersion", "kind: DatabaseCluster\nmetadata: {name: a}\n" + ok, "apiVersion: required field is missing"},
		{"no kind", "apiVersion: infra.example.com/v1\nmetadata: {name: a}\n" + ok, "kind: required field is missing"},
		{"no metadata", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\n" + ok, "metadata: required field is missing"},
		{"no name", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {labels: {a: b}}\n" + ok, "metadata.name: required field is missing"},
		{"empty name", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: ''}\n" + ok, "metadata.name: must not be empty"},
		{"numeric name", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: 42}\n" + ok, "metadata.name: must be a string, not a number"},
		{"upper-case name", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: Prod}\n" + ok,
			`metadata.name: Invalid value: "Prod": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`},
		{"long name", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: " + strings.Repeat("a", 254) + "}\n" + ok,
			"metadata.name: Invalid value: \"" + strings.Repeat("a", 254) + "\": must be no more than 253 characters"},
		{"trailing dash", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: prod-}\n" + ok, `Invalid value: "prod-": a lowercase RFC 1123 subdomain`},
		{"empty label in a dotted name", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a..b}\n" + ok, `Invalid value: "a..b": a lowercase RFC 1123 subdomain`},
		{"dependsOn bad name", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "dependsOn: [{kind: Network, name: ../x}]\n",
			`dependsOn[0].name: Invalid value: "../x": a lowercase RFC 1123 subdomain`},
		{"unknown kind", "apiVersion: infra.example.com/v1\nkind: Queue\nmetadata: {name: a}\n" + ok, `unknown kind "Queue"`},
		{"unknown version", "apiVersion: infra.example.com/v9\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok, `has no version "v9" (known: v1)`},
		{"wrong group", "apiVersion: other.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok, "use infra.example.com/<version>"},
		{"no version", "apiVersion: infra.example.com\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok, "use infra.example.com/<version>"},
		{"spec not an object", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\nspec: [1]\n", "spec: must be an object, not a list"},
		{"unknown field", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "dependOn: []\n", "dependOn: unknown field"},
		{"unknown metadata field", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a, nmespace: b}\n" + ok, "metadata.nmespace: unknown field"},
		{"label not a string", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a, labels: {tier: 1}}\n" + ok, "metadata.labels.tier: must be a string, not a number"},
		{"bad label value", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a, labels: {tier: 'a b'}}\n" + ok, "invalid label value"},
		{"bad label key", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a, labels: {'-x': y}}\n" + ok, "invalid label key"},
		{"bad action", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "action: 7\n", "action: must be a string"},
		{"dependsOn not a list", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "dependsOn: {kind: Network}\n", "dependsOn: must be a list"},
		{"dependsOn bad kind", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "dependsOn: [{kind: network, name: x}]\n", "dependsOn[0].kind: invalid kind"},
		{"dependsOn itself", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "dependsOn: [{kind: DatabaseCluster, name: a}]\n", "cannot depend on itself"},
		{"pluginConfig not an object", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "pluginConfig: [main]\n", "pluginConfig: must be an object of the action's per-resource settings, not a list"},
		{"dependsOn twice", "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a}\n" + ok + "dependsOn: [{kind: Network, name: x}, {kind: Network, name: x}]\n", "duplicate dependency Network/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ps := validateYAML(t, map[string]string{"t.yaml": dbType, "r.yaml": tt.doc}, nil)
			assertProblem(t, ps, "r.yaml", tt.wantMsg)
		})
	}
}

func TestValidateDuplicates(t *testing.T) {
	t.Parallel()
	r := dbResource("same", "  engine: postgres\n  storage_gb: 20\n")
	_, ps := validateYAML(t, map[string]string{"t.yaml": dbType, "a.yaml": r, "b.yaml": r, "t2.yaml": dbType}, nil)
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	want := []string{
		`b.yaml:4: metadata.name: duplicate resource DatabaseCluster/same (first declared in a.yaml:1)`,
		`t2.yaml:4: metadata.name: duplicate ResourceType DatabaseCluster (first declared in t.yaml:1)`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestValidateUsesKnownTypes(t *testing.T) {
	t.Parallel()
	set, ps := validateYAML(t, map[string]string{"t.yaml": dbType}, nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	stored := set.Types[0]
	// Rebuild the type as a store would hand it back: name, group and raw schemas.
	rebuilt := &ResourceType{Name: stored.Name, Group: stored.Group}
	for _, v := range stored.Versions {
		rebuilt.Versions = append(rebuilt.Versions, TypeVersion{Name: v.Name, Schema: v.Schema})
	}
	if err := rebuilt.Compile(); err != nil {
		t.Fatal(err)
	}
	known := func(name string) *ResourceType {
		if name == "DatabaseCluster" {
			return rebuilt
		}
		return nil
	}
	set, ps = validateYAML(t, map[string]string{"r.yaml": dbResource("db", "  engine: postgres\n  storage_gb: 20\n")}, known)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if got := string(set.Resources[0].Spec); !strings.Contains(got, `"replicas":0`) {
		t.Errorf("defaults of the known type not applied: %s", got)
	}
	// A type in the documents wins over a known one of the same name.
	local := strings.Replace(dbType, "default: 0", "default: 1", 1)
	set, ps = validateYAML(t, map[string]string{"t.yaml": local, "r.yaml": dbResource("db", "  engine: postgres\n  storage_gb: 20\n")}, known)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if got := string(set.Resources[0].Spec); !strings.Contains(got, `"replicas":1`) {
		t.Errorf("the snapshot's own type did not win: %s", got)
	}
}

func TestValidateResourceOfBrokenType(t *testing.T) {
	t.Parallel()
	broken := strings.Replace(dbType, "type: integer, minimum: 10", "type: integr", 1)
	_, ps := validateYAML(t, map[string]string{"t.yaml": broken, "r.yaml": dbResource("db", "  engine: postgres\n")}, nil)
	var msgs []string
	for _, p := range ps {
		msgs = append(msgs, p.String())
	}
	joined := strings.Join(msgs, "\n")
	if !strings.Contains(joined, "r.yaml:2: kind: cannot validate: ResourceType DatabaseCluster (t.yaml:1) is invalid") {
		t.Errorf("resource of a broken type not explained: %s", joined)
	}
}

func TestSpecHash(t *testing.T) {
	t.Parallel()
	hashOf := func(t *testing.T, typeDoc, file, doc string) string {
		t.Helper()
		set, ps := validateYAML(t, map[string]string{"t.yaml": typeDoc, file: doc}, nil)
		if len(ps) > 0 {
			t.Fatal(ps)
		}
		return set.Resources[0].SpecHash
	}
	base := hashOf(t, dbType, "r.yaml", dbResource("db", "  engine: postgres\n  storage_gb: 20\n  replicas: 2\n"))

	same := map[string]string{
		"key order":        dbResource("db", "  replicas: 2\n  storage_gb: 20\n  engine: postgres\n"),
		"whitespace/flow":  dbResource("db", "  {  engine:   postgres,   replicas: 2,\n     storage_gb: 20 }\n"),
		"quoting":          dbResource("db", "  engine: \"postgres\"\n  storage_gb: 20\n  replicas: 2\n"),
		"float notation":   dbResource("db", "  engine: postgres\n  storage_gb: 2.0e1\n  replicas: 2\n"),
		"explicit default": dbResource("db", "  engine: postgres\n  storage_gb: 20\n  replicas: 2\n  retention: 14\n  backup: {days: 7}\n"),
		"metadata only": strings.Replace(dbResource("db", "  engine: postgres\n  storage_gb: 20\n  replicas: 2\n"),
			"name: db", "name: db\n  labels: {team: x}", 1),
	}
	for name, doc := range same {
		if got := hashOf(t, dbType, "r.yaml", doc); got != base {
			t.Errorf("%s changed the hash: %s != %s", name, got, base)
		}
	}
	asJSON := `{"apiVersion":"infra.example.com/v1","kind":"DatabaseCluster","metadata":{"name":"db"},"spec":{"storage_gb":20,"replicas":2,"engine":"postgres"}}`
	if got := hashOf(t, dbType, "r.json", asJSON); got != base {
		t.Errorf("JSON changed the hash: %s != %s", got, base)
	}

	differ := map[string]string{
		"value":              dbResource("db", "  engine: postgres\n  storage_gb: 21\n  replicas: 2\n"),
		"overridden default": dbResource("db", "  engine: postgres\n  storage_gb: 20\n  replicas: 2\n  retention: 15\n"),
	}
	for name, doc := range differ {
		if got := hashOf(t, dbType, "r.yaml", doc); got == base {
			t.Errorf("%s did not change the hash", name)
		}
	}
	// A default that changes changes the stored spec, hence the hash.
	newDefault := strings.Replace(dbType, "retention: {type: integer, default: 14}", "retention: {type: integer, default: 30}", 1)
	if newDefault == dbType {
		t.Fatal("test type did not change")
	}
	if got := hashOf(t, newDefault, "r.yaml", dbResource("db", "  engine: postgres\n  storage_gb: 20\n  replicas: 2\n")); got == base {
		t.Error("a changed default did not change the hash")
	}
}

func TestExampleRepositoryIsValid(t *testing.T) {
	t.Parallel()
	docs, err := LoadDir(filepath.Join("..", "examples", "repo"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := Validate(docs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var types, resources []string
	for _, ty := range set.Types {
		types = append(types, ty.Name)
	}
	for _, r := range set.Resources {
		resources = append(resources, r.Ref().String())
	}
	if want := []string{"DNSRecord", "DatabaseCluster", "Network"}; !reflect.DeepEqual(types, want) {
		t.Errorf("types %v, want %v", types, want)
	}
	want := []string{"DNSRecord/db-production", "DatabaseCluster/production-pg", "DatabaseCluster/staging-pg", "Network/prod-vpc"}
	if !reflect.DeepEqual(resources, want) {
		t.Errorf("resources %v, want %v", resources, want)
	}
	for _, r := range set.Resources {
		if r.Name == "staging-pg" {
			want := `{"backup_retention_days":7,"engine":"postgres","engine_version":"16.2","high_availability":false,"instance_class":"db.small","maintenance":{"day":"sun","hour_utc":3},"replicas":0,"storage_gb":50}`
			if string(r.Spec) != want {
				t.Errorf("staging-pg defaults:\n got  %s\n want %s", r.Spec, want)
			}
			if r.Action != "provision-db" {
				t.Errorf("staging-pg action %q, want its type's provision-db", r.Action)
			}
			if !r.PruneDisabled() {
				t.Error("staging-pg should have pruning disabled")
			}
		}
	}
}

// TestInvalidExamples checks that every broken example is reported, with
// its line, and says what is wrong.
func TestInvalidExamples(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "examples", "invalid")
	docs, loadErr := LoadDir(dir, LoadOptions{})
	var problems []Problem
	var verr *ValidationError
	if errors.As(loadErr, &verr) {
		problems = append(problems, verr.Problems...)
	} else if loadErr != nil {
		t.Fatal(loadErr)
	}
	if _, err := Validate(docs, nil); errors.As(err, &verr) {
		problems = append(problems, verr.Problems...)
	}
	want := map[string][]string{
		"alias-bomb.yaml":             {"2: document expands to too many values through YAML aliases"},
		"bad-api-version.yaml":        {`1: apiVersion: "wrong.example.com/v1" does not match`},
		"bad-names.yaml":              {`4: metadata.name: Invalid value: "Production_PG": a lowercase RFC 1123 subdomain must consist of`, `10: metadata.name: invalid resource type name "queue"`},
		"duplicate-b.yaml":            {"5: metadata.name: duplicate resource DatabaseCluster/twice (first declared in duplicate-a.yaml:1)"},
		"duplicate-type-version.yaml": {`9: spec.versions[1].name: duplicate version "v1"`},
		"invalid-type-schema.yaml":    {"11: spec.versions[0].schema.properties.size.type: invalid schema", "23: spec.versions[0].schema.properties.retention.default: default is invalid"},
		"malformed.yaml":              {"7: invalid YAML"},
		"missing-fields.yaml":         {"1: apiVersion: required field is missing", "6: kind: required field is missing", "12: metadata.name: required field is missing"},
		"non-utf8.yaml":               {"6: file is not valid UTF-8"},
		"schema-violation.yaml":       {`6: spec.engine: value must be one of "postgres", "mysql"`, "7: spec.storage_gb: must be >= 10 but found 5", "13: spec: missing properties: 'engine'"},
		"self-dependency.yaml":        {"7: dependsOn[0]: a resource cannot depend on itself"},
		"symlink-outside.yaml":        {"symlink points outside the source root"},
		"unknown-field.yaml":          {"6: dependOn: unknown field"},
		"unknown-spec-field.yaml":     {`8: unknown field "spec.replcias", did you mean "replicas"?`},
		"unknown-kind.yaml":           {`2: kind: unknown kind "MessageQueue"`},
		"unknown-version.yaml":        {`1: apiVersion: ResourceType DatabaseCluster has no version "v2"`},
		"wrong-type.yaml":             {"7: spec.storage_gb: expected integer, but got string"},
	}
	got := map[string][]string{}
	for _, p := range problems {
		line := p.Message
		if p.Line > 0 {
			line = strings.TrimPrefix(p.String(), p.File+":")
		}
		got[p.File] = append(got[p.File], line)
	}
	for file, wants := range want {
		for i, w := range wants {
			if i >= len(got[file]) || !strings.HasPrefix(got[file][i], w) {
				t.Errorf("%s: problem %d is %q, want prefix %q (all: %q)", file, i, at(got[file], i), w, got[file])
			}
		}
		if len(got[file]) != len(wants) {
			t.Errorf("%s: %d problems, want %d: %q", file, len(got[file]), len(wants), got[file])
		}
	}
	for file := range got {
		if _, ok := want[file]; !ok {
			t.Errorf("unexpected problems in %s: %q", file, got[file])
		}
	}
	// Every example file except the shared type must be named.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !IsManifestFile(name) || name == "types.yaml" || name == "duplicate-a.yaml" {
			continue
		}
		if _, ok := want[name]; !ok {
			t.Errorf("example %s has no expectation here", name)
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// TestPluginConfig: a resource's plugin configuration is kept as canonical
// JSON, and a change of it, like a change of spec, changes the hash that
// decides a new generation; a type's annotations are kept.
func TestPluginConfig(t *testing.T) {
	t.Parallel()
	spec := "  engine: postgres\n  storage_gb: 20\n"
	typ := strings.Replace(dbType, "metadata:\n  name: DatabaseCluster\n", "metadata:\n  name: DatabaseCluster\n  annotations: {owner: dba}\n", 1)
	hash := func(extra string) (*Resource, string) {
		t.Helper()
		set, ps := validateYAML(t, map[string]string{"t.yaml": typ, "r.yaml": dbResource("a", spec) + extra}, nil)
		if len(ps) > 0 {
			t.Fatalf("problems: %v", ps)
		}
		if got := set.Types[0].Annotations["owner"]; got != "dba" {
			t.Errorf("type annotations: %v", set.Types[0].Annotations)
		}
		return set.Resources[0], set.Resources[0].SpecHash
	}
	plain, h0 := hash("")
	withCfg, h1 := hash("pluginConfig: {region: eu, ref: main}\n")
	_, h2 := hash("pluginConfig: {ref: main, region: eu}\n")
	_, h3 := hash("pluginConfig: {ref: release, region: eu}\n")
	_, h4 := hash("pluginConfig: {}\n")
	if plain.PluginConfig != nil || h4 != h0 {
		t.Errorf("no or empty pluginConfig: %q, hash %s vs %s", plain.PluginConfig, h4, h0)
	}
	if string(withCfg.PluginConfig) != `{"ref":"main","region":"eu"}` {
		t.Errorf("pluginConfig kept as %s", withCfg.PluginConfig)
	}
	if h1 == h0 || h1 != h2 || h3 == h1 {
		t.Errorf("hashes: none %s, cfg %s, reordered %s, changed %s", h0, h1, h2, h3)
	}
}
