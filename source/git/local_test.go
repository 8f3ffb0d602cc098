package git

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

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

	// Objects in a pack, as a push leaves them: a folder's tree larger
	// than what go-git reads whole from a pack is read from the pack file
	// again, by its name.
	for i := range 600 {
		files[fmt.Sprintf("big/resource-%04d.yaml", i)] = fmt.Sprintf("kind: R\nname: r%d\n", i)
	}
	r.Write(files)
	r.Commit("a large folder")
	r.Git("repack", "-q", "-d")
	step("a large folder, packed", "local")

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
	for _, f := range []string{"a", "b", "top.yaml", "many", "big"} {
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
	cmd.Env = gittest.Env()
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
					cmd.Env = gittest.Env()
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

// TestLocalRemoteSpecialFilesDoNotHoldFetch puts a FIFO where the remote
// keeps the branch, its packed refs, the new commit or a pack index: a
// read of it in the agent's process would block past every deadline with
// the source's lock held, for good. The fetch ends by its deadline, as the
// upload-pack process that reads such a remote otherwise is stopped then,
// and once the file is put back the head is fetched.
func TestLocalRemoteSpecialFilesDoNotHoldFetch(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"branch", "packed-refs", "commit", "pack index"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			r := gittest.NewRepo(t)
			r.Write(map[string]string{"a.yaml": "a: 1\n"})
			r.Commit("one")
			s := newSource(t, r.URL(), func(c *Config) { c.Timeout = 2 * time.Second })
			fetch(t, s)
			r.Write(map[string]string{"a.yaml": "a: 2\n"})
			two := r.Commit("two")

			gitDir := filepath.Join(r.Dir, ".git")
			var p string
			switch where {
			case "branch":
				p = filepath.Join(gitDir, "refs", "heads", "main")
			case "packed-refs":
				r.Git("pack-refs", "--all")
				p = filepath.Join(gitDir, "packed-refs")
			case "commit":
				p = filepath.Join(gitDir, "objects", two[:2], two[2:])
			case "pack index":
				r.Git("repack", "-q", "-d")
				idx, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.idx"))
				if len(idx) != 1 {
					t.Fatalf("pack indexes %v", idx)
				}
				p = idx[0]
			}
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			// Whatever waits on the FIFO, in this process or in git's,
			// sees it end before it goes.
			release := func() {
				if f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			}
			t.Cleanup(release)

			done := make(chan error, 1)
			go func() {
				_, err := s.Fetch(context.Background())
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a remote with a FIFO for its " + where + " was fetched")
				}
			case <-time.After(s.cfg.Timeout + 10*time.Second):
				release()
				<-done
				t.Fatalf("the fetch was still reading the FIFO %s after its deadline", where)
			}

			release()
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, orig, 0o444); err != nil {
				t.Fatal(err)
			}
			snap := fetch(t, s)
			if snap.Revision != manifest.Revision("main@sha1:"+two) {
				t.Fatalf("after the repair: %s", snap.Revision)
			}
			assertContents(t, snap, map[string]string{"a.yaml": "a: 2\n"})
		})
	}
}

