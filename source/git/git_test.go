package git

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

func TestBranchLifecycle(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"manifests/a.yaml": "a: 1\n", "manifests/b.yaml": "b: 1\n", "README.md": "hi\n"})
	first := r.Commit("first")
	s := newSource(t, r.URL(), func(c *Config) { c.Path = "manifests" })

	if s.Kind() != source.KindGit || s.Name() != "test" || s.Path() != "manifests" || s.Location() != r.URL() {
		t.Fatalf("identity: kind %q name %q path %q location %q", s.Kind(), s.Name(), s.Path(), s.Location())
	}

	snap := fetch(t, s)
	if want := manifest.Revision("main@sha1:" + first); snap.Revision != want {
		t.Fatalf("revision = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"})

	// Unchanged head: the same snapshot, and the clone is left alone.
	before := dirDigest(t, s.cfg.CacheDir)
	again := fetch(t, s)
	if again.Revision != snap.Revision {
		t.Fatalf("unchanged revision = %s, want %s", again.Revision, snap.Revision)
	}
	if dirDigest(t, s.cfg.CacheDir) != before {
		t.Fatal("an unchanged head modified the clone")
	}

	// A new commit modifying and deleting files.
	r.Write(map[string]string{"manifests/a.yaml": "a: 2\n", "manifests/b.yaml": ""})
	second := r.Commit("second")
	snap = fetch(t, s)
	if want := manifest.Revision("main@sha1:" + second); snap.Revision != want {
		t.Fatalf("revision = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"a.yaml": "a: 2\n"})

	// Rewritten history: a new root commit replaces main (a force-push).
	r.Git("checkout", "-q", "--orphan", "rewrite")
	r.Git("rm", "-rq", "--cached", ".")
	if err := os.RemoveAll(filepath.Join(r.Dir, "manifests")); err != nil {
		t.Fatal(err)
	}
	r.Write(map[string]string{"manifests/c.yaml": "c: 1\n"})
	rewritten := r.Commit("rewritten")
	r.Git("branch", "-M", "rewrite", "main")
	snap = fetch(t, s)
	if want := manifest.Revision("main@sha1:" + rewritten); snap.Revision != want {
		t.Fatalf("revision after force-push = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"c.yaml": "c: 1\n"})

	// Every file deleted: an empty snapshot, not an error, though the
	// path is gone too.
	r.Git("rm", "-rq", ".")
	emptied := r.Commit("empty it")
	snap = fetch(t, s)
	if want := manifest.Revision("main@sha1:" + emptied); snap.Revision != want {
		t.Fatalf("revision after emptying = %s, want %s", snap.Revision, want)
	}
	if len(snap.Files) != 0 || len(snap.Problems) != 0 {
		t.Fatalf("emptied repository: files %v problems %v", contents(snap), snap.Problems)
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"manifests/a.yaml": "a: 1\n"})
	head := r.Commit("first")
	r.Git("tag", "v1.0.0")

	tests := []struct {
		name    string
		edit    func(*Config)
		mention []string
	}{
		{"missing path", func(c *Config) { c.Path = "nope" }, []string{`"nope"`, "main@sha1:" + head}},
		{"unknown branch", func(c *Config) { c.Ref.Branch = "nope" }, []string{`branch "nope"`}},
		{"unknown tag", func(c *Config) { c.Ref.Tag = "v9" }, []string{`tag "v9"`}},
		{"no matching semver", func(c *Config) { c.Ref.SemVer = ">=2.0.0" }, []string{`">=2.0.0"`}},
		{"unknown commit", func(c *Config) { c.Ref.Commit = strings.Repeat("ab", 20) }, []string{strings.Repeat("ab", 20)}},
		{"unknown pull request", func(c *Config) { c.Ref.PullRequest = 3 }, []string{"pull request 3", "refs/pull/3/head"}},
		{"unknown merge request", func(c *Config) { c.Ref.MergeRequest = 3 }, []string{"merge request 3", "refs/merge-requests/3/head"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSource(t, r.URL(), tc.edit)
			// Twice: the second answer may come from the cache and must agree.
			for range 2 {
				_, err := s.Fetch(context.Background())
				if !errors.Is(err, source.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
				if errors.Is(err, source.ErrAuth) {
					t.Fatalf("err = %v is also ErrAuth", err)
				}
				for _, m := range tc.mention {
					if !strings.Contains(err.Error(), m) {
						t.Fatalf("err = %q, want it to mention %s", err, m)
					}
				}
			}
		})
	}
}

// TestEmptyRepository shows that a remote with no refs is a failure, never
// an empty snapshot: an agent that read it as "nothing declared" would
// destroy everything the source owns.
func TestEmptyRepository(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	s := newSource(t, r.URL(), nil)
	for range 2 {
		snap, err := s.Fetch(context.Background())
		if !errors.Is(err, source.ErrNotFound) {
			t.Fatalf("empty repository: snapshot %v, err = %v, want ErrNotFound", snap, err)
		}
		for _, m := range []string{`branch "main"`, "no branches or tags"} {
			if !strings.Contains(err.Error(), m) {
				t.Fatalf("err = %q, want it to mention %s", err, m)
			}
		}
	}

	// Once something is pushed, it is fetched as usual.
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	head := r.Commit("first")
	snap := fetch(t, s)
	if want := manifest.Revision("main@sha1:" + head); snap.Revision != want {
		t.Fatalf("revision = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"a.yaml": "a: 1\n"})
}

// TestVanishedRemoteState shows that what a source followed successfully
// and then vanished is a failure naming what is missing, not an empty
// snapshot: a wiped remote, a deleted branch or tag, a path moved away.
func TestVanishedRemoteState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(*Config)
		vanish  func(r *gittest.Repo)
		mention []string
	}{
		{"remote wiped", nil, func(r *gittest.Repo) {
			for _, ref := range []string{"refs/heads/main", "refs/heads/live", "refs/tags/v1"} {
				r.Git("update-ref", "-d", ref)
			}
		},
			[]string{`branch "main"`, "no branches or tags"}},
		{"branch deleted", func(c *Config) { c.Ref.Branch = "live" }, func(r *gittest.Repo) { r.Git("branch", "-D", "live") },
			[]string{`branch "live"`, "does not exist"}},
		{"tag deleted", func(c *Config) { c.Ref.Tag = "v1" }, func(r *gittest.Repo) { r.Git("tag", "-d", "v1") },
			[]string{`tag "v1"`, "does not exist"}},
		{"path moved away", func(c *Config) { c.Path = "manifests" }, func(r *gittest.Repo) {
			r.Git("mv", "manifests", "elsewhere")
			r.Commit("move")
		}, []string{`path "manifests"`, "does not exist"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := gittest.NewRepo(t)
			r.Write(map[string]string{"manifests/a.yaml": "a: 1\n", "b.yaml": "b: 1\n"})
			r.Commit("first")
			r.Git("branch", "live")
			r.Git("tag", "v1")
			s := newSource(t, r.URL(), tc.edit)
			if snap := fetch(t, s); len(snap.Files) == 0 {
				t.Fatal("first fetch found no files")
			}
			tc.vanish(r)
			for range 2 {
				snap, err := s.Fetch(context.Background())
				if !errors.Is(err, source.ErrNotFound) {
					t.Fatalf("after %s: snapshot %v, err = %v, want ErrNotFound", tc.name, snap, err)
				}
				for _, m := range tc.mention {
					if !strings.Contains(err.Error(), m) {
						t.Fatalf("err = %q, want it to mention %s", err, m)
					}
				}
			}
		})
	}
}

func TestRefStrategies(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"v.yaml": "v: 1.0\n"})
	c100 := r.Commit("one")
	r.Git("tag", "v1.0.0") // lightweight
	r.Write(map[string]string{"v.yaml": "v: 1.2\n"})
	c120 := r.Commit("one two")
	r.Git("tag", "-a", "v1.2.0", "-m", "release 1.2.0") // annotated
	r.Git("tag", "not-a-version")
	r.Write(map[string]string{"v.yaml": "v: 2.0\n"})
	c200 := r.Commit("two")
	r.Git("tag", "-a", "v2.0.0", "-m", "release 2.0.0")
	r.Git("tag", "1.1.0", c100) // lightweight, no leading v
	r.Git("checkout", "-q", "-b", "feature")
	r.Write(map[string]string{"v.yaml": "v: feature\n"})
	cFeature := r.Commit("feature")
	r.Git("checkout", "-q", "main")
	cPR := r.PullRequest(12, c100, map[string]string{"v.yaml": "v: pr\n"}, "pull request")

	tests := []struct {
		name     string
		ref      Ref
		revision string
		content  string
	}{
		{"default branch", Ref{}, "main@sha1:" + c200, "v: 2.0\n"},
		{"other branch", Ref{Branch: "feature"}, "feature@sha1:" + cFeature, "v: feature\n"},
		{"lightweight tag", Ref{Tag: "v1.0.0"}, "v1.0.0@sha1:" + c100, "v: 1.0\n"},
		{"annotated tag", Ref{Tag: "v1.2.0", Branch: "ignored"}, "v1.2.0@sha1:" + c120, "v: 1.2\n"},
		{"semver picks annotated", Ref{SemVer: ">=1.0.0 <2.0.0"}, "v1.2.0@sha1:" + c120, "v: 1.2\n"},
		{"semver picks lightweight without v", Ref{SemVer: "~1.1"}, "1.1.0@sha1:" + c100, "v: 1.0\n"},
		{"semver over tag", Ref{SemVer: ">=2", Tag: "v1.0.0"}, "v2.0.0@sha1:" + c200, "v: 2.0\n"},
		{"bare commit", Ref{Commit: c120}, "sha1:" + c120, "v: 1.2\n"},
		{"bare commit on another branch", Ref{Commit: cFeature}, "sha1:" + cFeature, "v: feature\n"},
		{"commit on branch", Ref{Commit: c100, Branch: "main"}, "main@sha1:" + c100, "v: 1.0\n"},
		{"commit over semver", Ref{Commit: strings.ToUpper(c200), SemVer: "1.x"}, "sha1:" + c200, "v: 2.0\n"},
		{"pull request", Ref{PullRequest: 12}, "pull/12/head@sha1:" + cPR, "v: pr\n"},
		{"pull request over everything", Ref{PullRequest: 12, Commit: c100, SemVer: ">=1", Tag: "v1.0.0", Branch: "main"},
			"pull/12/head@sha1:" + cPR, "v: pr\n"},
	}
	for _, e := range engines {
		for _, tc := range tests {
			t.Run(e.String()+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				s := newEngineSource(t, r.URL(), e, func(c *Config) { c.Ref = tc.ref })
				for range 2 {
					snap := fetch(t, s)
					if string(snap.Revision) != tc.revision {
						t.Fatalf("revision = %s, want %s", snap.Revision, tc.revision)
					}
					assertContents(t, snap, map[string]string{"v.yaml": tc.content})
				}
				// A new process on the same cache agrees without fetching.
				s2 := newEngineSource(t, r.URL(), e, func(c *Config) { c.Ref = tc.ref; c.CacheDir = s.cfg.CacheDir })
				before := dirDigest(t, s.cfg.CacheDir)
				if snap := fetch(t, s2); string(snap.Revision) != tc.revision {
					t.Fatalf("reopened revision = %s, want %s", snap.Revision, tc.revision)
				}
				if dirDigest(t, s.cfg.CacheDir) != before {
					t.Fatal("an unchanged ref modified the clone")
				}
			})
		}
	}

	t.Run("commit not on branch", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, r.URL(), func(c *Config) { c.Ref = Ref{Commit: cFeature, Branch: "main"} })
		_, err := s.Fetch(context.Background())
		if !errors.Is(err, source.ErrNotFound) || !strings.Contains(err.Error(), `branch "main"`) {
			t.Fatalf("err = %v, want ErrNotFound naming the branch", err)
		}
	})
}

