package manifest

import (
	"maps"
	"reflect"
	"testing"
)

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestMapInterner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		maxMaps  int
		maxBytes int
		a, b     map[string]string
		shared   bool
	}{
		{"equal contents share", 10, 1 << 10, map[string]string{"team": "a", "env": "prod"}, map[string]string{"env": "prod", "team": "a"}, true},
		{"different values do not", 10, 1 << 10, map[string]string{"team": "a"}, map[string]string{"team": "b"}, false},
		{"boundaries between key and value count", 10, 1 << 10, map[string]string{"a": "bc"}, map[string]string{"ab": "c"}, false},
		{"a subset is another map", 10, 1 << 10, map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, false},
		{"no room for maps: copies", 0, 1 << 10, map[string]string{"team": "a"}, map[string]string{"team": "a"}, false},
		{"no room for bytes: copies", 10, 4, map[string]string{"team": "a"}, map[string]string{"team": "a"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := newMapInterner(tc.maxMaps, tc.maxBytes)
			a, b := in.share(maps.Clone(tc.a)), in.share(maps.Clone(tc.b))
			if !maps.Equal(a, tc.a) || !maps.Equal(b, tc.b) {
				t.Fatalf("contents changed: %v %v", a, b)
			}
			if got := sameMap(a, b); got != tc.shared {
				t.Errorf("shared = %v, want %v", got, tc.shared)
			}
		})
	}
}

// Resources parsed from different files with the same labels hold one map;
// with other labels, another.
func TestParsedResourcesShareLabels(t *testing.T) {
	t.Parallel()
	files := treeFiles(map[string]string{
		"types.yaml": dbType,
		"a.yaml":     "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: a, labels: {tier: shared-test-gold}}\nspec: {engine: postgres, storage_gb: 10}\n",
		"b.yaml":     "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: b, labels: {tier: shared-test-gold}}\nspec: {engine: postgres, storage_gb: 20}\n",
		"c.yaml":     "apiVersion: infra.example.com/v1\nkind: DatabaseCluster\nmetadata: {name: c, labels: {tier: shared-test-iron}}\nspec: {engine: mysql, storage_gb: 30}\n",
	})
	var v Validator
	set, err := v.ValidateFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Resource{}
	for _, r := range set.Resources {
		byName[r.Name] = r
	}
	if !sameMap(byName["a"].Labels, byName["b"].Labels) {
		t.Error("a and b have equal labels in two maps")
	}
	if sameMap(byName["a"].Labels, byName["c"].Labels) || byName["c"].Labels["tier"] != "shared-test-iron" {
		t.Errorf("c's labels: %v", byName["c"].Labels)
	}
}