// TestLocalRemoteBranchReadAsGitDoes writes the remote's branch in ways git
// reads, or refuses, and checks that reading it from the refs folder agrees
// with the listing upload-pack makes, with go-git's engine as the witness:
// what git refuses is refused, not read as some other hash, and a link to
// a file outside the remote is read as git reads it.
func TestLocalRemoteBranchReadAsGitDoes(t *testing.T) {
	t.Parallel()
	content := func(f func(head string) string) func(*testing.T, *gittest.Repo, string, string) {
		return func(t *testing.T, _ *gittest.Repo, ref, head string) {
			if err := os.WriteFile(ref, []byte(f(head)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name  string
		write func(t *testing.T, r *gittest.Repo, ref, head string)
		ok    bool
	}{
		{"plain", content(func(h string) string { return h + "\n" }), true},
		{"no line end", content(func(h string) string { return h }), true},
		{"followed by a space and more", content(func(h string) string { return h + " more\n" }), true},
		{"symbolic", content(func(string) string { return "ref: refs/heads/other\n" }), true},
		{"one hex digit too many", content(func(h string) string { return h + "0\n" }), false},
		{"one hex digit short", content(func(h string) string { return h[:39] + "\n" }), false},
		{"empty", content(func(string) string { return "" }), false},
		{"in packed-refs only", func(t *testing.T, r *gittest.Repo, _, _ string) {
			r.Git("pack-refs", "--all")
		}, true},
		{"a link to a file outside the remote", func(t *testing.T, _ *gittest.Repo, ref, head string) {
			outside := filepath.Join(t.TempDir(), "main")
			if err := os.WriteFile(outside, []byte(head+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(ref); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, ref); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range tests {
		for _, e := range []engine{engineAuto, engineGoGit} {
			t.Run(tc.name+"/"+e.String(), func(t *testing.T) {
				t.Parallel()
				r := gittest.NewRepo(t)
				r.Write(map[string]string{"a.yaml": "a: 1\n"})
				head := r.Commit("one")
				r.Git("branch", "other")
				s := newEngineSource(t, r.URL(), e, nil)
				fetch(t, s)
				tc.write(t, r, filepath.Join(r.Dir, ".git", "refs", "heads", "main"), head)
				snap, err := s.Fetch(context.Background())
				switch {
				case tc.ok && err != nil:
					t.Fatalf("Fetch: %v", err)
				case tc.ok && snap.Revision != manifest.Revision("main@sha1:"+head):
					t.Fatalf("revision %s, want %s", snap.Revision, head)
				case !tc.ok && err == nil:
					t.Fatalf("a branch git refuses was read as %s", snap.Revision)
				}
			})
		}
	}
}

// TestLocalRemoteReadElsewhereAsGitDoes gives the remote's folder a file
// that makes git read objects or refs from another folder: alternates, or
// commondir. Reading the folder itself would answer otherwise than git:
// the source answers as the usual fetch does, with go-git's engine as the
// witness.
func TestLocalRemoteReadElsewhereAsGitDoes(t *testing.T) {
	t.Parallel()
	type outcome struct {
		revision manifest.Revision
		files    map[string]string
		failed   bool
	}
	tests := map[string]func(t *testing.T, r *gittest.Repo){
		// git reads a relative alternate from the objects folder; go-git
		// from the git folder, where this one holds the new blob.
		"alternates": func(t *testing.T, r *gittest.Repo) {
			r.Write(map[string]string{"a.yaml": "a: 2\n"})
			r.Commit("two")
			blob := r.Git("rev-parse", "HEAD:a.yaml")
			gitDir := filepath.Join(r.Dir, ".git")
			shadow := filepath.Join(gitDir, "shadow", "objects", blob[:2])
			if err := os.MkdirAll(shadow, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(gitDir, "objects", blob[:2], blob[2:]), filepath.Join(shadow, blob[2:])); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(gitDir, "objects", "info", "alternates"), []byte("shadow/objects\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		// git follows links out of the remote's folder; os.Root does not.
		"objects linked from elsewhere": func(t *testing.T, r *gittest.Repo) {
			r.Write(map[string]string{"a.yaml": "a: 2\n"})
			r.Commit("two")
			objects := filepath.Join(r.Dir, ".git", "objects")
			elsewhere := filepath.Join(t.TempDir(), "objects")
			if err := os.Rename(objects, elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, objects); err != nil {
				t.Fatal(err)
			}
		},
		// git reads the branches and objects of the folder commondir names.
		"commondir": func(t *testing.T, r *gittest.Repo) {
			other := gittest.NewRepo(t)
			other.Write(map[string]string{"b.yaml": "b: 1\n"})
			other.Commit("other")
			r.Write(map[string]string{"a.yaml": "a: 2\n"})
			r.Commit("two")
			if err := os.WriteFile(filepath.Join(r.Dir, ".git", "commondir"), []byte(filepath.Join(other.Dir, ".git")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := gittest.NewRepo(t)
			r.Write(map[string]string{"a.yaml": "a: 1\n"})
			r.Commit("one")
			var sources []*Source
			for _, e := range []engine{engineGoGit, engineAuto} {
				s := newEngineSource(t, r.URL(), e, nil)
				fetch(t, s)
				sources = append(sources, s)
			}
			change(t, r)
			var got []outcome
			for _, s := range sources {
				snap, err := s.Fetch(context.Background())
				if err != nil {
					got = append(got, outcome{failed: true})
					continue
				}
				got = append(got, outcome{revision: snap.Revision, files: contents(snap)})
			}
			if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
				t.Fatalf("go-git's fetch: %+v; the source's: %+v", got[0], got[1])
			}
		})
	}
}

// TestLocalFetchStreamsLargeObjects copies a commit that brings a large
// file from the remote: what the copy allocates stays within a few times
// its size (once, and buffers the race detector does not pool), rather
// than seven for reading it whole, growing buffers, into memory. Not
// parallel: the figures are the process's.
func TestLocalFetchStreamsLargeObjects(t *testing.T) {
	const size = 64 << 20
	alloc := map[engine]uint64{}
	for _, e := range []engine{engineAuto, engineGoGit} {
		r := gittest.NewRepo(t)
		r.Write(map[string]string{"a.yaml": "a: 1\n"})
		r.Commit("one")
		s, logs := newLoggedSource(t, r.URL(), nil)
		s.engine = e
		fetch(t, s)
		f, err := os.Create(filepath.Join(r.Dir, "large.bin"))
		if err == nil {
			err = f.Truncate(size)
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		r.Commit("large")
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		with := fetchedWith(t, s, logs, map[string]string{"a.yaml": "a: 1\n"})
		runtime.ReadMemStats(&after)
		if e == engineAuto && with != "local" {
			t.Fatalf("fetched with %s, want local", with)
		}
		alloc[e] = after.TotalAlloc - before.TotalAlloc
	}
	t.Logf("allocated for a %d MiB file: local copy %d MiB, go-git %d MiB", size>>20, alloc[engineAuto]>>20, alloc[engineGoGit]>>20)
	if alloc[engineAuto] > 3*size {
		t.Errorf("the local copy of a %d MiB file allocated %d MiB (go-git's fetch: %d MiB)", size>>20, alloc[engineAuto]>>20, alloc[engineGoGit]>>20)
	}
}

// TestLocalFetchBelowShallowBoundary moves the branch of a remote the clone
// holds at depth 1 to a new commit on the parent of the clone's only
// commit, which the clone lacks: the copy walks past the boundary and the
// clone stays whole.
func TestLocalFetchBelowShallowBoundary(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 0\n"})
	r.Commit("zero")
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	one := r.Commit("one")
	r.Write(map[string]string{"a.yaml": "a: 2\n"})
	r.Commit("two")
	s, logs := newLoggedSource(t, r.URL(), nil)
	fetchedWith(t, s, logs, map[string]string{"a.yaml": "a: 2\n"})
	if shallow, err := os.ReadFile(filepath.Join(s.cfg.CacheDir, "shallow")); err != nil || len(shallow) == 0 {
		t.Fatalf("the first clone is not shallow: %q %v", shallow, err)
	}

	r.Git("reset", "-q", "--hard", one)
	files := map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"}
	r.Write(files)
	r.Commit("on one")
	if with := fetchedWith(t, s, logs, files); with != "local" {
		t.Errorf("fetched with %q, want local\n%s", with, logs)
	}
	if out, err := gitIn(s.cfg.CacheDir, "fsck", "--connectivity-only", "--no-dangling"); err != nil {
		t.Fatalf("git fsck of the clone: %v\n%s", err, out)
	}
}

// TestLocalFetchConcurrent fetches a local remote from several goroutines
// at each of its new commits: each gets the head, and the race detector
// sees the local remote's state shared under the source's lock only.
func TestLocalFetchConcurrent(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 0\n"})
	r.Commit("zero")
	s := newSource(t, r.URL(), nil)
	fetch(t, s)
	for i := 1; i <= 4; i++ {
		r.Write(map[string]string{"a.yaml": fmt.Sprintf("a: %d\n", i)})
		head := r.Commit(fmt.Sprintf("commit %d", i))
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				snap, err := s.Fetch(context.Background())
				if err == nil && snap.Revision != manifest.Revision("main@sha1:"+head) {
					err = fmt.Errorf("revision %s, want %s", snap.Revision, head)
				}
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLocalFetchLinksAndSubmodules copies commits that bring a symlink to a
// manifest and a submodule, whose commit is not in the repository: the
// snapshot is the one go-git's fetch gives.
func TestLocalFetchLinksAndSubmodules(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("one")
	type logged struct {
		s    *Source
		logs *bytes.Buffer
	}
	var sources []logged
	for _, e := range []engine{engineGoGit, engineAuto} {
		s, logs := newLoggedSource(t, r.URL(), nil)
		s.engine = e
		fetchedWith(t, s, logs, map[string]string{"a.yaml": "a: 1\n"})
		sources = append(sources, logged{s, logs})
	}
	if err := os.Symlink("a.yaml", filepath.Join(r.Dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	r.Git("update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("7", 40)+",sub")
	r.Git("commit", "-q", "-m", "link and submodule")
	r.Write(map[string]string{"out.yaml": "o: 1\n"})
	if err := os.Symlink("../outside.yaml", filepath.Join(r.Dir, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	r.Commit("a link out")
	want := map[string]string{"a.yaml": "a: 1\n", "link.yaml": "a: 1\n", "out.yaml": "o: 1\n"}
	var got []string
	for _, l := range sources {
		with := fetchedWith(t, l.s, l.logs, want)
		if l.s.engine == engineAuto && with != "local" {
			t.Fatalf("fetched with %q, want local", with)
		}
		got = append(got, fmt.Sprint(l.s.last.revision, l.s.last.problems))
	}
	if !strings.Contains(got[1], "symlink points outside") {
		t.Fatalf("no problem for the link out: %s", got[1])
	}
	if got[0] != got[1] {
		t.Fatalf("go-git's fetch read %s; the local copy %s", got[0], got[1])
	}
}

// TestLocalFetchBoundsTreeEntries brings commits that each change one file
// of a large folder: a walk of them in this process reads the whole folder
// at each commit, where git's upload-pack, which go-git's fetch has do the
// walk, is several times faster (300 such commits in a folder of 10,000
// files: 17 s against 4 s). Past a bound on the tree entries read they are
// fetched the usual way, so that the walk never eats the deadline the
// fetch needs; under it they are copied.
func TestLocalFetchBoundsTreeEntries(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	files := map[string]string{}
	for i := range 500 {
		files[fmt.Sprintf("flat/r%03d.yaml", i)] = fmt.Sprintf("n: %d\n", i)
	}
	r.Write(files)
	r.Commit("first")
	s, logs := newLoggedSource(t, r.URL(), nil)
	// One commit reads the folder twice (new, and the clone's), with the
	// root: some 1,000 entries.
	s.localMaxEntries = 2500
	fetchedWith(t, s, logs, files)

	commit := func(n int) {
		for i := range n {
			files["flat/r001.yaml"] = fmt.Sprintf("n: 1\nchange: %d\n", i)
			r.Write(files)
			r.Commit(fmt.Sprintf("change %d", i))
		}
	}
	commit(2)
	if with := fetchedWith(t, s, logs, files); with != "local" {
		t.Errorf("two commits fetched with %q, want local\n%s", with, logs)
	}
	commit(5)
	if with := fetchedWith(t, s, logs, files); with != "go-git" {
		t.Errorf("five commits fetched with %q, want go-git\n%s", with, logs)
	}
}
