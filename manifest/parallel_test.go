package manifest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	gosync "sync"
	"testing"
)

// treeFiles turns a tree (path -> content) into Files in path order, as a
// source reads them.
func treeFiles(tree map[string]string) []File {
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out := make([]File, len(paths))
	for i, p := range paths {
		out[i] = File{Path: p, Data: []byte(tree[p]), Hash: HashJSON([]byte(tree[p]))}
	}
	return out
}

// outcome is what a validation gives, in a form to compare.
type outcome struct {
	Types     []string
	Resources []Resource
	Problems  []Problem
}

func validateOutcome(t *testing.T, v *Validator, files []File) outcome {
	t.Helper()
	set, err := v.ValidateFiles(files, nil)
	var out outcome
	var verr *ValidationError
	switch {
	case errors.As(err, &verr):
		out.Problems = verr.Problems
	case err != nil:
		t.Fatal(err)
	default:
		for _, ty := range set.Types {
			out.Types = append(out.Types, ty.Name+" "+ty.Fingerprint())
		}
		for _, r := range set.Resources {
			c := *r
			c.metaHash = ""
			out.Resources = append(out.Resources, c)
		}
	}
	return out
}

// manyResources is a tree of n resource files and their type.
func manyResources(n int) map[string]string {
	tree := map[string]string{"types.yaml": dbType}
	for i := range n {
		tree[fmt.Sprintf("dbs/db-%03d.yaml", i)] = dbResource(fmt.Sprintf("db-%03d", i), fmt.Sprintf("  engine: postgres\n  storage_gb: %d\n", 10+i))
	}
	return tree
}

// with returns tree with the given files added or replaced.
func with(tree map[string]string, files ...string) map[string]string {
	out := make(map[string]string, len(tree)+len(files)/2)
	for k, v := range tree {
		out[k] = v
	}
	for i := 0; i+1 < len(files); i += 2 {
		out[files[i]] = files[i+1]
	}
	return out
}

