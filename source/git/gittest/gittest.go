// Package gittest makes real Git repositories for tests, with the git CLI,
// and serves them over HTTP with git http-backend behind basic auth,
// recording every request so that tests can prove what was fetched.
package gittest

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Repo is a Git working repository made with the git CLI; sources read
// it directly (file://) or through git http-backend.
type Repo struct {
	t testing.TB
	// Dir is the working tree.
	Dir  string
	date time.Time
}

// NewRepo creates an empty repository whose default branch is main.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	r := &Repo{t: t, Dir: filepath.Join(t.TempDir(), "repo"), date: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.Git("init", "-q")
	return r
}

// Git runs the git CLI in the repository with a fixed identity and returns
// its trimmed output.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return r.GitEnv(nil, args...)
}

// GitEnv is Git with extra environment variables.
func (r *Repo) GitEnv(env []string, args ...string) string {
	r.t.Helper()
	full := append([]string{"-c", "init.defaultBranch=main", "-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = r.Dir
	cmd.Env = Env(append([]string{"HOME=" + r.Dir}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Env is the environment for git in tests: this process's without its GIT_
// variables, which a git that started the tests (a hook, rebase --exec)
// sets to its own repository, where git would then work instead of the
// test's; no system configuration, no prompts; then extra.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"), extra...)
}

// Write sets files (relative path -> content); an empty content removes the file.
func (r *Repo) Write(files map[string]string) {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.Dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(p); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// Commit stages everything and commits it, a minute after the previous
// commit so that times are distinct and known; it returns the new head.
func (r *Repo) Commit(msg string) string {
	r.t.Helper()
	r.date = r.date.Add(time.Minute)
	d := r.date.Format(time.RFC3339)
	r.Git("add", "-A")
	r.GitEnv([]string{"GIT_AUTHOR_DATE=" + d, "GIT_COMMITTER_DATE=" + d}, "commit", "-q", "--allow-empty", "-m", msg)
	return r.Head()
}

// CommitSigned is Commit with a signature: gitArgs are the options that
// choose the key (see package sigtest), env what git needs to sign.
func (r *Repo) CommitSigned(msg string, env []string, gitArgs ...string) string {
	r.t.Helper()
	r.date = r.date.Add(time.Minute)
	d := r.date.Format(time.RFC3339)
	r.Git("add", "-A")
	args := append(append([]string{}, gitArgs...), "commit", "-q", "-S", "--allow-empty", "-m", msg)
	r.GitEnv(append([]string{"GIT_AUTHOR_DATE=" + d, "GIT_COMMITTER_DATE=" + d}, env...), args...)
	return r.Head()
}

// Head returns the commit checked out.
func (r *Repo) Head() string { return r.Git("rev-parse", "HEAD") }

// SetPullRequest points refs/pull/<n>/head at commit, as GitHub does when a
// pull request is opened or pushed to, force-pushes included.
func (r *Repo) SetPullRequest(n int, commit string) {
	r.t.Helper()
	r.Git("update-ref", fmt.Sprintf("refs/pull/%d/head", n), commit)
}

// SetMergeRequest points refs/merge-requests/<iid>/head at commit, as
// GitLab does in the target project when a merge request is opened or
// pushed to, force-pushes included.
func (r *Repo) SetMergeRequest(iid int, commit string) {
	r.t.Helper()
	r.Git("update-ref", fmt.Sprintf("refs/merge-requests/%d/head", iid), commit)
}

// PullRequest commits files (as Write takes them) on top of parent without
// moving any branch, points refs/pull/<n>/head at the new commit and
// returns it. Like a pull request's head on GitHub, often a fork's, the
// commit is then reachable from that ref only. The previous checkout is
// restored.
func (r *Repo) PullRequest(n int, parent string, files map[string]string, msg string) string {
	r.t.Helper()
	c := r.detached(parent, files, msg)
	r.SetPullRequest(n, c)
	return c
}

// MergeRequest is PullRequest for GitLab: the new commit is reachable from
// refs/merge-requests/<iid>/head only.
func (r *Repo) MergeRequest(iid int, parent string, files map[string]string, msg string) string {
	r.t.Helper()
	c := r.detached(parent, files, msg)
	r.SetMergeRequest(iid, c)
	return c
}

// detached commits files on top of parent without moving any branch, and
// restores the previous checkout.
func (r *Repo) detached(parent string, files map[string]string, msg string) string {
	r.t.Helper()
	back := r.Git("rev-parse", "--abbrev-ref", "HEAD")
	if back == "HEAD" {
		back = r.Head()
	}
	r.Git("checkout", "-q", "--detach", parent)
	r.Write(files)
	c := r.Commit(msg)
	r.Git("checkout", "-q", back)
	return c
}

// URL is the repository's file:// URL.
func (r *Repo) URL() string { return "file://" + filepath.ToSlash(r.Dir) }

// Server serves the repositories under root with git http-backend,
// behind HTTP basic auth, and records every request.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	hook     func(http.ResponseWriter, *http.Request) bool
}

// Intercept makes hook see every authorised request before git does; when
// it returns true it has answered the request itself. Tests use it to
// observe the client while a request is in flight, or to fail or stall a
// request.
func (gs *Server) Intercept(hook func(http.ResponseWriter, *http.Request) bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.hook = hook
}

// NewServer starts the server; it stops when the test ends.
func NewServer(t testing.TB, root, user, pass string) *Server {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"},
	}
	gs := &Server{}
	gs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		gs.mu.Lock()
		entry := req.Method + " " + req.URL.Path
		if req.URL.RawQuery != "" {
			entry += "?" + req.URL.RawQuery
		}
		gs.requests = append(gs.requests, entry)
		hook := gs.hook
		gs.mu.Unlock()
		u, p, ok := req.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if hook != nil && hook(w, req) {
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(gs.Close)
	return gs
}

// Take returns the requests recorded since the last call.
func (gs *Server) Take() []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	r := gs.requests
	gs.requests = nil
	return r
}