func TestTagMoves(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"v.yaml": "v: 1\n"})
	first := r.Commit("one")
	r.Git("tag", "-a", "stable", "-m", "stable")
	s := newSource(t, r.URL(), func(c *Config) { c.Ref.Tag = "stable" })
	if snap := fetch(t, s); string(snap.Revision) != "stable@sha1:"+first {
		t.Fatalf("revision = %s", snap.Revision)
	}
	r.Write(map[string]string{"v.yaml": "v: 2\n"})
	second := r.Commit("two")
	r.Git("tag", "-f", "-a", "stable", "-m", "stable again")
	snap := fetch(t, s)
	if string(snap.Revision) != "stable@sha1:"+second {
		t.Fatalf("revision after moving the tag = %s, want stable@sha1:%s", snap.Revision, second)
	}
	assertContents(t, snap, map[string]string{"v.yaml": "v: 2\n"})
}

func TestSwitchToCommitFromShallowCache(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"v.yaml": "v: 1\n"})
	first := r.Commit("one")
	r.Write(map[string]string{"v.yaml": "v: 2\n"})
	r.Commit("two")
	shallow := newSource(t, r.URL(), nil)
	fetch(t, shallow)
	// The same cache, now pinned to a commit the shallow clone lacks.
	pinned := newSource(t, r.URL(), func(c *Config) {
		c.CacheDir = shallow.cfg.CacheDir
		c.Ref = Ref{Commit: first, Branch: "main"}
	})
	snap := fetch(t, pinned)
	if string(snap.Revision) != "main@sha1:"+first {
		t.Fatalf("revision = %s", snap.Revision)
	}
	assertContents(t, snap, map[string]string{"v.yaml": "v: 1\n"})
	// And back to the branch head.
	snap = fetch(t, newSource(t, r.URL(), func(c *Config) { c.CacheDir = shallow.cfg.CacheDir }))
	assertContents(t, snap, map[string]string{"v.yaml": "v: 2\n"})
}