func TestValidateFilesParallelMatchesSequential(t *testing.T) {
	t.Parallel()
	base := manyResources(60)
	tests := []struct {
		name   string
		tree   map[string]string
		failed bool
	}{
		{name: "valid", tree: base},
		{name: "broken YAML", tree: with(base, "dbs/db-010.yaml", "apiVersion: [\n", "dbs/db-050.yaml", "a: b: c\n"), failed: true},
		{name: "duplicates across files", tree: with(base,
			"dbs/db-020.yaml", dbResource("db-001", "  engine: mysql\n  storage_gb: 20\n"),
			"zz.yaml", "# copy\n"+dbResource("db-030", "  engine: mysql\n  storage_gb: 20\n")), failed: true},
		{name: "unknown kinds", tree: with(base, "dbs/db-005.yaml", strings.Replace(dbResource("db-005", "  engine: x\n"), "DatabaseCluster", "Cache", 1)), failed: true},
		{name: "schema violations", tree: with(base,
			"dbs/db-007.yaml", dbResource("db-007", "  engine: oracle\n  storage_gb: 1\n"),
			"dbs/db-008.yaml", dbResource("db-008", "  storage_gb: 10.5\n  extra: {a: 1}\n")), failed: true},
		{name: "types declared in the same tree", tree: with(base,
			"more/cache.yaml", strings.ReplaceAll(dbType, "DatabaseCluster", "Cache")+"---\n"+strings.Replace(dbResource("c1", "  engine: mysql\n  storage_gb: 10\n"), "DatabaseCluster", "Cache", 1))},
		{name: "duplicate and broken types", tree: with(base,
			"more/again.yaml", dbType,
			"more/broken.yaml", strings.ReplaceAll(strings.Replace(dbType, "type: object", "type: string", 1), "DatabaseCluster", "Broken")+"---\n"+strings.Replace(dbResource("b1", ""), "DatabaseCluster", "Broken", 1)), failed: true},
		{name: "alias bombs", tree: with(base, "dbs/db-033.yaml", aliasBomb, "dbs/db-034.yaml", "x: &a [1]\ny: *b\n"), failed: true},
		{name: "type kind escaped", tree: with(base, "more/cache.yaml", strings.Replace(strings.ReplaceAll(dbType, "DatabaseCluster", "Cache"), "kind: ResourceType", `kind: "Resource\x54ype"`, 1),
			"more/c1.yaml", strings.Replace(dbResource("c1", "  engine: mysql\n  storage_gb: 10\n"), "DatabaseCluster", "Cache", 1))},
		{name: "JSON and YAML mixed", tree: with(base, "dbs/db-040.yaml", `{"apiVersion": "infra.example.com/v1", "kind": "DatabaseCluster", "metadata": {"name": "db-040"}, "spec": {"engine": "mysql", "storage_gb": 99}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := treeFiles(tt.tree)
			seq := &Validator{workers: 1}
			want := validateOutcome(t, seq, files)
			if (len(want.Problems) > 0) != tt.failed {
				t.Fatalf("sequential problems: %v", want.Problems)
			}
			par := &Validator{workers: 4}
			if got := validateOutcome(t, par, files); !reflect.DeepEqual(got, want) {
				t.Errorf("parallel validation differs:\n got %+v\nwant %+v", got, want)
			}
			// From the cache, both give the same again.
			if got := validateOutcome(t, par, files); !reflect.DeepEqual(got, want) {
				t.Errorf("cached parallel validation differs:\n got %+v\nwant %+v", got, want)
			}
			if got := validateOutcome(t, seq, files); !reflect.DeepEqual(got, want) {
				t.Errorf("cached sequential validation differs:\n got %+v\nwant %+v", got, want)
			}
			// So does a Validator whose cache holds the base tree.
			warm := &Validator{workers: 4}
			validateOutcome(t, warm, treeFiles(base))
			if got := validateOutcome(t, warm, files); !reflect.DeepEqual(got, want) {
				t.Errorf("validation after the base tree differs:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// Types another source declares are resolved through known, on the first
// call after the workers have asked for them, later before they start.
func TestValidateFilesKnownTypes(t *testing.T) {
	t.Parallel()
	set, err := Validate(mustDecode(t, "t.yaml", dbType), nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    gosync.Mutex
		calls int
	)
	known := func(kind string) *ResourceType {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if kind == "DatabaseCluster" {
			return set.Types[0]
		}
		return nil
	}
	tree := manyResources(30)
	delete(tree, "types.yaml")
	tree["dbs/db-011.yaml"] = strings.Replace(tree["dbs/db-011.yaml"], "DatabaseCluster", "Cache", 1)
	files := treeFiles(tree)
	seq := &Validator{workers: 1}
	_, wantErr := seq.ValidateFiles(files, known)
	par := &Validator{workers: 4}
	for call := range 2 {
		_, err := par.ValidateFiles(files, known)
		if err == nil || err.Error() != wantErr.Error() {
			t.Errorf("call %d: %v, want %v", call, err, wantErr)
		}
	}
	delete(tree, "dbs/db-011.yaml")
	tree["dbs/db-012.yaml"] = dbResource("db-012", "  engine: mysql\n  storage_gb: 99\n")
	got, err := par.ValidateFiles(treeFiles(tree), known)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Resources) != 29 || !strings.Contains(string(byName(got)["db-012"].Spec), `"storage_gb":99`) {
		t.Errorf("got %d resources, db-012 %s", len(got.Resources), byName(got)["db-012"].Spec)
	}
}

// countingValidator returns a Validator that counts the files it decodes.
func countingValidator() (*Validator, func() []string) {
	var (
		mu      gosync.Mutex
		decoded []string
	)
	v := &Validator{workers: 4, decoded: func(path string) {
		mu.Lock()
		defer mu.Unlock()
		decoded = append(decoded, path)
	}}
	return v, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Sorted(slices.Values(decoded))
		decoded = nil
		return out
	}
}

func TestValidatorDecodesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	tree := manyResources(20)
	tree["other.yaml"] = strings.ReplaceAll(dbType, "DatabaseCluster", "Cache") + "---\n" +
		strings.Replace(dbResource("c1", "  engine: mysql\n  storage_gb: 10\n"), "DatabaseCluster", "Cache", 1)
	v, decoded := countingValidator()
	first, err := v.ValidateFiles(treeFiles(tree), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decoded(); len(got) != len(tree) {
		t.Fatalf("first call decoded %d files, want %d", len(got), len(tree))
	}
	again, err := v.ValidateFiles(treeFiles(tree), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decoded(); len(got) != 0 {
		t.Errorf("unchanged files decoded again: %v", got)
	}
	// The types are the very same, compiled once.
	for i := range first.Types {
		if again.Types[i] != first.Types[i] {
			t.Errorf("type %s parsed and compiled again", first.Types[i].Name)
		}
	}
	// One resource changes: that file alone.
	tree["dbs/db-003.yaml"] = dbResource("db-003", "  engine: mysql\n  storage_gb: 99\n")
	if _, err := v.ValidateFiles(treeFiles(tree), nil); err != nil {
		t.Fatal(err)
	}
	if got := decoded(); !slices.Equal(got, []string{"dbs/db-003.yaml"}) {
		t.Errorf("decoded %v, want the changed file only", got)
	}
	// A type changes: its file, and the files of its resources, whose
	// documents were dropped, are decoded again; the other type's are not.
	tree["types.yaml"] = strings.Replace(dbType, "default: 14", "default: 15", 1)
	set, err := v.ValidateFiles(treeFiles(tree), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := decoded()
	if len(got) != 21 || slices.Contains(got, "other.yaml") {
		t.Errorf("after a type change decoded %v, want types.yaml and the 20 resources of the type", got)
	}
	for _, r := range set.Resources {
		if r.Kind == "DatabaseCluster" && !strings.Contains(string(r.Spec), `"retention":15`) {
			t.Errorf("%s kept the old default: %s", r.Name, r.Spec)
		}
	}
}

func TestValidatorForgetsAbsentFiles(t *testing.T) {
	t.Parallel()
	tree := manyResources(10)
	v, decoded := countingValidator()
	if _, err := v.ValidateFiles(treeFiles(tree), nil); err != nil {
		t.Fatal(err)
	}
	decoded()
	delete(tree, "dbs/db-004.yaml")
	delete(tree, "dbs/db-005.yaml")
	if _, err := v.ValidateFiles(treeFiles(tree), nil); err != nil {
		t.Fatal(err)
	}
	if len(v.cache) != len(tree) {
		t.Errorf("cache holds %d files, want the %d of the last call", len(v.cache), len(tree))
	}
	for k, e := range v.cache {
		if e.docs != nil || e.data != nil {
			t.Errorf("%s: cache entry keeps documents or content between calls", k.path)
		}
	}
	// A forgotten file is decoded again when it comes back.
	tree["dbs/db-004.yaml"] = dbResource("db-004", "  engine: postgres\n  storage_gb: 14\n")
	if _, err := v.ValidateFiles(treeFiles(tree), nil); err != nil {
		t.Fatal(err)
	}
	if got := decoded(); !slices.Equal(got, []string{"dbs/db-004.yaml"}) {
		t.Errorf("decoded %v, want the returning file only", got)
	}
}

// A duplicate found in a file whose documents the cache dropped is
// reported at the line of its name, as when the file is new.
func TestValidatorDuplicateLineFromCache(t *testing.T) {
	t.Parallel()
	tree := manyResources(5)
	tree["zz.yaml"] = "# a comment\n\n" + dbResource("extra", "  engine: mysql\n  storage_gb: 10\n")
	warm := &Validator{}
	if _, err := warm.ValidateFiles(treeFiles(tree), nil); err != nil {
		t.Fatal(err)
	}
	// a.yaml, new and first in order, declares what cached zz.yaml does.
	tree["a.yaml"] = dbResource("extra", "  engine: mysql\n  storage_gb: 10\n")
	want := validateOutcome(t, &Validator{}, treeFiles(tree))
	got := validateOutcome(t, warm, treeFiles(tree))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems from the cache differ:\n got %+v\nwant %+v", got.Problems, want.Problems)
	}
	if len(want.Problems) != 1 || want.Problems[0].File != "zz.yaml" || want.Problems[0].Line != 6 {
		t.Errorf("want one duplicate at zz.yaml:6, got %+v", want.Problems)
	}
	// The same for a type: the cached types.yaml repeats what new
	// a-types.yaml declares.
	delete(tree, "a.yaml")
	tree["a-types.yaml"] = "# the same type\n" + dbType
	want = validateOutcome(t, &Validator{}, treeFiles(tree))
	got = validateOutcome(t, warm, treeFiles(tree))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("type problems from the cache differ:\n got %+v\nwant %+v", got.Problems, want.Problems)
	}
	if len(want.Problems) != 1 || want.Problems[0].File != "types.yaml" || want.Problems[0].Line != 4 {
		t.Errorf("want one duplicate at types.yaml:4, got %+v", want.Problems)
	}
}
