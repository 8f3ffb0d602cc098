package git

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

// fetchedWith fetches s, checks the snapshot holds want, and returns how
// the fetch said it brought the head ("local", "go-git", "git"; "" when
// nothing was fetched).
func fetchedWith(t *testing.T, s *Source, logs *bytes.Buffer, want map[string]string) string {
	t.Helper()
	logs.Reset()
	assertContents(t, fetch(t, s), want)
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "msg=fetched") {
			_, with, _ := strings.Cut(line, " with=")
			with, _, _ = strings.Cut(with, " ")
			return with
		}
	}
	return ""
}

func newLoggedSource(t *testing.T, url string, edit func(*Config)) (*Source, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s := newSource(t, url, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if edit != nil {
			edit(c)
		}
	})
	return s, &logs
}

// TestLocalFetchCopiesWhatCommitsBring follows a file:// remote through
// commits that change, add and remove files in nested folders, a repack of
// the remote, several commits at once, a head moved back and a force-push
// to other history: every snapshot is the remote's, the common cases are
// copied in this process, and the clone stays one git itself can read.
func TestLocalFetchCopiesWhatCommitsBring(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	files := map[string]string{
		"a/one.yaml":   "kind: A\nname: one\n",
		"a/two.yaml":   "kind: A\nname: two\n",
		"b/c/deep.yml": "kind: B\nname: deep\n",
		"top.yaml":     "kind: T\nname: top\n",
	}
	r.Write(files)
	first := r.Commit("first")
	s, logs := newLoggedSource(t, r.URL(), nil)
	s.localMaxCommits = 5
	if with := fetchedWith(t, s, logs, files); with == "local" {
		t.Errorf("the first fetch was copied locally: the clone had nothing to build on")
	}

	step := func(name, wantWith string) {
		t.Helper()
		if with := fetchedWith(t, s, logs, files); with != wantWith {
			t.Errorf("%s: fetched with %q, want %q\n%s", name, with, wantWith, logs)
		}
		// git itself reads the clone: every object the head needs is there.
		if out, err := gitIn(s.cfg.CacheDir, "fsck", "--connectivity-only", "--no-dangling"); err != nil {
			t.Fatalf("%s: git fsck of the clone: %v\n%s", name, err, out)
		}
	}

	files["a/one.yaml"] = "kind: A\nname: one\nspec: {size: 2}\n"
	r.Write(files)
	r.Commit("change one file")
	step("one file changed", "local")

	files["b/c/new.yaml"] = "kind: B\nname: new\n"
	delete(files, "a/two.yaml")
	r.Write(files)
	r.Git("rm", "-q", "a/two.yaml")
	r.Commit("add and remove")
	step("a file added, another removed", "local")

	r.Git("gc", "-q", "--prune=now")
	files["top.yaml"] = "kind: T\nname: top\nspec: {size: 3}\n"
	r.Write(files)
	r.Commit("after a repack")
	step("after the remote was repacked", "local")

	for i := range 3 {
		files[fmt.Sprintf("many/%d.yaml", i)] = fmt.Sprintf("kind: M\nname: m%d\n", i)
		r.Write(files)
		r.Commit(fmt.Sprintf("commit %d of three", i))
	}
	step("three commits at once", "local")

	// The branch moves back to the first commit: the clone has it.
	r.Git("reset", "-q", "--hard", first)
	files = map[string]string{
		"a/one.yaml":   "kind: A\nname: one\n",
		"a/two.yaml":   "kind: A\nname: two\n",
		"b/c/deep.yml": "kind: B\nname: deep\n",
		"top.yaml":     "kind: T\nname: top\n",
	}
	step("moved back to the first commit", "local")

	// Other history altogether, beyond what a local copy walks: fetched
	// the usual way.
	r.Git("checkout", "-q", "--orphan", "other")
	r.Git("rm", "-rq", "--cached", ".")
	for _, f := range []string{"a", "b", "top.yaml", "many"} {
		if err := os.RemoveAll(filepath.Join(r.Dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	files = map[string]string{}
	for i := range s.localMaxCommits + 1 {
		files["x.yaml"] = fmt.Sprintf("kind: X\nname: x\nspec: {n: %d}\n", i)
		r.Write(files)
		r.Commit(fmt.Sprintf("other %d", i))
	}
	r.Git("branch", "-q", "-f", "main", "other")
	step("force-pushed to a long other history", "go-git")
}

// TestLocalFetchRefusesWhatTheRemoteLacks fetches from a remote whose new
// commit's blob is missing from its object store: the fetch fails, and the
// clone's ref stays where it was, so that the next fetch tries again.
func TestLocalFetchRefusesWhatTheRemoteLacks(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "kind: A\nname: a\n"})
	r.Commit("first")
	s, logs := newLoggedSource(t, r.URL(), nil)
	fetchedWith(t, s, logs, map[string]string{"a.yaml": "kind: A\nname: a\n"})

	r.Write(map[string]string{"a.yaml": "kind: A\nname: a\nspec: {lost: true}\n"})
	r.Commit("second")
	blob := strings.TrimSpace(r.Git("rev-parse", "HEAD:a.yaml"))
	if err := os.Remove(filepath.Join(r.Dir, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(context.Background()); err == nil {
		t.Fatal("a commit whose blob the remote lacks was fetched")
	}
	ref, err := gitIn(s.cfg.CacheDir, "rev-parse", "refs/remotes/origin/main")
	if err != nil || strings.TrimSpace(ref) == r.Head() {
		t.Errorf("the clone's ref moved to the broken commit (%s, %v)", ref, err)
	}
}

// gitIn runs git in dir and returns its output.
func gitIn(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// replaceLoose makes the loose object file of h in r hold the object
// other, as a remote's folder tampered with would, and returns what it held.
func replaceLoose(t *testing.T, r *gittest.Repo, h, other string) []byte {
	t.Helper()
	file := func(h string) string { return filepath.Join(r.Dir, ".git", "objects", h[:2], h[2:]) }
	orig, err := os.ReadFile(file(h))
	if err != nil {
		t.Fatal(err)
	}
	swapped, err := os.ReadFile(file(other))
	if err != nil {
		t.Fatal(err)
	}
	writeLoose(t, r, h, swapped)
	return orig
}

// writeLoose writes data as the loose object file of h in r.
func writeLoose(t *testing.T, r *gittest.Repo, h string, data []byte) {
	t.Helper()
	p := filepath.Join(r.Dir, ".git", "objects", h[:2], h[2:])
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestTamperedObjectsNeverServedAndHealed swaps the blob, or the tree, of a
// signed commit in the remote's object store for other content: the
// fetch fails rather than serve it, and once the remote's object is put
// back, the same head is fetched and verified, with every engine.
func TestTamperedObjectsNeverServedAndHealed(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		for _, what := range []string{"blob", "tree"} {
			t.Run(e.String()+"/"+what, func(t *testing.T) {
				t.Parallel()
				l := newSignedLab(t)
				r := l.repo
				l.signed(map[string]string{"a.yaml": "a: 1\n"}, "one", l.trusted)
				s := newEngineSource(t, r.URL(), e, func(c *Config) {
					c.Verify = &Verify{Mode: VerifyHead, Verifier: l.verifier}
				})
				fetch(t, s)
				two := l.signed(map[string]string{"a.yaml": "a: 2\n"}, "two", l.trusted)

				// The other content is a blob, and a tree holding it under
				// the same name, in the remote's own store.
				evil := filepath.Join(t.TempDir(), "evil")
				if err := os.WriteFile(evil, []byte("evil: 1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				evilBlob := r.Git("hash-object", "-w", evil)
				h, other := r.Git("rev-parse", "HEAD:a.yaml"), evilBlob
				if what == "tree" {
					cmd := exec.Command("git", "-C", r.Dir, "mktree")
					cmd.Stdin = strings.NewReader("100644 blob " + evilBlob + "\ta.yaml\n")
					out, err := cmd.Output()
					if err != nil {
						t.Fatal(err)
					}
					h, other = r.Git("rev-parse", "HEAD^{tree}"), strings.TrimSpace(string(out))
				}
				orig := replaceLoose(t, r, h, other)

				for i := range 2 {
					snap, err := s.Fetch(context.Background())
					if err == nil {
						t.Fatalf("fetch %d of the tampered remote: %s %v, want an error", i, snap.Revision, contents(snap))
					}
				}

				writeLoose(t, r, h, orig)
				snap, err := s.Fetch(context.Background())
				if err != nil {
					t.Fatalf("the remote was repaired, yet: %v", err)
				}
				if snap.Revision != manifest.Revision("main@sha1:"+two) || len(snap.Problems) != 0 {
					t.Fatalf("after the repair: %s %v", snap.Revision, snap.Problems)
				}
				assertContents(t, snap, map[string]string{"a.yaml": "a: 2\n"})
			})
		}
	}
}
