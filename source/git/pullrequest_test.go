package git

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

// TestPullRequest follows GitHub pull requests and GitLab merge requests
// through their head refs, over file:// and HTTP: opened, pushed to,
// force-pushed, unchanged, and missing.
func TestPullRequest(t *testing.T) {
	t.Parallel()
	creds := Auth{Username: "user", Password: "s3cret-pass"}
	tests := []struct {
		name string
		// serve returns the repository's URL, the credentials it needs and
		// the server's request log (nil over file://).
		serve func(*testing.T, *gittest.Repo) (string, Auth, *gittest.Server)
	}{
		{"file", func(t *testing.T, r *gittest.Repo) (string, Auth, *gittest.Server) {
			return r.URL(), Auth{}, nil
		}},
		{"http", func(t *testing.T, r *gittest.Repo) (string, Auth, *gittest.Server) {
			gs := gittest.NewServer(t, filepath.Dir(r.Dir), creds.Username, creds.Password)
			return gs.URL + "/repo/.git", creds, gs
		}},
	}
	for _, tc := range tests {
		for _, k := range changeKinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				testChange(t, tc.serve, k)
			})
		}
	}
}

// changeKind is a forge's kind of change request: GitHub's pull requests,
// GitLab's merge requests.
type changeKind struct {
	name string
	// ref follows change n.
	ref func(n int) Ref
	// set commits files on parent as change n's new head.
	set func(r *gittest.Repo, n int, parent string, files map[string]string, msg string) string
	// refName is change n's ref without refs/; label names it in errors.
	refName func(n int) string
	label   string
}

var changeKinds = []changeKind{
	{"github", func(n int) Ref { return Ref{PullRequest: n} }, (*gittest.Repo).PullRequest,
		func(n int) string { return fmt.Sprintf("pull/%d/head", n) }, "pull request"},
	{"gitlab", func(n int) Ref { return Ref{MergeRequest: n} }, (*gittest.Repo).MergeRequest,
		func(n int) string { return fmt.Sprintf("merge-requests/%d/head", n) }, "merge request"},
}

