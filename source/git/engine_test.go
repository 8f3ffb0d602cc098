package git

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

// engines are every way a source can fetch; each must pass the same cases.
var engines = []engine{engineAuto, engineGit, engineGoGit}

// newEngineSource is newSource fetching with engine e.
func newEngineSource(t *testing.T, url string, e engine, edit func(*Config)) *Source {
	t.Helper()
	s := newSource(t, url, edit)
	s.engine = e
	if e != engineGoGit && s.gitBin == "" {
		t.Fatal("git is not installed")
	}
	return s
}

// serveRepo returns r's URL over the transport ("file" or "http") and the
// credentials it needs.
func serveRepo(t *testing.T, r *gittest.Repo, transport string) (string, Auth, *gittest.Server) {
	t.Helper()
	if transport == "file" {
		return r.URL(), Auth{}, nil
	}
	gs := gittest.NewServer(t, filepath.Dir(r.Dir), "user", "s3cret-pass")
	return gs.URL + "/repo/.git", Auth{Username: "user", Password: "s3cret-pass"}, gs
}

// packs returns the pack files and loose objects of the cache.
func packs(t *testing.T, cache string) map[string]bool {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(cache, "objects", "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	// Loose objects too: what a fetch stores may be either.
	loose, err := filepath.Glob(filepath.Join(cache, "objects", "??", "*"))
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]bool, len(names)+len(loose))
	for _, n := range append(names, loose...) {
		m[n] = true
	}
	return m
}

