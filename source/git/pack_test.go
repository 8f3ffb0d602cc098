package git

import (
	"bytes"
	"compress/zlib"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/no8s/no8s-agent/source/git/gittest"
)

// mktree makes a tree in r from "mode type hash\tname" lines, as git
// itself writes it (git sorts the entries).
func mktree(t *testing.T, r *gittest.Repo, lines ...string) string {
	t.Helper()
	cmd := exec.Command("git", "-C", r.Dir, "mktree")
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mktree: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// rawObject reads object h of r as git stores it: its content.
func rawObject(t *testing.T, r *gittest.Repo, typ, h string) []byte {
	t.Helper()
	cmd := exec.Command("git", "-C", r.Dir, "cat-file", typ, h)
	cmd.Env = gittest.Env()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cat-file %s: %v", h, err)
	}
	return out
}

// TestParseTreeAsGitWritesIt parses a tree git wrote, with names whose
// order differs between git's and a plain sort, every mode and names with
// spaces and other scripts: the entries are go-git's, in git's order, and
// compareTreeNames orders them as git did.
func TestParseTreeAsGitWritesIt(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	file := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(file, []byte("x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	blob := r.Git("hash-object", "-w", file)
	sub := mktree(t, r, "100644 blob "+blob+"\tx.yaml")
	tree := mktree(t, r,
		"100644 blob "+blob+"\ta.yaml",
		"040000 tree "+sub+"\ta",
		"040000 tree "+sub+"\ta-b",
		"100755 blob "+blob+"\ta0",
		"120000 blob "+blob+"\tlink to a",
		"160000 commit "+strings.Repeat("5", 40)+"\tvendor",
		"100644 blob "+blob+"\tnaïve ünïcode.yaml",
		"040000 tree "+sub+"\tb.c",
	)
	h := plumbing.NewHash(tree)
	got, err := parseTree(h, rawObject(t, r, "tree", tree))
	if err != nil {
		t.Fatal(err)
	}
	st := filesystem.NewStorage(osfs.New(filepath.Join(r.Dir, ".git")), cache.NewObjectLRUDefault())
	defer st.Close()
	want, err := object.GetTree(st, h)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != h || !slices.Equal(got.Entries, want.Entries) {
		t.Fatalf("parsed %v, go-git %v", got.Entries, want.Entries)
	}
	if len(got.Entries) != 8 {
		t.Fatalf("%d entries", len(got.Entries))
	}
	for i := 1; i < len(got.Entries); i++ {
		if c := compareTreeNames(got.Entries[i-1], got.Entries[i]); c >= 0 {
			t.Errorf("compareTreeNames(%q, %q) = %d, git put them in this order", got.Entries[i-1].Name, got.Entries[i].Name, c)
		}
		if c := compareTreeNames(got.Entries[i], got.Entries[i-1]); c <= 0 {
			t.Errorf("compareTreeNames(%q, %q) = %d", got.Entries[i].Name, got.Entries[i-1].Name, c)
		}
	}
	if c := compareTreeNames(got.Entries[0], got.Entries[0]); c != 0 {
		t.Errorf("an entry compared with itself: %d", c)
	}
}

// TestParseTreeRefusesMalformed feeds trees git's fsck refuses and
// truncated ones: each is an error, never a partial list.
func TestParseTreeRefusesMalformed(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("\x01", 20)
	cases := map[string]string{
		"empty name":        "100644 \x00" + hash,
		"slash in name":     "100644 a/b\x00" + hash,
		"no space":          "100644a\x00" + hash,
		"no mode":           " a\x00" + hash,
		"mode not octal":    "100648 a\x00" + hash,
		"mode too large":    "77777777777 a\x00" + hash,
		"no zero byte":      "100644 a" + hash,
		"short hash":        "100644 a\x00" + hash[:19],
		"second truncated":  "100644 a\x00" + hash + "100644 b\x00" + hash[:3],
		"trailing mode":     "100644 a\x00" + hash + "1006",
		"name at end of it": "100644 abc",
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tree, err := parseTree(plumbing.ZeroHash, []byte(raw))
			if err == nil {
				t.Fatalf("parsed %v", tree.Entries)
			}
		})
	}
}

// FuzzParseTree checks that whatever parseTree accepts, go-git's decoder
// reads the same way.
func FuzzParseTree(f *testing.F) {
	hash := strings.Repeat("\x02", 20)
	f.Add([]byte("100644 a.yaml\x00" + hash + "40000 d\x00" + hash))
	f.Add([]byte("160000 m\x00" + hash))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := parseTree(plumbing.ZeroHash, raw)
		if err != nil {
			return
		}
		obj := &plumbing.MemoryObject{}
		obj.SetType(plumbing.TreeObject)
		obj.Write(raw)
		var want object.Tree
		if err := want.Decode(obj); err != nil {
			t.Fatalf("parsed %v, go-git: %v", got.Entries, err)
		}
		if !slices.Equal(got.Entries, want.Entries) {
			t.Fatalf("parsed %v, go-git %v", got.Entries, want.Entries)
		}
		for _, e := range got.Entries {
			if e.Name == "" || strings.Contains(e.Name, "/") {
				t.Fatalf("accepted name %q", e.Name)
			}
		}
	})
}