func TestTreeReading(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{
		"keep.yaml":         "k: 1\n",
		"ignored/x.yaml":    "x: 1\n",
		"drafts/draft.yaml": "d: 1\n",
		"sub/keep.yml":      "s: 1\n",
		".no8signore":       "ignored/\n# a comment\n*draft*\n",
	})
	if err := os.Symlink("/etc/hostname", filepath.Join(r.Dir, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../../etc/passwd", filepath.Join(r.Dir, "sub", "up.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("keep.yaml", filepath.Join(r.Dir, "alias.yaml")); err != nil {
		t.Fatal(err)
	}
	r.Commit("tree")
	snap := fetch(t, newSource(t, r.URL(), nil))
	assertContents(t, snap, map[string]string{"keep.yaml": "k: 1\n", "sub/keep.yml": "s: 1\n", "alias.yaml": "k: 1\n"})
	problems := map[string]string{}
	for _, p := range snap.Problems {
		problems[p.File] = p.Message
	}
	for _, f := range []string{"escape.yaml", "sub/up.yaml"} {
		if !strings.Contains(problems[f], "outside") {
			t.Errorf("problem for %s = %q, want one about leaving the root (all: %v)", f, problems[f], snap.Problems)
		}
	}
	if len(problems) != 2 {
		t.Errorf("problems = %v, want two", snap.Problems)
	}
}

func TestPathThroughSymlinkRefused(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("s: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	if err := os.Symlink(outside, filepath.Join(r.Dir, "linked")); err != nil {
		t.Fatal(err)
	}
	r.Commit("link")
	_, err := newSource(t, r.URL(), func(c *Config) { c.Path = "linked" }).Fetch(context.Background())
	if err == nil {
		t.Fatal("a path that is a symlink out of the clone was read")
	}
}

func TestCommitMetadata(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	when := "2024-06-01T14:30:00+02:00"
	r.Git("add", "-A")
	r.GitEnv([]string{"GIT_AUTHOR_NAME=Alice Example", "GIT_AUTHOR_EMAIL=alice@example.com",
		"GIT_AUTHOR_DATE=" + when, "GIT_COMMITTER_DATE=2024-06-02T00:00:00Z"},
		"commit", "-q", "-m", "Add a", "-m", "Because reasons.")
	snap := fetch(t, newSource(t, r.URL(), nil))
	if snap.Commit.Author != "Alice Example <alice@example.com>" {
		t.Errorf("author = %q", snap.Commit.Author)
	}
	if snap.Commit.Message != "Add a\n\nBecause reasons.\n" {
		t.Errorf("message = %q", snap.Commit.Message)
	}
	if want := time.Date(2024, 6, 1, 12, 30, 0, 0, time.UTC); !snap.Commit.Time.Equal(want) || snap.Commit.Time.Location() != time.UTC {
		t.Errorf("time = %v, want %v in UTC", snap.Commit.Time, want)
	}
}

func TestConcurrentFetches(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	head := r.Commit("one")
	s := newSource(t, r.URL(), nil)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			snap, err := s.Fetch(context.Background())
			if err == nil && string(snap.Revision) != "main@sha1:"+head {
				err = errors.New("wrong revision " + string(snap.Revision))
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

func TestForeignCacheFolderRefused(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("first")
	cache := t.TempDir()
	precious := filepath.Join(cache, "precious.txt")
	if err := os.WriteFile(precious, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := newSource(t, r.URL(), func(c *Config) { c.CacheDir = cache }).Fetch(context.Background())
	if err == nil || !strings.Contains(err.Error(), cache) {
		t.Fatalf("err = %v, want a refusal naming the folder", err)
	}
	if data, err := os.ReadFile(precious); err != nil || string(data) != "keep me" {
		t.Fatalf("the folder's file was touched: %q, %v", data, err)
	}
}

func TestCloneStartsOverWhenPacksPileUp(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	s := newSource(t, r.URL(), nil)
	s.maxPacks = 2
	s.maxLoose = looseCount{objects: 8, bytes: 1 << 20}
	for i := range 6 {
		content := strings.Repeat("x", i+1) + ": 1\n"
		r.Write(map[string]string{"a.yaml": content})
		head := r.Commit("change")
		snap := fetch(t, s)
		if string(snap.Revision) != "main@sha1:"+head {
			t.Fatalf("revision = %s, want main@sha1:%s", snap.Revision, head)
		}
		assertContents(t, snap, map[string]string{"a.yaml": content})
		if n := s.countPacks(); n > s.maxPacks+1 {
			t.Fatalf("after fetch %d the clone holds %d packs", i+1, n)
		}
		// A fetch adds a commit, two trees and two blobs at most.
		if c := countLoose(filepath.Join(s.cfg.CacheDir, "objects")); c.objects > s.maxLoose.objects+5 {
			t.Fatalf("after fetch %d the clone holds %d loose objects", i+1, c.objects)
		}
	}
}