// newObjects counts the objects of the packs not in before, from their
// headers, and the loose objects: what the last fetch stored.
func newObjects(t *testing.T, cache string, before map[string]bool) int {
	t.Helper()
	n := 0
	for p := range packs(t, cache) {
		if before[p] {
			continue
		}
		if !strings.HasSuffix(p, ".pack") {
			n++
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var hdr [12]byte
		_, err = f.ReadAt(hdr[:], 0)
		f.Close()
		if err != nil || string(hdr[:4]) != "PACK" {
			t.Fatalf("pack %s: header %q, %v", p, hdr, err)
		}
		n += int(binary.BigEndian.Uint32(hdr[8:]))
	}
	return n
}

// assertNoCheckout fails when the cache holds anything but a bare
// repository: a worktree, a checked-out manifest or folder of the repo.
func assertNoCheckout(t *testing.T, cache string, repoDirs ...string) {
	t.Helper()
	for _, d := range append(repoDirs, ".git") {
		if _, err := os.Lstat(filepath.Join(cache, d)); err == nil {
			t.Fatalf("the cache holds %s", d)
		}
	}
	err := filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (manifest.IsManifestFile(p) || strings.HasSuffix(p, ".md")) {
			t.Errorf("the cache holds a checked-out file: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cache, "HEAD")); err != nil {
		t.Fatalf("the cache is not a bare repository: %v", err)
	}
}

// TestEngines runs the life of a branch through every engine over file://
// and HTTP: no worktree is written, a one-file commit transfers a handful
// of objects and reads one blob, an unchanged head reads none, and a
// force-push is followed.
func TestEngines(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		for _, transport := range []string{"file", "http"} {
			t.Run(e.String()+"/"+transport, func(t *testing.T) {
				t.Parallel()
				r := gittest.NewRepo(t)
				files := map[string]string{"README.md": "hi\n"}
				want := map[string]string{}
				for i := range 100 {
					for _, dir := range []string{"apps", "infra"} {
						name := fmt.Sprintf("%s/r%03d.yaml", dir, i)
						files[name] = fmt.Sprintf("name: %s-%d\n", dir, i)
						want[name] = files[name]
					}
				}
				r.Write(files)
				first := r.Commit("first")
				url, auth, _ := serveRepo(t, r, transport)
				s := newEngineSource(t, url, e, func(c *Config) { c.Auth = auth })
				cache := s.cfg.CacheDir

				snap := fetch(t, s)
				if want := manifest.Revision("main@sha1:" + first); snap.Revision != want {
					t.Fatalf("revision = %s, want %s", snap.Revision, want)
				}
				assertContents(t, snap, want)
				assertNoCheckout(t, cache, "apps", "infra")
				if n := s.reads.Load(); n != 200 {
					t.Fatalf("first fetch read %d blobs, want 200", n)
				}

				// Unchanged head: nothing read.
				if again := fetch(t, s); again.Revision != snap.Revision {
					t.Fatalf("unchanged revision = %s", again.Revision)
				}
				assertContents(t, snap, want)
				if n := s.reads.Load(); n != 200 {
					t.Fatalf("an unchanged head read %d blobs", n-200)
				}

				// One file changed: a few objects fetched, one blob read.
				before := packs(t, cache)
				r.Write(map[string]string{"apps/r007.yaml": "name: changed\n"})
				second := r.Commit("one file")
				want["apps/r007.yaml"] = "name: changed\n"
				snap = fetch(t, s)
				if want := manifest.Revision("main@sha1:" + second); snap.Revision != want {
					t.Fatalf("revision = %s, want %s", snap.Revision, want)
				}
				assertContents(t, snap, want)
				if n := s.reads.Load() - 200; n != 1 {
					t.Fatalf("a one-file commit read %d blobs, want 1", n)
				}
				// The commit, two trees and the blob, and the bases of
				// deltas that git appends to a thin pack: not 200 blobs.
				if n := newObjects(t, cache, before); n == 0 || n > 12 {
					t.Fatalf("a one-file commit stored %d objects", n)
				}
				assertNoCheckout(t, cache, "apps", "infra")

				// History rewritten: a new root commit replaces main.
				r.Git("checkout", "-q", "--orphan", "rewrite")
				r.Git("rm", "-rq", "--cached", ".")
				for _, d := range []string{"apps", "infra"} {
					if err := os.RemoveAll(filepath.Join(r.Dir, d)); err != nil {
						t.Fatal(err)
					}
				}
				r.Write(map[string]string{"apps/r007.yaml": "name: changed\n", "apps/new.yaml": "n: 1\n"})
				rewritten := r.Commit("rewritten")
				r.Git("branch", "-M", "rewrite", "main")
				snap = fetch(t, s)
				if want := manifest.Revision("main@sha1:" + rewritten); snap.Revision != want {
					t.Fatalf("revision after force-push = %s, want %s", snap.Revision, want)
				}
				assertContents(t, snap, map[string]string{"apps/r007.yaml": "name: changed\n", "apps/new.yaml": "n: 1\n"})

				// A new process on the cache agrees without fetching.
				restarted := newEngineSource(t, url, e, func(c *Config) { c.Auth = auth; c.CacheDir = cache })
				before = packs(t, cache)
				if again := fetch(t, restarted); again.Revision != snap.Revision {
					t.Fatalf("restarted revision = %s, want %s", again.Revision, snap.Revision)
				}
				if n := newObjects(t, cache, before); n != 0 {
					t.Fatalf("a restart on an unchanged head stored %d objects", n)
				}
			})
		}
	}
}

// TestEnginesTrimCache shows that a cache fetched into many times does not
// keep every pack, whatever the engine.
func TestEnginesTrimCache(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			t.Parallel()
			r := gittest.NewRepo(t)
			s := newEngineSource(t, r.URL(), e, nil)
			s.maxPacks = 2
			s.maxLoose = looseCount{objects: 8, bytes: 1 << 20}
			for i := range 8 {
				content := strings.Repeat("x", i+1) + ": 1\n"
				r.Write(map[string]string{"a.yaml": content, fmt.Sprintf("b/%d.yaml", i): "b: 1\n"})
				head := r.Commit("change")
				snap := fetch(t, s)
				if string(snap.Revision) != "main@sha1:"+head {
					t.Fatalf("revision = %s, want main@sha1:%s", snap.Revision, head)
				}
				if len(snap.Files) != i+2 || contents(snap)["a.yaml"] != content {
					t.Fatalf("after fetch %d: files %v", i+1, contents(snap))
				}
				if n := s.countPacks(); n > s.maxPacks+1 {
					t.Fatalf("after fetch %d the clone holds %d packs", i+1, n)
				}
				// A fetch adds a commit, two trees and two blobs at most.
				if c := countLoose(filepath.Join(s.cfg.CacheDir, "objects")); c.objects > s.maxLoose.objects+5 {
					t.Fatalf("after fetch %d the clone holds %d loose objects", i+1, c.objects)
				}
			}
		})
	}
}