func testChange(t *testing.T, serve func(*testing.T, *gittest.Repo) (string, Auth, *gittest.Server), k changeKind) {
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"app/v.yaml": "v: main\n"})
	base := r.Commit("main")
	pr := k.set(r, 1, base, map[string]string{"app/v.yaml": "v: pr\n", "app/new.yaml": "n: 1\n"}, "Try a change")
	if on := r.Git("branch", "--all", "--contains", pr); on != "" {
		t.Fatalf("the pull request's commit is on branches %q", on)
	}
	url, auth, gs := serve(t, r)
	requests := func() []string {
		if gs == nil {
			return nil
		}
		return gs.Take()
	}
	edit := func(ref Ref) func(*Config) {
		return func(c *Config) { c.Ref = ref; c.Auth = auth; c.Path = "app" }
	}

	s := newSource(t, url, edit(k.ref(1)))
	snap := fetch(t, s)
	if want := manifest.Revision(k.refName(1) + "@sha1:" + pr); snap.Revision != want {
		t.Fatalf("revision = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"v.yaml": "v: pr\n", "new.yaml": "n: 1\n"})
	when, err := time.Parse(time.RFC3339, r.Git("show", "-s", "--format=%aI", pr))
	if err != nil {
		t.Fatal(err)
	}
	if c := snap.Commit; c.Author != "Test <test@example.com>" || c.Message != "Try a change\n" || !c.Time.Equal(when) {
		t.Fatalf("commit = %+v, want Test's %q at %v", c, "Try a change\n", when)
	}

	// Unchanged: the same snapshot, the clone left alone and, over
	// HTTP, nothing asked but the refs.
	requests()
	before := dirDigest(t, s.cfg.CacheDir)
	again := fetch(t, s)
	if again.Revision != snap.Revision || again.Commit != snap.Commit {
		t.Fatalf("unchanged pull request: snapshot at %s (%+v), want the last one at %s (%+v)", again.Revision, again.Commit, snap.Revision, snap.Commit)
	}
	assertContents(t, again, contents(snap))
	restarted := newSource(t, url, func(c *Config) { edit(k.ref(1))(c); c.CacheDir = s.cfg.CacheDir })
	if again := fetch(t, restarted); again.Revision != snap.Revision {
		t.Fatalf("restarted revision = %s, want %s", again.Revision, snap.Revision)
	}
	if dirDigest(t, s.cfg.CacheDir) != before {
		t.Fatal("an unchanged pull request modified the clone")
	}
	if reqs := requests(); slices.ContainsFunc(reqs, isUploadPack) {
		t.Fatalf("an unchanged pull request was fetched: %v", reqs)
	}

	// The branch is followed as before by its own source.
	mainSrc := newSource(t, url, edit(Ref{}))
	if snap := fetch(t, mainSrc); string(snap.Revision) != "main@sha1:"+base {
		t.Fatalf("main revision = %s, want main@sha1:%s", snap.Revision, base)
	}

	// A new push to the pull request.
	pushed := k.set(r, 1, pr, map[string]string{"app/v.yaml": "v: pr2\n"}, "Address review")
	snap = fetch(t, s)
	if want := manifest.Revision(k.refName(1) + "@sha1:" + pushed); snap.Revision != want {
		t.Fatalf("revision after a push = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"v.yaml": "v: pr2\n", "new.yaml": "n: 1\n"})

	// A force-push rebasing the pull request on a newer main.
	r.Write(map[string]string{"app/v.yaml": "v: main2\n"})
	base2 := r.Commit("main again")
	rebased := k.set(r, 1, base2, map[string]string{"app/v.yaml": "v: rebased\n"}, "Rebase")
	snap = fetch(t, s)
	if want := manifest.Revision(k.refName(1) + "@sha1:" + rebased); snap.Revision != want {
		t.Fatalf("revision after a force-push = %s, want %s", snap.Revision, want)
	}
	assertContents(t, snap, map[string]string{"v.yaml": "v: rebased\n"})

	// The branch's source saw none of it but main's own commit.
	snap = fetch(t, mainSrc)
	if string(snap.Revision) != "main@sha1:"+base2 {
		t.Fatalf("main revision = %s, want main@sha1:%s", snap.Revision, base2)
	}
	assertContents(t, snap, map[string]string{"v.yaml": "v: main2\n"})

	// A pull request the remote does not have.
	missing := newSource(t, url, edit(k.ref(2)))
	requests()
	for range 2 {
		_, err := missing.Fetch(context.Background())
		if !errors.Is(err, source.ErrNotFound) || errors.Is(err, source.ErrAuth) {
			t.Fatalf("err = %v, want ErrNotFound only", err)
		}
		if !strings.Contains(err.Error(), k.label+" 2") || !strings.Contains(err.Error(), "refs/"+k.refName(2)) {
			t.Fatalf("err = %q, want it to name %s 2", err, k.label)
		}
	}
	if reqs := requests(); slices.ContainsFunc(reqs, isUploadPack) {
		t.Fatalf("a missing pull request was fetched: %v", reqs)
	}
}

// TestPullRequestSharedCache follows a pull request in a cache a branch
// used before, and back, as after a change of configuration.
func TestPullRequestSharedCache(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"v.yaml": "v: main\n"})
	base := r.Commit("main")
	pr := r.PullRequest(7, base, map[string]string{"v.yaml": "v: pr\n"}, "change")
	// A branch whose remote-tracking name is a prefix of "pull/7/head".
	r.Git("branch", "pull", base)

	cache := filepath.Join(t.TempDir(), "cache")
	for _, ref := range []Ref{{Commit: base}, {PullRequest: 7}, {Branch: "pull"}, {PullRequest: 7, Branch: "main"}} {
		snap := fetch(t, newSource(t, r.URL(), func(c *Config) { c.Ref = ref; c.CacheDir = cache }))
		want, content := "pull/7/head@sha1:"+pr, "v: pr\n"
		switch {
		case ref.Commit != "":
			want, content = "sha1:"+base, "v: main\n"
		case ref.PullRequest == 0:
			want, content = "pull@sha1:"+base, "v: main\n"
		}
		if string(snap.Revision) != want {
			t.Fatalf("ref %+v: revision = %s, want %s", ref, snap.Revision, want)
		}
		assertContents(t, snap, map[string]string{"v.yaml": content})
	}
}

// TestMergeRequestBareRepo follows a merge request in a bare repository, as
// GitLab keeps its projects: the merge request's source branch is pushed,
// GitLab points refs/merge-requests/<IID>/head at its head, and the ref
// stays when the source branch is deleted once merged.
func TestMergeRequestBareRepo(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bare := filepath.Join(root, "g", "p.git")
	work := gittest.NewRepo(t)
	work.Git("init", "-q", "--bare", bare)
	work.Write(map[string]string{"v.yaml": "v: main\n"})
	work.Commit("main")
	work.Git("push", "-q", bare, "HEAD:refs/heads/main")
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", bare}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// push commits files on the source branch, pushes it and moves the
	// merge request's ref in the bare repository, as GitLab does.
	push := func(content string) string {
		work.Git("checkout", "-q", "-B", "feature")
		work.Write(map[string]string{"v.yaml": content})
		c := work.Commit(content)
		work.Git("push", "-q", "-f", bare, "feature")
		git("update-ref", "refs/merge-requests/3/head", c)
		work.Git("checkout", "-q", "main")
		return c
	}
	first := push("v: mr\n")
	gs := gittest.NewServer(t, root, "oauth2", "glpat-test")
	for _, remote := range []struct {
		name, url string
		auth      Auth
	}{
		{"file", "file://" + filepath.ToSlash(bare), Auth{}},
		{"http", gs.URL + "/g/p.git", Auth{Username: "oauth2", Password: "glpat-test"}},
	} {
		t.Run(remote.name, func(t *testing.T) {
			s := newSource(t, remote.url, func(c *Config) { c.Ref = Ref{MergeRequest: 3}; c.Auth = remote.auth })
			snap := fetch(t, s)
			if want := "merge-requests/3/head@sha1:" + first; string(snap.Revision) != want {
				t.Fatalf("revision = %s, want %s", snap.Revision, want)
			}
			assertContents(t, snap, map[string]string{"v.yaml": "v: mr\n"})
		})
	}
	// Pushed to, merged, and the source branch deleted: the ref stays.
	second := push("v: mr2\n")
	git("update-ref", "-d", "refs/heads/feature")
	for _, remote := range []struct {
		name, url string
		auth      Auth
	}{
		{"file", "file://" + filepath.ToSlash(bare), Auth{}},
		{"http", gs.URL + "/g/p.git", Auth{Username: "oauth2", Password: "glpat-test"}},
	} {
		s := newSource(t, remote.url, func(c *Config) { c.Ref = Ref{MergeRequest: 3}; c.Auth = remote.auth })
		snap := fetch(t, s)
		if want := "merge-requests/3/head@sha1:" + second; string(snap.Revision) != want {
			t.Fatalf("%s: revision = %s, want %s", remote.name, snap.Revision, want)
		}
		assertContents(t, snap, map[string]string{"v.yaml": "v: mr2\n"})
		if _, err := newSource(t, remote.url, func(c *Config) { c.Ref = Ref{MergeRequest: 4}; c.Auth = remote.auth }).Fetch(t.Context()); !errors.Is(err, source.ErrNotFound) {
			t.Fatalf("%s: merge request 4: %v, want ErrNotFound", remote.name, err)
		}
	}
}
