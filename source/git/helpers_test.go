package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source"
)

// testRepo is a Git working repository made with the git CLI; sources read
// it directly (file://) or through git http-backend.
type testRepo struct {
	t    *testing.T
	dir  string
	date time.Time
}

// newTestRepo creates an empty repository whose default branch is main.
func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	r := &testRepo{t: t, dir: filepath.Join(t.TempDir(), "repo"), date: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.git("init", "-q")
	return r
}

// git runs the git CLI in the repository with a fixed identity and returns
// its trimmed output.
func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	return r.gitEnv(nil, args...)
}

func (r *testRepo) gitEnv(env []string, args ...string) string {
	r.t.Helper()
	full := append([]string{"-c", "init.defaultBranch=main", "-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+r.dir, "GIT_TERMINAL_PROMPT=0")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// write sets files (relative path -> content); an empty content removes the file.
func (r *testRepo) write(files map[string]string) {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
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

// commit stages everything and commits it, a minute after the previous
// commit so that times are distinct and known; it returns the new head.
func (r *testRepo) commit(msg string) string {
	r.t.Helper()
	r.date = r.date.Add(time.Minute)
	d := r.date.Format(time.RFC3339)
	r.git("add", "-A")
	r.gitEnv([]string{"GIT_AUTHOR_DATE=" + d, "GIT_COMMITTER_DATE=" + d}, "commit", "-q", "--allow-empty", "-m", msg)
	return r.head()
}

func (r *testRepo) head() string { return r.git("rev-parse", "HEAD") }

func (r *testRepo) url() string { return "file://" + filepath.ToSlash(r.dir) }

// newSource builds a source over url with its own cache folder.
func newSource(t *testing.T, url string, edit func(*Config)) *Source {
	t.Helper()
	cfg := Config{Name: "test", URL: url, CacheDir: filepath.Join(t.TempDir(), "cache"), Timeout: 20 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func fetch(t *testing.T, s *Source) *source.Snapshot {
	t.Helper()
	snap, err := s.Fetch(context.Background())
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return snap
}

// contents maps each snapshot file to its content.
func contents(snap *source.Snapshot) map[string]string {
	m := make(map[string]string, len(snap.Files))
	for _, f := range snap.Files {
		m[f.Path] = string(f.Data)
	}
	return m
}

func assertContents(t *testing.T, snap *source.Snapshot, want map[string]string) {
	t.Helper()
	got := contents(snap)
	if len(got) != len(want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("file %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

// dirDigest digests every path, mode and content under dir, to show that
// nothing in it changed.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := p + " " + info.Mode().String()
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// gitServer serves the repositories under root with git http-backend,
// behind HTTP basic auth, and records every request.
type gitServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func newGitServer(t *testing.T, root, user, pass string) *gitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"},
	}
	gs := &gitServer{}
	gs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		gs.mu.Lock()
		entry := req.Method + " " + req.URL.Path
		if req.URL.RawQuery != "" {
			entry += "?" + req.URL.RawQuery
		}
		gs.requests = append(gs.requests, entry)
		gs.mu.Unlock()
		u, p, ok := req.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(gs.Close)
	return gs
}

// take returns the requests recorded since the last call.
func (gs *gitServer) take() []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	r := gs.requests
	gs.requests = nil
	return r
}
