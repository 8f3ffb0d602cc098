package faults_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// orphanTokenEnv holds the agents' write token in these scenarios. The
// agent processes inherit the test binary's environment, and t.Setenv
// cannot be used in parallel tests: it is set once, before any test runs.
const (
	orphanTokenEnv = "NO8S_FAULTS_ORPHAN_TOKEN"
	orphanToken    = "orphan-9c1e47"
)

func init() { os.Setenv(orphanTokenEnv, orphanToken) }

// orphanConfig is an agent configuration with the named sources, each a
// folder of the same Git remote, acting on the world folder.
func orphanConfig(dbURL, remote, world string, sources ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\ndatabase: %q\napi: {writeTokenEnv: %s}\nsources:\n", dbURL, orphanTokenEnv)
	for _, s := range sources {
		fmt.Fprintf(&b, "  - name: %s\n    git: {url: %q, branch: main, path: %s, interval: 1s}\n", s, remote, s)
	}
	fmt.Fprintf(&b, `actions:
  web:
    plugin: exec
    config:
      command: [./web.sh]
      timeout: 1m
      env: {WORLD: %q}
reconcile: {workers: 4, leaseDuration: 5s, backoff: {initial: 1s, max: 2s}}
`, world)
	return b.String()
}

// orphanFixture is a database, a Git remote and a world folder on which
// an agent with sources alpha (the Site type and a1) and beta (b1 and b2)
// ran until everything was ready, and was stopped.
type orphanFixture struct {
	dbURL, work, world string
	remote             *gitRemote
}

// newOrphanFixture runs an agent with sources alpha and beta until their
// resources are ready and applied to the world, then stops it.
func newOrphanFixture(t *testing.T) orphanFixture {
	t.Helper()
	f := orphanFixture{dbURL: pgtest.URL(t), work: t.TempDir(), remote: newGitRemote(t)}
	f.world = newWorld(t, f.work)
	f.remote.Commit(t, map[string]string{
		"alpha/types.yaml": siteType, "alpha/a1.yaml": site("a1", 1),
		"beta/b1.yaml": site("b1", 1), "beta/b2.yaml": site("b2", 1),
	}, "two sources")

	cfg := writeConfig(t, f.work, f.config("alpha", "beta"))
	first := startAgent(t, f.work, "run", "--config", cfg)
	base := first.URL()
	waitUntil(t, 90*time.Second, "both sources' resources to be ready", func() (bool, string) {
		rs := listResources(t, base)
		for _, name := range []string{"a1", "b1", "b2"} {
			if r, ok := rs[name]; !ok || r.Status != "ready" {
				return false, fmt.Sprintf("%s: %+v", name, r)
			}
		}
		return len(readWorld(t, f.world)) == 3, fmt.Sprintf("world %v", readWorld(t, f.world))
	})
	first.Stop()
	return f
}

// config is the fixture's agent configuration with the named sources.
func (f orphanFixture) config(sources ...string) string {
	return orphanConfig(f.dbURL, f.remote.FileURL(), f.world, sources...)
}

// orphanSetup runs an agent with sources alpha (the Site type and a1) and
// beta (b1 and b2) until everything is ready, then restarts it with a
// configuration without beta, and waits until the API shows beta orphaned
// and a manual reconcile of a1 went through. It returns the second agent's
// base URL and the world folder.
func orphanSetup(t *testing.T) (string, string) {
	t.Helper()
	f := newOrphanFixture(t)
	world := f.world

	cfg := writeConfig(t, f.work, f.config("alpha"))
	second := startAgent(t, f.work, "run", "--config", cfg)
	base := second.URL()
	var beta apiSource
	if status := apiGet(t, base+"/api/v1/sources/beta", &beta); status != http.StatusOK || beta.Phase != "orphaned" ||
		!strings.Contains(beta.Message, "forget") {
		t.Fatalf("source beta after it left the configuration: %d %+v; want orphaned, saying how to forget it", status, beta)
	}
	rs := listResources(t, base)
	if r := rs["b1"]; r.Status != "ready" || rs["b2"].Status != "ready" {
		t.Fatalf("resources of the orphaned source: %+v", rs)
	}
	// Manual reconciles of a1 and b1: a1's is served; b1's is refused
	// with why, as it would never run, and nothing of it is reconciled.
	applies := countCalls(t, world, "apply")
	orphanCall(t, "POST", fmt.Sprintf("%s/api/v1/resources/%d/reconcile", base, orphanResourceID(t, base, "a1")), http.StatusAccepted)
	if body := orphanCall(t, "POST", fmt.Sprintf("%s/api/v1/resources/%d/reconcile", base, orphanResourceID(t, base, "b1")), http.StatusConflict); !strings.Contains(body, "orphaned") {
		t.Fatalf("a reconcile of the orphaned source's b1 answered %s; want it to say the source is orphaned", body)
	}
	waitUntil(t, 60*time.Second, "the manual reconcile of a1", func() (bool, string) {
		c := countCalls(t, world, "apply")
		return c > applies, fmt.Sprintf("%d applies", c)
	})
	waitUntil(t, 30*time.Second, "a1 to be ready again", func() (bool, string) {
		r := listResources(t, base)["a1"]
		return r.Status == "ready", r.Status
	})
	if got := countCalls(t, world, "apply"); got != applies+1 {
		t.Fatalf("%d applies after the manual reconciles, want %d: a resource of the orphaned source was reconciled", got, applies+1)
	}
	if got := countCalls(t, world, "destroy"); got != 0 {
		t.Fatalf("%d destroys after the source left the configuration, want 0", got)
	}
	return base, world
}