// TestUnchangedBlobsNotRead shows what a new commit reads: only the blobs
// it changed while contents are kept, every blob (from the object store,
// no network) but no hashing when they are not.
func TestUnchangedBlobsNotRead(t *testing.T) {
	t.Parallel()
	for _, retained := range []bool{true, false} {
		t.Run(fmt.Sprintf("retained=%v", retained), func(t *testing.T) {
			t.Parallel()
			r := gittest.NewRepo(t)
			r.Write(map[string]string{"a/1.yaml": "a: 1\n", "a/2.yaml": "a: 2\n", "b/1.yaml": "b: 1\n", "c.yaml": "c: 1\n",
				"e.yaml": "x: 1\n"})
			r.Commit("first")
			s := newSource(t, r.URL(), nil)
			if !retained {
				s.maxRetained = 0
			}
			first := fetch(t, s)
			if n := s.reads.Load(); n != 5 {
				t.Fatalf("first fetch read %d blobs, want 5", n)
			}
			r.Write(map[string]string{"a/2.yaml": "a: 22\n", "d.yaml": "a: 1\n"}) // d.yaml has a/1.yaml's blob
			r.Commit("second")
			snap := fetch(t, s)
			assertContents(t, snap, map[string]string{"a/1.yaml": "a: 1\n", "a/2.yaml": "a: 22\n", "b/1.yaml": "b: 1\n",
				"c.yaml": "c: 1\n", "d.yaml": "a: 1\n", "e.yaml": "x: 1\n"})
			wantReads := int64(5 + 1) // the changed blob; d.yaml's is known
			if !retained {
				wantReads = 5 + 6 // every file, from the store
			}
			if n := s.reads.Load(); n != wantReads {
				t.Fatalf("second fetch: %d reads in all, want %d", n, wantReads)
			}
			// Hashes are the contents' whatever was read.
			for _, f := range snap.Files {
				if f.Hash != manifest.HashJSON(f.Data) {
					t.Fatalf("%s: hash %s does not match its data", f.Path, f.Hash)
				}
			}
			// The first snapshot is untouched by the second.
			assertContents(t, first, map[string]string{"a/1.yaml": "a: 1\n", "a/2.yaml": "a: 2\n", "b/1.yaml": "b: 1\n",
				"c.yaml": "c: 1\n", "e.yaml": "x: 1\n"})
			// An unchanged head reads nothing when contents are kept, and
			// rebuilds the same snapshot from the store when they are not.
			reads := s.reads.Load()
			again := fetch(t, s)
			assertContents(t, again, contents(snap))
			if got := s.reads.Load() - reads; (retained && got != 0) || (!retained && got != 6) {
				t.Fatalf("unchanged head read %d blobs", got)
			}
		})
	}
}

// TestUnchangedHeadAfterCacheLost shows that a source whose contents are
// not kept and whose clone was emptied fetches again instead of failing.
func TestUnchangedHeadAfterCacheLost(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("first")
	s := newSource(t, r.URL(), nil)
	s.maxRetained = 0
	fetch(t, s)
	if err := s.emptyCache(); err != nil {
		t.Fatal(err)
	}
	assertContents(t, fetch(t, s), map[string]string{"a.yaml": "a: 1\n"})
}