// TestLooseWriterStoresObjectsUnderTheirOwnNames copies objects from a
// remote whose store was tampered with: a blob file holding other content,
// and a tree given with other bytes. Each copy fails and leaves nothing
// under the genuine name, nor a temporary file; the genuine objects are
// stored, and each file's content hashes to its name. A copy that took the
// remote's word for names would leave the tampered content in the clone.
func TestLooseWriterStoresObjectsUnderTheirOwnNames(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n", "d/b.yaml": "b: 1\n"})
	r.Commit("one")
	blob := plumbing.NewHash(r.Git("rev-parse", "HEAD:a.yaml"))
	tree := plumbing.NewHash(r.Git("rev-parse", "HEAD^{tree}"))
	commit := plumbing.NewHash(r.Git("rev-parse", "HEAD"))
	from := filesystem.NewStorage(osfs.New(filepath.Join(r.Dir, ".git")), cache.NewObjectLRUDefault())
	defer from.Close()
	treeRaw := rawObject(t, r, "tree", tree.String())
	commitRaw := rawObject(t, r, "commit", commit.String())

	dir := filepath.Join(t.TempDir(), "objects")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &looseWriter{dir: dir}
	// Genuine: stored.
	if err := copyObjects(from, w, []newObject{
		{hash: commit, typ: plumbing.CommitObject, data: commitRaw},
		{hash: tree, typ: plumbing.TreeObject, data: treeRaw},
	}); err != nil {
		t.Fatal(err)
	}
	// A tree's bytes that are not its own.
	wrong := append(slices.Clone(treeRaw[:len(treeRaw)-1]), treeRaw[len(treeRaw)-1]^1)
	if err := (&looseWriter{dir: dir}).add(plumbing.NewHash(strings.Repeat("ab", 20)), plumbing.TreeObject, int64(len(wrong)), bytes.NewReader(wrong)); !errors.Is(err, errObjectMismatch) {
		t.Fatalf("tree with other bytes: %v, want errObjectMismatch", err)
	}
	// The remote's tree file replaced by another tree's: read from the
	// remote's files, it is refused, as go-git's store refuses it.
	otherTree := mktree(t, r, "100644 blob "+blob.String()+"\tother.yaml")
	remote := &localRemote{dir: filepath.Join(r.Dir, ".git"), files: &remoteFiles{Filesystem: osfs.New(filepath.Join(r.Dir, ".git")), dir: filepath.Join(r.Dir, ".git")}, st: from}
	if got, err := readRemoteRaw(remote, plumbing.TreeObject, tree); err != nil || !bytes.Equal(got, treeRaw) {
		t.Fatalf("genuine tree: %q, %v", got, err)
	}
	orig := replaceLoose(t, r, tree.String(), otherTree)
	if _, err := readRemoteRaw(remote, plumbing.TreeObject, tree); !errors.Is(err, errObjectMismatch) {
		t.Fatalf("tampered tree: %v, want errObjectMismatch", err)
	}
	if _, err := readRemoteRaw(remote, plumbing.CommitObject, plumbing.NewHash(otherTree)); err == nil {
		t.Fatal("a tree read as a commit")
	}
	writeLoose(t, r, tree.String(), orig)
	// The remote's blob file replaced by another blob's.
	evil := filepath.Join(t.TempDir(), "evil")
	if err := os.WriteFile(evil, []byte("evil: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	replaceLoose(t, r, blob.String(), r.Git("hash-object", "-w", evil))
	if err := copyObjects(from, &looseWriter{dir: dir}, []newObject{{hash: blob, typ: plumbing.BlobObject}}); !errors.Is(err, errObjectMismatch) {
		t.Fatalf("tampered blob: %v, want errObjectMismatch", err)
	}

	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	loose, _ := filepath.Glob(filepath.Join(dir, "??", "*"))
	if len(names) != 2 || len(loose) != 2 {
		t.Fatalf("objects folder holds %v and %v, want the commit and the tree alone", names, loose)
	}
	for _, name := range loose {
		typ, content := readLooseFile(t, name)
		want := filepath.Base(filepath.Dir(name)) + filepath.Base(name)
		if got := plumbing.ComputeHash(typ, content).String(); got != want {
			t.Errorf("the clone holds %s whose content is %s", want, got)
		}
	}
}

// readLooseFile decodes a loose object file.
func readLooseFile(t *testing.T, name string) (plumbing.ObjectType, []byte) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	all, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	head, content, ok := bytes.Cut(all, []byte{0})
	if !ok {
		t.Fatalf("%s: no header", name)
	}
	kind, _, _ := strings.Cut(string(head), " ")
	typ, err := plumbing.ParseObjectType(kind)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return typ, content
}