// orphanResourceID returns the ID of the named resource through the API.
func orphanResourceID(t *testing.T, base, name string) int64 {
	t.Helper()
	var list []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	if status := apiGet(t, base+"/api/v1/resources", &list); status != http.StatusOK {
		t.Fatalf("list resources: %d", status)
	}
	for _, r := range list {
		if r.Name == name {
			return r.ID
		}
	}
	t.Fatalf("no resource %s", name)
	return 0
}

// orphanCall sends a request with the write token and fails unless it answers want.
func orphanCall(t *testing.T, method, url string, want int) string {
	t.Helper()
	status, body := tokenCall(t, method, url, orphanToken)
	if status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, url, status, body, want)
	}
	return body
}

// tokenCall sends a request with the bearer token and returns the status
// and body of the answer.
func tokenCall(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestOrphanedSourceForget drops a source from the configuration and then
// forgets it: its resources stay untouched while it is orphaned, and
// forgetting removes them from the store without destroying anything.
func TestOrphanedSourceForget(t *testing.T) {
	t.Parallel()
	base, world := orphanSetup(t)
	orphanCall(t, "DELETE", base+"/api/v1/sources/beta?mode=forget", http.StatusOK)
	rs := listResources(t, base)
	if _, ok := rs["b1"]; ok || len(rs) != 1 {
		t.Fatalf("resources after forgetting beta: %v; want a1 only", rs)
	}
	var src apiSource
	if status := apiGet(t, base+"/api/v1/sources/beta", &src); status != http.StatusNotFound {
		t.Fatalf("forgotten source: %d %+v, want 404", status, src)
	}
	if got := countCalls(t, world, "destroy"); got != 0 {
		t.Errorf("%d destroys after forgetting, want 0", got)
	}
	if w := readWorld(t, world); len(w) != 3 {
		t.Errorf("world after forgetting: %v; want all three sites still there", w)
	}
}

// TestOrphanedSourcePrune drops a source from the configuration and then
// prunes it: refused without approval, then its resources are destroyed
// through the action and the source goes.
func TestOrphanedSourcePrune(t *testing.T) {
	t.Parallel()
	base, world := orphanSetup(t)
	if body := orphanCall(t, "DELETE", base+"/api/v1/sources/beta?mode=prune", http.StatusConflict); !strings.Contains(body, "approve=true") {
		t.Fatalf("unapproved prune answered %s; want it to say how to approve", body)
	}
	orphanCall(t, "DELETE", base+"/api/v1/sources/beta?mode=prune&approve=true", http.StatusAccepted)
	waitUntil(t, 60*time.Second, "beta's resources to be destroyed and the source to go", func() (bool, string) {
		rs := listResources(t, base)
		var src apiSource
		status := apiGet(t, base+"/api/v1/sources/beta", &src)
		return len(rs) == 1 && status == http.StatusNotFound, fmt.Sprintf("%d resources, source %d %s", len(rs), status, src.Phase)
	})
	if got := countCalls(t, world, "destroy"); got != 2 {
		t.Errorf("%d destroys, want 2 (b1 and b2)", got)
	}
	if w := readWorld(t, world); len(w) != 1 || w["a1"] == "" {
		t.Errorf("world after pruning: %v; want a1 only", w)
	}
}