// TestTreeMatchesCheckout compares what the source reads from the object
// store with what source.ReadTree reads from a checkout of the same
// commit, on a tree with every rule's edge, before and after a commit
// that changes files, links and the ignore file.
func TestTreeMatchesCheckout(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{
		"a.yaml":              "a: 1\n",
		"a-b.yaml":            "ab: 1\n",
		"a/x.yaml":            "ax: 1\n",
		"A.JSON":              `{"a": 1}`,
		"b.yml":               "b: 1\n",
		"notes.txt":           "not a manifest\n",
		".hidden.yaml":        "h: 1\n",
		".dir/x.yaml":         "h: 1\n",
		"sub/.x.yaml":         "h: 1\n",
		"sub/deep/er/y.yaml":  "y: 1\n",
		"sub/big.yaml":        strings.Repeat("b", 300) + "\n",
		"empty.yaml":          "x: 0\n",
		"ignored/i.yaml":      "i: 1\n",
		"keep/draft-1.yaml":   "d: 1\n",
		"keep/real.yaml":      "r: 1\n",
		"real/target.yaml":    "t: 1\n",
		".no8signore":         "ignored/\n*draft*\n",
		"exec.yaml":           "e: 1\n",
		"sub/deep/other.json": "{}\n",
	})
	if err := os.WriteFile(filepath.Join(r.Dir, "empty.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(r.Dir, "exec.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"in.yaml":           "a.yaml",
		"up.yaml":           "../outside.yaml",
		"abs.yaml":          "/etc/hostname",
		"dangling.yaml":     "nope.yaml",
		"todir.yaml":        "sub",
		"chain.yaml":        "in.yaml",
		"escape-chain.yaml": "up.yaml",
		"loop1.yaml":        "loop2.yaml",
		"loop2.yaml":        "loop1.yaml",
		"dirlink":           "real",
		"via.yaml":          "dirlink/target.yaml",
		"sub/back.yaml":     "../b.yml",
		"sub/deep/far.yaml": "../../real/../a.yaml",
		"notyaml":           "a.yaml",
	}
	for name, to := range links {
		if err := os.Symlink(to, filepath.Join(r.Dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	// A submodule: a gitlink entry, whose commit is not in this repository.
	r.Git("update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("1", 40)+",module")
	r.Commit("tree")

	opts := func(c *Config) { c.Load.MaxFileSize = 200 }
	s := newSource(t, r.URL(), opts)
	compareWithCheckout(t, r, fetch(t, s), manifest.LoadOptions{MaxFileSize: 200})

	// Change a folder, a link's target, the ignore file; remove a link.
	r.Write(map[string]string{
		"a.yaml":              "a: 2\n",
		"sub/deep/er/y.yaml":  "y: 2\n",
		".no8signore":         "*draft*\nsub/deep/\n",
		"keep/draft-2.yaml":   "d: 2\n",
		"sub/deep/other.json": "",
	})
	if err := os.Remove(filepath.Join(r.Dir, "loop1.yaml")); err != nil {
		t.Fatal(err)
	}
	r.Commit("change")
	compareWithCheckout(t, r, fetch(t, s), manifest.LoadOptions{MaxFileSize: 200})
	// And again with the same rules, so that unchanged folders are taken
	// over from the last snapshot.
	r.Write(map[string]string{"sub/big.yaml": "small: 1\n", "real/target.yaml": "t: 2\n"})
	r.Commit("again")
	compareWithCheckout(t, r, fetch(t, s), manifest.LoadOptions{MaxFileSize: 200})
}

// compareWithCheckout checks snap against source.ReadTree of a checkout
// of r's head.
func compareWithCheckout(t *testing.T, r *gittest.Repo, snap *source.Snapshot, opts manifest.LoadOptions) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "checkout")
	clone := exec.Command("git", "clone", "-q", r.Dir, dir)
	clone.Env = gittest.Env()
	out, err := clone.CombinedOutput()
	if err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	files, problems, err := source.ReadTree(root.FS(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, f := range snap.Files {
		got = append(got, f.Path+" "+f.Hash+" "+strconv.Quote(string(f.Data)))
	}
	for _, f := range files {
		if f.Path == ".git" || strings.HasPrefix(f.Path, ".git/") {
			continue
		}
		want = append(want, f.Path+" "+f.Hash+" "+strconv.Quote(string(f.Data)))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("files from the object store:\n%s\nfrom a checkout:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got, want = nil, nil
	for _, p := range snap.Problems {
		got = append(got, p.String())
	}
	for _, p := range problems {
		want = append(want, p.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems from the object store:\n%s\nfrom a checkout:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(snap.Files) == 0 || len(snap.Problems) == 0 {
		t.Fatal("the tree should give both files and problems")
	}
}

// TestWorktreeCacheReplaced shows that a cache left by an older agent, a
// clone with a checked-out worktree, is replaced by a bare repository.
func TestWorktreeCacheReplaced(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"m/a.yaml": "a: 1\n"})
	head := r.Commit("first")
	cache := filepath.Join(t.TempDir(), "cache")
	clone := exec.Command("git", "clone", "-q", r.Dir, cache)
	clone.Env = gittest.Env()
	if out, err := clone.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	s := newSource(t, r.URL(), func(c *Config) { c.CacheDir = cache; c.Path = "m" })
	snap := fetch(t, s)
	if string(snap.Revision) != "main@sha1:"+head {
		t.Fatalf("revision = %s", snap.Revision)
	}
	assertContents(t, snap, map[string]string{"a.yaml": "a: 1\n"})
	assertNoCheckout(t, cache, "m")
}

// processes returns the command line and environment of every process
// of this user whose command line mentions needle.
func processes(t *testing.T, needle string) map[int][2]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	found := map[int][2]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(needle)) {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		found[pid] = [2]string{string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), string(environ)}
	}
	return found
}

// TestGitCredentialsHidden fetches with a token through the git binary and
// looks at every process while the server is answering: the token is in
// no command line and no environment. Refused credentials give ErrAuth
// without the token in the error.
func TestGitCredentialsHidden(t *testing.T) {
	t.Parallel()
	const token = "tok-very-secret-123"
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("first")
	gs := gittest.NewServer(t, filepath.Dir(r.Dir), tokenUsername, token)
	url := gs.URL + "/repo/.git"
	var (
		mu   sync.Mutex
		seen map[int][2]string
	)
	gs.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodPost {
			mu.Lock()
			seen = processes(t, gs.URL)
			mu.Unlock()
		}
		return false
	})
	s := newEngineSource(t, url, engineGit, func(c *Config) { c.Auth = Auth{Token: token} })
	assertContents(t, fetch(t, s), map[string]string{"a.yaml": "a: 1\n"})
	mu.Lock()
	found := seen
	mu.Unlock()
	sawFetch := false
	for pid, p := range found {
		if strings.Contains(p[0], "fetch") {
			sawFetch = true
		}
		for _, part := range p {
			if strings.Contains(part, token) {
				t.Fatalf("process %d shows the token: %q", pid, p[0])
			}
		}
	}
	if !sawFetch {
		t.Fatalf("no git fetch process seen while the server answered: %v", found)
	}

	// Credentials a crashed run left behind go with the next run's.
	stale := filepath.Join(s.cfg.CacheDir, ".credentials-crashed")
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "password"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	// The refs are listed, then the fetch itself is refused.
	r.Write(map[string]string{"a.yaml": "a: 2\n"})
	r.Commit("second")
	gs.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodPost {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		}
		return false
	})
	_, err := s.Fetch(context.Background())
	if !errors.Is(err, source.ErrAuth) || errors.Is(err, source.ErrNotFound) {
		t.Fatalf("err = %v, want ErrAuth only", err)
	}
	if strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "fetch "+url) {
		t.Fatalf("err = %q: want it to say what failed, without the token", err)
	}
	if left, _ := filepath.Glob(filepath.Join(s.cfg.CacheDir, credentialsPattern)); len(left) > 0 {
		t.Fatalf("credentials left in the cache: %v", left)
	}
}

