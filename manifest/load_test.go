package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// writeTree writes files (slash paths -> content) under a new temp folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func docFiles(docs []*Document) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.File)
	}
	return out
}

func loadProblems(t *testing.T, err error) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err == nil {
		return out
	}
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("not a validation error: %v", err)
	}
	for _, p := range verr.Problems {
		out[p.File] = p.Message
	}
	return out
}

func TestLoadDirSelectsFiles(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{
		"a.yaml":             "a: 1\n",
		"b.yml":              "b: 1\n",
		"c.json":             `{"c": 1}`,
		"D.YAML":             "d: 1\n",
		"sub/deeper/e.yaml":  "e: 1\n---\nf: 1\n",
		"README.md":          "# not a manifest\n",
		"notes.txt":          "a: 1\n",
		".hidden.yaml":       "h: 1\n",
		".git/config.yaml":   "g: 1\n",
		"sub/.secret/x.yaml": "x: 1\n",
		"ignored/skip.yaml":  "s: 1\n",
		"sub/skip-this.yaml": "s: 1\n",
		"empty.yaml":         "",
		"comments-only.yaml": "# nothing\n",
	})
	docs, err := LoadDir(root, LoadOptions{Ignore: func(p string, isDir bool) bool {
		return (isDir && p == "ignored") || p == "sub/skip-this.yaml"
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"D.YAML", "a.yaml", "b.yml", "c.json", "sub/deeper/e.yaml", "sub/deeper/e.yaml"}
	if got := docFiles(docs); !reflect.DeepEqual(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

func TestLoadDirFileProblems(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{
		"good.yaml":   "a: 1\n",
		"broken.yaml": "a: 1\n---\nb: [\n",
		"big.yaml":    "a: " + strings.Repeat("x", 2000) + "\n",
		"exact.yaml":  "a: " + strings.Repeat("x", 1021) + "\n", // 1025 bytes
	})
	docs, err := LoadDir(root, LoadOptions{MaxFileSize: 1025})
	got := loadProblems(t, err)
	if got["big.yaml"] != "file is 2004 bytes, over the limit of 1025 bytes (maxFileSize)" {
		t.Errorf("big.yaml: %q", got["big.yaml"])
	}
	if !strings.Contains(got["broken.yaml"], "invalid YAML") {
		t.Errorf("broken.yaml: %q", got["broken.yaml"])
	}
	if len(got) != 2 {
		t.Errorf("problems %v", got)
	}
	// The good document of the broken file is dropped with it: a file counts whole.
	if files := docFiles(docs); !reflect.DeepEqual(files, []string{"exact.yaml", "good.yaml"}) {
		t.Errorf("documents from %v", files)
	}
}

func TestLoadDirDefaultSizeLimit(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{
		"huge.yaml": "a: \"" + strings.Repeat("x", DefaultMaxFileSize) + "\"\n",
	})
	_, err := LoadDir(root, LoadOptions{})
	if got := loadProblems(t, err)["huge.yaml"]; !strings.Contains(got, "file is 1572870 bytes, over the limit of 1572864 bytes (maxFileSize)") {
		t.Errorf("huge.yaml: %q", got)
	}
}

func TestLoadDirSymlinks(t *testing.T) {
	t.Parallel()
	outside := writeTree(t, map[string]string{"secret.yaml": "password: hunter2\n"})
	root := writeTree(t, map[string]string{
		"real/target.yaml": "a: 1\n",
		"real/dir/x.yaml":  "x: 1\n",
	})
	links := map[string]string{
		"inside.yaml":       "real/target.yaml",
		"relative-out.yaml": "../" + filepath.Base(outside) + "/secret.yaml",
		"absolute-out.yaml": filepath.Join(outside, "secret.yaml"),
		"hop.yaml":          "real/hop-out.yaml",
		"real/hop-out.yaml": filepath.Join(outside, "secret.yaml"),
		"dangling.yaml":     "real/missing.yaml",
		"folder.yaml":       "real/dir",
		// A link to a sibling folder is read through the whole tree, not
		// through its own folder, where it would lead out.
		"real/dir/up.yaml": "../target.yaml",
	}
	// relative-out needs outside to be a sibling of root: both are in TempDir's parent? Not
	// guaranteed, so point it through as many ../ as it takes.
	rel, err := filepath.Rel(root, filepath.Join(outside, "secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	links["relative-out.yaml"] = rel
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := LoadDir(root, LoadOptions{})
	got := loadProblems(t, err)
	want := map[string]string{
		"relative-out.yaml": "symlink points outside the source root",
		"absolute-out.yaml": "symlink points outside the source root",
		"real/hop-out.yaml": "symlink points outside the source root",
		"hop.yaml":          "cannot follow symlink",
		"dangling.yaml":     "cannot follow symlink",
		"folder.yaml":       "symlink to a folder",
	}
	for file, msg := range want {
		if !strings.Contains(got[file], msg) {
			t.Errorf("%s: %q, want %q", file, got[file], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v", got)
	}
	for _, d := range docs {
		if _, leaked := d.Object["password"]; leaked {
			t.Fatalf("%s read a file outside the root", d.File)
		}
	}
	if files := docFiles(docs); !reflect.DeepEqual(files, []string{"inside.yaml", "real/dir/up.yaml", "real/dir/x.yaml", "real/target.yaml"}) {
		t.Errorf("documents from %v", files)
	}
}

func TestLoadDirMissingRoot(t *testing.T) {
	t.Parallel()
	_, err := LoadDir(filepath.Join(t.TempDir(), "nope"), LoadOptions{})
	var verr *ValidationError
	if err == nil || errors.As(err, &verr) {
		t.Fatalf("want an I/O error, got %v", err)
	}
}

// Files are read in parallel, but come back in the walk's order, each with
// its own content and hash, and so do the problems.
func TestReadDirKeepsOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wantFiles, wantProblems []string
	contents := map[string]string{}
	for i := range 300 {
		name := fmt.Sprintf("d%d/f%03d.yaml", i%7, i)
		content := fmt.Sprintf("n: %d\n", i)
		if i%50 == 0 {
			content = strings.Repeat("x", 200)
		}
		contents[name] = content
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			wantProblems = append(wantProblems, name)
		} else {
			wantFiles = append(wantFiles, name)
		}
	}
	sort.Strings(wantFiles)
	sort.Strings(wantProblems)
	files, problems, err := ReadDir(dir, LoadOptions{MaxFileSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var gotFiles, gotProblems []string
	for _, f := range files {
		gotFiles = append(gotFiles, f.Path)
		if string(f.Data) != contents[f.Path] {
			t.Errorf("%s holds %q, want %q", f.Path, f.Data, contents[f.Path])
		}
		if f.Hash != HashJSON(f.Data) {
			t.Errorf("%s: hash %s is not its content's", f.Path, f.Hash)
		}
	}
	for _, p := range problems {
		gotProblems = append(gotProblems, p.File)
	}
	if !reflect.DeepEqual(gotFiles, wantFiles) {
		t.Errorf("files in order %v, want %v", gotFiles, wantFiles)
	}
	if !reflect.DeepEqual(gotProblems, wantProblems) {
		t.Errorf("problems in order %v, want %v", gotProblems, wantProblems)
	}
}
