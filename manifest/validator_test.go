package manifest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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

// TestValidatorAssemblesAsAFreshOne changes a tree at random, a few files
// at a time (edits, additions, deletions, renames, names declared twice,
// invalid specs, a changed type), and checks after every step that the
// Validator that saw every step answers exactly as one that sees only the
// last: the same resources in the same order, or the same problems.
func TestValidatorAssemblesAsAFreshOne(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			tree := map[string]string{"types/db.yaml": dbType}
			// Names are drawn from many, so that most steps are valid and
			// build on the last valid set; some repeat a name.
			name := func() string { return fmt.Sprintf("db-%03d", rng.IntN(800)) }
			doc := func() string {
				d := dbResource(name(), fmt.Sprintf("  engine: postgres\n  storage_gb: %d\n", 10+rng.IntN(50)))
				if rng.IntN(5) == 0 {
					// Generator metadata: ignored, with a warning.
					d = strings.Replace(d, "metadata:\n", "metadata:\n  uid: 1234\n", 1)
				}
				if rng.IntN(3) == 0 {
					// A namespace: the same name may be in several, and
					// "default" is where one without is.
					ns := []string{"team-a", "team-b", "default"}[rng.IntN(3)]
					d = strings.Replace(d, "metadata:\n", "metadata:\n  namespace: "+ns+"\n", 1)
				}
				return d
			}
			for i := range 40 {
				tree[fmt.Sprintf("r/%03d.yaml", i)] = dbResource(fmt.Sprintf("db-%03d", 800+i), "  engine: mysql\n  storage_gb: 20\n")
			}
			paths := func() []string {
				ps := slices.Sorted(maps.Keys(tree))
				return slices.DeleteFunc(ps, func(p string) bool { return p == "types/db.yaml" })
			}
			// repair makes every name unique and every spec valid again,
			// so that a broken tree does not stay broken.
			unique := 0
			repair := func() {
				seen := map[string]bool{}
				for _, p := range paths() {
					docs := strings.Split(tree[p], "---\n")
					for i, d := range docs {
						n := d[strings.Index(d, "  name: ")+8:]
						n = n[:strings.IndexByte(n, '\n')]
						ns := "default"
						if i := strings.Index(d, "namespace: "); i >= 0 {
							ns = d[i+11:]
							ns = ns[:strings.IndexByte(ns, '\n')]
						}
						n = ns + "/" + n
						if seen[n] || strings.Contains(d, "oracle") {
							unique++
							docs[i] = dbResource(fmt.Sprintf("db-u%03d", unique), "  engine: mysql\n  storage_gb: 20\n")
						}
						seen[n] = true
					}
					tree[p] = strings.Join(docs, "---\n")
				}
			}
			var v Validator
			for step := range 150 {
				if rng.IntN(2) == 0 {
					repair()
				}
				for range 1 + rng.IntN(3) {
					ps := paths()
					switch op := rng.IntN(20); {
					case op < 7 && len(ps) > 0: // edit, perhaps to a name another file has
						tree[ps[rng.IntN(len(ps))]] = doc()
					case op < 12: // add, one or two documents
						d := doc()
						if rng.IntN(3) == 0 {
							d += "---\n" + doc()
						}
						tree[fmt.Sprintf("r/%03d.yaml", 40+rng.IntN(200))] = d
					case op < 16 && len(ps) > 0: // delete
						delete(tree, ps[rng.IntN(len(ps))])
					case op < 18 && len(ps) > 0: // rename
						p := ps[rng.IntN(len(ps))]
						tree["s/"+strings.TrimPrefix(p, "r/")] = tree[p]
						delete(tree, p)
					case op < 19 && len(ps) > 0: // invalid spec
						tree[ps[rng.IntN(len(ps))]] = dbResource(name(), "  engine: oracle\n  storage_gb: 20\n")
					default: // the type's default changes: every resource again
						tree["types/db.yaml"] = strings.Replace(dbType, "default: 0}", fmt.Sprintf("default: %d}", rng.IntN(3)), 1)
					}
				}
				var fs []File
				for _, p := range slices.Sorted(maps.Keys(tree)) {
					fs = append(fs, File{Path: p, Data: []byte(tree[p]), Hash: HashJSON([]byte(tree[p]))})
				}
				got, gotErr := v.ValidateFiles(fs, nil)
				if len(v.cache) != len(fs) {
					t.Fatalf("step %d: %d files remembered, want the %d of the tree", step, len(v.cache), len(fs))
				}
				var fresh Validator
				want, wantErr := fresh.ValidateFiles(fs, nil)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("step %d: got error %v, a fresh validator %v", step, gotErr, wantErr)
				}
				if wantErr != nil {
					continue
				}
				if fmt.Sprint(got.Warnings, got.UnknownFields) != fmt.Sprint(want.Warnings, want.UnknownFields) {
					t.Fatalf("step %d: warnings %v %v, a fresh validator's %v %v", step, got.Warnings, got.UnknownFields, want.Warnings, want.UnknownFields)
				}
				if len(got.Resources) != len(want.Resources) {
					t.Fatalf("step %d: %d resources, a fresh validator %d", step, len(got.Resources), len(want.Resources))
				}
				for i, r := range got.Resources {
					w := want.Resources[i]
					if r.Ref() != w.Ref() || r.Origin != w.Origin || string(r.Spec) != string(w.Spec) || r.SpecHash != w.SpecHash {
						t.Fatalf("step %d: resource %d is %s at %v %s, a fresh validator's %s at %v %s", step, i, r.Ref(), r.Origin, r.Spec, w.Ref(), w.Origin, w.Spec)
					}
				}
			}
			// Most steps must have been made from the last set, or this
			// test says nothing of that path.
			if v.reassembled < 60 {
				t.Errorf("%d of 150 sets made from the last one; want most", v.reassembled)
			}
		})
	}
}