// TestGitFetchKilledOnTimeout stalls the fetch itself: git and every
// process it started end with the timeout, and the error says so.
func TestGitFetchKilledOnTimeout(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("first")
	gs := gittest.NewServer(t, filepath.Dir(r.Dir), "user", "s3cret-pass")
	stalled := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server closes
	gs.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method != http.MethodPost {
			return false
		}
		select {
		case stalled <- struct{}{}:
		default:
		}
		// Read the request whole so that the server sees the client go.
		_, _ = io.Copy(io.Discard, req.Body)
		select {
		case <-req.Context().Done():
		case <-release:
		}
		return true
	})
	s := newEngineSource(t, gs.URL+"/repo/.git", engineGit, func(c *Config) {
		c.Auth = Auth{Username: "user", Password: "s3cret-pass"}
		c.Timeout = 2 * time.Second
	})
	_, err := s.Fetch(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	select {
	case <-stalled:
	default:
		t.Fatal("the fetch never reached the server")
	}
	// Killed processes may take a moment to leave /proc.
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for left := processes(t, gs.URL); len(left) > 0; left = processes(t, gs.URL) {
		select {
		case <-deadline:
			t.Fatalf("processes left after the timeout: %v", left)
		case <-tick.C:
		}
	}
}

// TestRelativeCacheDir fetches into a cache folder given relative to the
// working directory, which git, running in the cache, must not misread.
func TestRelativeCacheDir(t *testing.T) {
	t.Parallel()
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	r.Commit("first")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	rel, err := filepath.Rel(wd, cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range engines {
		s := newEngineSource(t, r.URL(), e, func(c *Config) { c.CacheDir = rel })
		if s.cfg.CacheDir != cache {
			t.Fatalf("cache folder = %s, want %s", s.cfg.CacheDir, cache)
		}
		assertContents(t, fetch(t, s), map[string]string{"a.yaml": "a: 1\n"})
		if err := s.emptyCache(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGoGitWithoutGitBinary shows that a source without git on PATH
// fetches with go-git.
func TestGoGitWithoutGitBinary(t *testing.T) {
	r := gittest.NewRepo(t)
	r.Write(map[string]string{"a.yaml": "a: 1\n"})
	head := r.Commit("first")
	gs := gittest.NewServer(t, filepath.Dir(r.Dir), "user", "s3cret-pass")
	t.Setenv("PATH", t.TempDir())
	s := newSource(t, gs.URL+"/repo/.git", func(c *Config) { c.Auth = Auth{Username: "user", Password: "s3cret-pass"} })
	if s.engine != engineGoGit {
		t.Fatalf("engine = %s without git, want go-git", s.engine)
	}
	snap := fetch(t, s)
	if string(snap.Revision) != "main@sha1:"+head {
		t.Fatalf("revision = %s", snap.Revision)
	}
	assertContents(t, snap, map[string]string{"a.yaml": "a: 1\n"})
}

func TestGitErrorClassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stderr   string
		withAuth bool
		want     error
	}{
		{"fatal: couldn't find remote ref refs/heads/gone", false, source.ErrNotFound},
		{"fatal: Authentication failed for 'https://example.com/r.git/'", true, source.ErrAuth},
		{"fatal: could not read Username for 'https://example.com': terminal prompts disabled", false, source.ErrAuth},
		{"Permission denied (publickey).\nfatal: Could not read from remote repository.", true, source.ErrAuth},
		{"remote: Repository not found.\nfatal: repository 'https://example.com/r.git/' not found", false, source.ErrNotFound},
		{"remote: Repository not found.\nfatal: repository 'https://example.com/r.git/' not found", true, source.ErrAuth},
		{"fatal: unable to access 'https://example.com/r.git/': Could not resolve host: example.com", false, nil},
		{"Host key verification failed.\nfatal: Could not read from remote repository.", true, nil},
		{"git: 'remote-https' is not a git command. See 'git --help'.", false, nil},
		{"fatal: remote helper 'https' not found", false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.stderr, func(t *testing.T) {
			t.Parallel()
			s := &Source{location: "https://example.com/r.git", cfg: Config{Ref: Ref{Branch: "main"}}}
			if tc.withAuth {
				s.auth = &githttp.BasicAuth{Username: "u", Password: "p"}
			}
			err := s.gitError(context.Background(), "fetch x", gitRunError(errors.New("exit status 128"), []byte(tc.stderr)))
			for _, e := range []error{source.ErrNotFound, source.ErrAuth} {
				if errors.Is(err, e) != (e == tc.want) {
					t.Fatalf("err = %v: is %v = %v, want %v", err, e, errors.Is(err, e), e == tc.want)
				}
			}
		})
	}
}

func TestGitSSHCommand(t *testing.T) {
	t.Parallel()
	s := &Source{cfg: Config{Timeout: 30 * time.Second, Auth: Auth{SSHKeyFile: "/keys/it's key", KnownHostsFile: "/etc/known hosts"}}}
	got := s.sshCommand()
	for _, want := range []string{`-i '/keys/it'\''s key'`, `UserKnownHostsFile='/etc/known hosts'`, "StrictHostKeyChecking=yes",
		"BatchMode=yes", "IdentitiesOnly=yes", "ConnectTimeout=30", "GlobalKnownHostsFile=/dev/null"} {
		if !strings.Contains(got, want) {
			t.Fatalf("ssh command %q lacks %q", got, want)
		}
	}
	// sh reads it back into the same words.
	out, err := exec.Command("sh", "-c", `for a in `+strings.TrimPrefix(got, "ssh ")+`; do printf '%s\n' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "\n/keys/it's key\n") || !strings.Contains(string(out), "UserKnownHostsFile=/etc/known hosts\n") {
		t.Fatalf("sh split the command into %q", out)
	}
}
