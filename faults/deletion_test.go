package faults_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// siteCount is how many sites each mass-deletion scenario starts with.
const siteCount = 10

// fleet is an agent that provisions sites from Git through the world
// script, whose destroys are counted in the world's call log.
type fleet struct {
	agent *agent
	base  string
	world string
}

// startFleet runs an agent with the sources block given (YAML, indented
// under "sources:") and the world script as the action instance "web".
func startFleet(t *testing.T, sources string) *fleet {
	t.Helper()
	return startFleetWith(t, "", sources)
}

// startFleetWith is startFleet with the configuration lines head (YAML, at
// the top level) before the sources.
func startFleetWith(t *testing.T, head, sources string) *fleet {
	t.Helper()
	work := t.TempDir()
	world := newWorld(t, work)
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
%ssources:
%s
actions:
  web:
    plugin: exec
    config:
      command: [./web.sh]
      timeout: 1m
      env: {WORLD: %q}
reconcile: {workers: 4, leaseDuration: 5s, backoff: {initial: 1s, max: 2s}}
`, pgtest.URL(t), head, sources, world))
	a := startAgent(t, work, "run", "--config", cfg)
	return &fleet{agent: a, base: a.URL(), world: world}
}

// sites returns the files of n sites under dir, replicas each.
func sites(dir string, n, replicas int) map[string]string {
	files := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		files[dir+"/"+name+".yaml"] = site(name, replicas)
	}
	return files
}

// waitSource waits until the named source satisfies ok.
func (f *fleet) waitSource(t *testing.T, name, what string, ok func(apiSource) bool) apiSource {
	t.Helper()
	var src apiSource
	waitUntil(t, 90*time.Second, what, func() (bool, string) {
		if f.agent.Exited() {
			t.Fatal("the agent exited")
		}
		src = apiSource{}
		if apiGet(t, f.base+"/api/v1/sources/"+name, &src) != 200 {
			return false, "source not readable"
		}
		return ok(src), fmt.Sprintf("source %s: phase %s, applied %s, attempted %s: %s",
			name, src.Phase, src.LastAppliedRevision, src.LastAttemptedRevision, src.Message)
	})
	return src
}

// waitApplied waits until the source applied the commit and every site is
// ready at its generation, in the store and in the world.
func (f *fleet) waitApplied(t *testing.T, name, commit string, want int) {
	t.Helper()
	f.waitSource(t, name, "source "+name+" to apply "+commit, func(s apiSource) bool {
		return s.Phase == "ready" && strings.HasSuffix(s.LastAppliedRevision, commit)
	})
	waitUntil(t, 90*time.Second, "every site ready", func() (bool, string) {
		rs := listResources(t, f.base)
		if len(rs) != want {
			return false, fmt.Sprintf("%d resources, want %d", len(rs), want)
		}
		for n, r := range rs {
			if r.Status != "ready" || r.ObservedGeneration != r.Generation {
				return false, fmt.Sprintf("%s: %s generation %d observed %d", n, r.Status, r.Generation, r.ObservedGeneration)
			}
		}
		if w := readWorld(t, f.world); len(w) != want {
			return false, fmt.Sprintf("world holds %d sites", len(w))
		}
		return true, ""
	})
}

// assertIntact fails the test when anything was destroyed or marked for
// destruction: every site still in the store, none deleting, none gone
// from the world, and no destroy in the call log.
func (f *fleet) assertIntact(t *testing.T, want int) {
	t.Helper()
	if n := countCalls(t, f.world, "destroy"); n != 0 {
		t.Fatalf("%d destroy call(s), want none", n)
	}
	f.assertKept(t, want)
}

// assertKept fails the test unless the store holds want sites, none of
// them deleting, and the world holds want sites.
func (f *fleet) assertKept(t *testing.T, want int) {
	t.Helper()
	rs := listResources(t, f.base)
	if len(rs) != want {
		t.Fatalf("%d resources in the store, want %d", len(rs), want)
	}
	for n, r := range rs {
		if r.Status == "deleting" {
			t.Fatalf("%s is being deleted", n)
		}
	}
	if w := readWorld(t, f.world); len(w) != want {
		t.Fatalf("world holds %d sites, want %d", len(w), want)
	}
}

// failedWith reports whether a source is in phase, with every part in its
// message.
func failedWith(phase string, parts ...string) func(apiSource) bool {
	return func(s apiSource) bool {
		if s.Phase != phase {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(s.Message, p) {
				return false
			}
		}
		return true
	}
}

// TestMassDeletionFromTheRemote breaks a Git remote in the ways that once
// read as "nothing is declared any more", with the guards set as loose as
// they go (allowEmpty, no deletion cap), so that only the source's refusal
// to mistake a failure for an empty snapshot stands between the fault and
// ten destroyed sites. Each fault is undone before the next.
func TestMassDeletionFromTheRemote(t *testing.T) {
	t.Parallel()
	remote := newGitRemote(t)
	files := sites("sites", siteCount, 1)
	files["types/site.yaml"] = siteType
	head := remote.Commit(t, files, "ten sites")
	remote.Run(t, "branch", "live")
	srv := serveGitHTTP(t, remote)
	proxy := newCuttingProxy(t, srv.URL())
	f := startFleet(t, fmt.Sprintf(`  - name: sites
    git: {url: %q, branch: live, interval: 1s, timeout: 3s}
    prune: {enabled: true, allowEmpty: true, maxDeletes: 100%%}`, proxy.URL()))
	f.waitApplied(t, "sites", head, siteCount)

	// publish moves live to main's head and waits until it is applied.
	publish := func(t *testing.T, head string) {
		t.Helper()
		remote.Run(t, "branch", "-f", "live", head)
		f.waitApplied(t, "sites", head, siteCount)
		f.assertIntact(t, siteCount)
	}

	t.Run("wiped remote", func(t *testing.T) {
		// As when the repository is re-created empty: no refs at all.
		remote.Run(t, "update-ref", "-d", "refs/heads/live")
		remote.Run(t, "update-ref", "-d", "refs/heads/main")
		f.waitSource(t, "sites", "the wiped remote to fail the fetch",
			failedWith("failed", "FetchFailed", `branch "live"`, "no branches or tags"))
		f.assertIntact(t, siteCount)
		remote.Run(t, "update-ref", "refs/heads/main", head)
		publish(t, head)
	})

	t.Run("branch deleted", func(t *testing.T) {
		remote.Run(t, "branch", "-D", "live")
		f.waitSource(t, "sites", "the deleted branch to fail the fetch",
			failedWith("failed", "FetchFailed", `branch "live"`, "does not exist"))
		f.assertIntact(t, siteCount)
		publish(t, head)
	})

	t.Run("broken render", func(t *testing.T) {
		broken := remote.Commit(t, map[string]string{"sites/s03.yaml": "apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: s03\n"}, "break a file")
		remote.Run(t, "branch", "-f", "live", broken)
		f.waitSource(t, "sites", "the broken file to be refused", func(s apiSource) bool {
			return failedWith("failed", "ValidationFailed", "sites/s03.yaml")(s) && strings.HasSuffix(s.LastAttemptedRevision, broken)
		})
		f.assertIntact(t, siteCount)
		head = remote.Commit(t, map[string]string{"sites/s03.yaml": site("s03", 1)}, "fix it")
		publish(t, head)
	})

	t.Run("partial fetch", func(t *testing.T) {
		// A commit that changes every site; the remote dies half-way
		// through sending its objects, twice, then stays down a while.
		applies := countCalls(t, f.world, "apply")
		proxy.cut.Store(true)
		next := remote.Commit(t, sites("sites", siteCount, 2), "grow every site")
		remote.Run(t, "branch", "-f", "live", next)
		waitUntil(t, 90*time.Second, "two fetches cut half-way", func() (bool, string) {
			n := proxy.cuts.Load()
			return n >= 2, fmt.Sprintf("%d fetch(es) cut", n)
		})
		srv.Down()
		f.waitSource(t, "sites", "the cut fetch to fail the source", failedWith("failed", "FetchFailed"))
		f.assertIntact(t, siteCount)
		if n := countCalls(t, f.world, "apply"); n != applies {
			t.Fatalf("%d apply call(s) during the partial fetches, want none", n-applies)
		}
		proxy.cut.Store(false)
		srv.Up()
		head = next
		publish(t, head)
	})
}

// cuttingProxy forwards Git's smart HTTP to a remote and, while cut is set,
// breaks every object transfer (git-upload-pack) half-way: the response
// starts and the connection is closed in the middle of the pack, as when
// the remote dies mid-fetch.
type cuttingProxy struct {
	url  string
	cut  atomic.Bool
	cuts atomic.Int32
}

// newCuttingProxy serves on 127.0.0.1 in front of target until the test ends.
func newCuttingProxy(t *testing.T, target string) *cuttingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !p.cut.Load() || !strings.HasSuffix(resp.Request.URL.Path, "/git-upload-pack") {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		p.cuts.Add(1)
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), iotest.ErrReader(errors.New("remote died"))))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.url = srv.URL + u.Path
	return p
}

// URL is the clone URL through the proxy.
func (p *cuttingProxy) URL() string { return p.url }

// TestMassDeletionPathGone follows a path in the repository that a commit
// moves away: a missing path is a failed fetch, not an empty folder.
func TestMassDeletionPathGone(t *testing.T) {
	t.Parallel()
	remote := newGitRemote(t)
	files := sites("sites", siteCount, 1)
	files["sites/types.yaml"] = siteType
	head := remote.Commit(t, files, "ten sites")
	f := startFleet(t, fmt.Sprintf(`  - name: sites
    git: {url: %q, branch: main, path: sites, interval: 1s}
    prune: {enabled: true, allowEmpty: true, maxDeletes: 100%%}`, remote.FileURL()))
	f.waitApplied(t, "sites", head, siteCount)

	remote.Run(t, "mv", "sites", "renamed")
	moved := remote.Commit(t, nil, "rename the folder")
	f.waitSource(t, "sites", "the missing path to fail the fetch", func(s apiSource) bool {
		return failedWith("failed", "FetchFailed", `path "sites"`, moved)(s)
	})
	f.assertIntact(t, siteCount)
}

// TestMassDeletionGuards runs the scenarios where the remote is fine but
// the revision would destroy what should stay: an empty tree force-pushed,
// a type removed while in use, two sources claiming one name. The guards
// are the defaults: no empty snapshot, the default deletion cap.
func TestMassDeletionGuards(t *testing.T) {
	t.Parallel()
	remote := newGitRemote(t)
	files := sites("sites", siteCount, 1)
	files["types/site.yaml"] = siteType
	head := remote.Commit(t, files, "ten sites")
	f := startFleet(t, fmt.Sprintf(`  - name: sites
    git: {url: %[1]q, branch: main, path: sites, interval: 1s}
  - name: platform
    git: {url: %[1]q, branch: main, path: types, interval: 1s}`, remote.FileURL()))
	f.waitApplied(t, "sites", head, siteCount)
	f.waitSource(t, "platform", "platform to apply the type", func(s apiSource) bool {
		return s.Phase == "ready" && strings.HasSuffix(s.LastAppliedRevision, head)
	})

	t.Run("type deleted in use", func(t *testing.T) {
		gone := remote.Commit(t, map[string]string{"types/site.yaml": "", "types/README.yaml": "# types\n"}, "drop the type")
		f.waitSource(t, "platform", "the type removal to be refused", func(s apiSource) bool {
			return failedWith("failed", "TypeInUse", "Site")(s) && strings.HasSuffix(s.LastAttemptedRevision, gone)
		})
		f.assertIntact(t, siteCount)
		head = remote.Commit(t, map[string]string{"types/site.yaml": siteType}, "bring the type back")
		f.waitSource(t, "platform", "platform to apply the type again", func(s apiSource) bool {
			return s.Phase == "ready" && strings.HasSuffix(s.LastAppliedRevision, head)
		})
	})

	t.Run("two sources claim one name", func(t *testing.T) {
		claim := remote.Commit(t, map[string]string{"types/s00.yaml": site("s00", 5)}, "platform declares s00 too")
		f.waitSource(t, "platform", "the second claim to be refused", func(s apiSource) bool {
			return failedWith("failed", "OwnershipConflict", "s00")(s) && strings.HasSuffix(s.LastAttemptedRevision, claim)
		})
		f.assertIntact(t, siteCount)
		head = remote.Commit(t, map[string]string{"types/s00.yaml": ""}, "drop the second claim")
		f.waitSource(t, "platform", "platform to apply without the claim", func(s apiSource) bool {
			return s.Phase == "ready" && strings.HasSuffix(s.LastAppliedRevision, head)
		})
		f.waitApplied(t, "sites", head, siteCount)
	})

	t.Run("force-push of an empty tree", func(t *testing.T) {
		// A real commit with nothing in it replaces main.
		remote.Run(t, "checkout", "-q", "--orphan", "empty")
		remote.Run(t, "rm", "-rqf", ".")
		remote.Run(t, "commit", "-q", "--allow-empty", "-m", "nothing")
		empty := remote.Run(t, "rev-parse", "HEAD")
		remote.Run(t, "branch", "-M", "empty", "main")
		f.waitSource(t, "sites", "the empty tree to be refused", func(s apiSource) bool {
			return failedWith("stalled", "EmptySnapshotRefused")(s) && strings.HasSuffix(s.LastAttemptedRevision, empty)
		})
		f.assertIntact(t, siteCount)
	})
}

// syncRuns sums the agent's sync attempts of a source, of every result,
// from its metrics.
func syncRuns(t *testing.T, base, source string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	total := 0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "no8s_sync_runs_total{") || !strings.Contains(line, `source="`+source+`"`) {
			continue
		}
		fields := strings.Fields(line)
		n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		total += int(n)
	}
	return total
}

// TestRefusalRecordedOnce leaves a broken file in a folder source polled
// every second: the refusal is recorded once, in one history row and one
// warning, however many times the source is looked at afterwards.
func TestRefusalRecordedOnce(t *testing.T) {
	t.Parallel()
	folder := filepath.Join(t.TempDir(), "manifests")
	writeFile(t, filepath.Join(folder, "types.yaml"), siteType)
	writeFile(t, filepath.Join(folder, "s00.yaml"), site("s00", 1))
	f := startFleet(t, fmt.Sprintf(`  - name: local
    dir: %q
    interval: 1s`, folder))
	f.waitSource(t, "local", "the folder to be applied", func(s apiSource) bool { return s.Phase == "ready" })

	writeFile(t, filepath.Join(folder, "s01.yaml"), "apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: s01}\nspec: {replicas: many}\n")
	refused := f.waitSource(t, "local", "the broken file to be refused", failedWith("failed", "ValidationFailed", "s01.yaml"))
	after := syncRuns(t, f.base, "local")
	waitUntil(t, 2*time.Minute, "four more looks at the source", func() (bool, string) {
		n := syncRuns(t, f.base, "local")
		return n >= after+4, fmt.Sprintf("%d sync attempts since the refusal", n-after)
	})
	var rows []struct {
		Revision string `json:"revision"`
		Success  bool   `json:"success"`
	}
	if apiGet(t, f.base+"/api/v1/sources/local/history", &rows) != 200 {
		t.Fatal("history not readable")
	}
	n := 0
	for _, r := range rows {
		if r.Revision == refused.LastAttemptedRevision {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d history rows for the refused revision, want 1", n)
	}
	if w := strings.Count(f.agent.Log(), `msg="sync refused"`); w != 1 {
		t.Errorf("%d \"sync refused\" warnings, want 1", w)
	}
}
