package manifest

import (
	"strings"
	"testing"
)

func files(m map[string]string) []File {
	var out []File
	for _, name := range []string{"t.yaml", "a.yaml", "b.yaml", "c.yaml"} {
		if data, ok := m[name]; ok {
			out = append(out, File{Path: name, Data: []byte(data), Hash: HashJSON([]byte(data))})
		}
	}
	return out
}

func byName(set *Set) map[string]*Resource {
	out := map[string]*Resource{}
	for _, r := range set.Resources {
		out[r.Name] = r
	}
	return out
}

func TestValidatorReusesUnchangedWork(t *testing.T) {
	t.Parallel()
	tree := map[string]string{
		"t.yaml": dbType,
		"a.yaml": dbResource("a", "  engine: postgres\n  storage_gb: 20\n"),
		"b.yaml": dbResource("b", "  engine: mysql\n  storage_gb: 30\n"),
	}
	var v Validator
	first, err := v.ValidateFiles(files(tree), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Same files: the very same resources come back, nothing is validated again.
	again, err := v.ValidateFiles(files(tree), nil)
	if err != nil {
		t.Fatal(err)
	}
	if byName(again)["a"] != byName(first)["a"] || byName(again)["b"] != byName(first)["b"] {
		t.Error("unchanged files were validated again")
	}
	// One file changes: only its resources are new.
	tree["b.yaml"] = dbResource("b", "  engine: mysql\n  storage_gb: 40\n")
	changed, err := v.ValidateFiles(files(tree), nil)
	if err != nil {
		t.Fatal(err)
	}
	if byName(changed)["a"] != byName(first)["a"] {
		t.Error("the unchanged file was validated again")
	}
	if byName(changed)["b"] == byName(first)["b"] || !strings.Contains(string(byName(changed)["b"].Spec), `"storage_gb":40`) {
		t.Errorf("the changed file was not validated again: %s", byName(changed)["b"].Spec)
	}
	// The type changes: every resource is validated again, new default applied.
	tree["t.yaml"] = strings.Replace(dbType, "replicas: {type: integer, default: 0}", "replicas: {type: integer, default: 2}", 1)
	retyped, err := v.ValidateFiles(files(tree), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range byName(retyped) {
		if !strings.Contains(string(r.Spec), `"replicas":2`) {
			t.Errorf("%s kept the old default: %s", name, r.Spec)
		}
	}
	// A problem in one file fails the whole set, and goes away when fixed.
	tree["c.yaml"] = dbResource("a", "  engine: postgres\n  storage_gb: 20\n")
	if _, err := v.ValidateFiles(files(tree), nil); err == nil || !strings.Contains(err.Error(), "duplicate resource DatabaseCluster/a") {
		t.Errorf("duplicate across files not reported: %v", err)
	}
	delete(tree, "c.yaml")
	if _, err := v.ValidateFiles(files(tree), nil); err != nil {
		t.Errorf("fixed tree still fails: %v", err)
	}
	if len(v.cache) != 3 {
		t.Errorf("cache holds %d files, want the 3 of the last snapshot", len(v.cache))
	}
}

func TestValidatorNoticesKnownTypeChanges(t *testing.T) {
	t.Parallel()
	set, err := Validate(mustDecode(t, "t.yaml", dbType), nil)
	if err != nil {
		t.Fatal(err)
	}
	known := set.Types[0]
	tree := map[string]string{"a.yaml": dbResource("a", "  engine: postgres\n  storage_gb: 20\n")}
	var v Validator
	resolve := func(name string) *ResourceType {
		if name == known.Name {
			return known
		}
		return nil
	}
	first, err := v.ValidateFiles(files(tree), resolve)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := v.ValidateFiles(files(tree), resolve); byName(got)["a"] != byName(first)["a"] {
		t.Error("unchanged known type caused validation")
	}
	changedSet, err := Validate(mustDecode(t, "t.yaml", strings.Replace(dbType, "default: 14", "default: 99", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	known = changedSet.Types[0]
	got, err := v.ValidateFiles(files(tree), resolve)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(byName(got)["a"].Spec), `"retention":99`) {
		t.Errorf("changed known type not applied: %s", byName(got)["a"].Spec)
	}
	// The type disappears: the resource's kind is unknown now.
	resolveNone := func(string) *ResourceType { return nil }
	if _, err := v.ValidateFiles(files(tree), resolveNone); err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Errorf("vanished type not noticed: %v", err)
	}
}

func mustDecode(t *testing.T, name, data string) []*Document {
	t.Helper()
	docs, ps := DecodeFile(name, []byte(data), DecodeOptions{})
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	return docs
}
