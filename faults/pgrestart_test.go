package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// siteType is the resource type the scenarios declare: a site with a
// number of replicas, provisioned by the action instance "web".
const siteType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Site}
spec:
  action: web
  versions:
    - name: v1
      schema:
        type: object
        required: [replicas]
        properties:
          replicas: {type: integer}
`

// site is the manifest of one Site.
func site(name string, replicas int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: %s}\nspec: {replicas: %d}\n", name, replicas)
}

// worldScript pretends to provision sites: the world is a folder with one
// file per site holding the spec last applied, removed on destroy. Every
// call is appended to calls.log, so a test can count destroys. An apply
// takes a while, so that faults strike while actions run. Each call holds
// an exclusive lock on its site for as long as it runs (its children do
// not inherit it); a call that finds the lock taken, because another run
// of the same site is still going, logs an OVERLAP.
const worldScript = `#!/bin/sh
set -eu
exec 9>"$WORLD/$NO8S_RESOURCE_NAME.lock"
if ! flock -n 9; then
	echo "OVERLAP $NO8S_RESOURCE_NAME $$" >>"$WORLD/calls.log"
	flock 9
fi
echo "$NO8S_OPERATION $NO8S_RESOURCE_NAME $NO8S_RESOURCE_GENERATION" >>"$WORLD/calls.log"
case "$NO8S_OPERATION" in
apply)
	sleep "${APPLY_SECONDS:-0}" 9>&-
	printf '%s' "$NO8S_RESOURCE_SPEC" >"$WORLD/$NO8S_RESOURCE_NAME.json.tmp"
	mv "$WORLD/$NO8S_RESOURCE_NAME.json.tmp" "$WORLD/$NO8S_RESOURCE_NAME.json"
	echo '{}'
	;;
destroy)
	rm -f "$WORLD/$NO8S_RESOURCE_NAME.json"
	;;
esac
`

// apiResource is what the scenarios read of a resource in the API.
type apiResource struct {
	Name               string `json:"name"`
	Kind               string `json:"kind"`
	Status             string `json:"status"`
	StatusMessage      string `json:"status_message"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observed_generation"`
}

// apiSource is what the scenarios read of a source in the API.
type apiSource struct {
	Name                  string `json:"name"`
	Phase                 string `json:"phase"`
	Message               string `json:"message"`
	LastAppliedRevision   string `json:"last_applied_revision"`
	LastAttemptedRevision string `json:"last_attempted_revision"`
}

// listResources reads every resource through the agent's API, by name; nil
// when the API does not answer 200.
func listResources(t *testing.T, base string) map[string]apiResource {
	t.Helper()
	var list []apiResource
	if apiGet(t, base+"/api/v1/resources", &list) != 200 {
		return nil
	}
	out := make(map[string]apiResource, len(list))
	for _, r := range list {
		out[r.Name] = r
	}
	return out
}

// readWorld returns the spec the action last applied for each site.
func readWorld(t *testing.T, world string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(world, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = string(b)
	}
	return out
}

// countCalls counts the calls of one operation in the world's call log.
func countCalls(t *testing.T, world, op string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(world, "calls.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, op+" ") {
			n++
		}
	}
	return n
}

// TestPostgresRestartMidRun restarts PostgreSQL under a running agent twice,
// fast and then immediate (a crash of the server, recovered from its WAL),
// each time while actions run and the second time with a commit waiting to
// be synced. The same agent process must carry on by itself, and end with
// the world and the store equal to the last commit, destroying only what
// the last commit removed.
func TestPostgresRestartMidRun(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewServer(t)
	dbURL := pg.URL(t)
	work := t.TempDir()
	world := filepath.Join(work, "world")
	if err := os.MkdirAll(world, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "web.sh"), worldScript)
	if err := os.Chmod(filepath.Join(work, "web.sh"), 0o755); err != nil {
		t.Fatal(err)
	}

	const n = 12
	remote := newGitRemote(t)
	files := map[string]string{"types.yaml": siteType}
	for i := range n {
		files[fmt.Sprintf("sites/s%02d.yaml", i)] = site(fmt.Sprintf("s%02d", i), 1)
	}
	remote.Commit(t, files, "twelve sites")

	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1s}
    prune: {enabled: true, maxDeletes: 50%%}
actions:
  web:
    plugin: exec
    config:
      command: [./web.sh]
      timeout: 1m
      env: {WORLD: %q, APPLY_SECONDS: "1"}
reconcile: {workers: 4, leaseDuration: 5s, backoff: {initial: 1s, max: 2s}}
`, dbURL, remote.FileURL(), world))
	a := startAgent(t, work, "run", "--config", cfg)
	base := a.URL()

	// Fast restart while the first applies run.
	waitUntil(t, 60*time.Second, "the first applies to start", func() (bool, string) {
		c := countCalls(t, world, "apply")
		return c > 0, fmt.Sprintf("%d applies", c)
	})
	start := time.Now()
	pg.Restart(t, "fast")
	t.Logf("fast restart took %v", time.Since(start).Round(time.Millisecond))

	// The last commit: every site grows, two go, one comes. It is made
	// while the database is down, so the sync that sees it must wait too.
	last := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		last["sites/"+name+".yaml"] = site(name, 3)
	}
	last["sites/s00.yaml"], last["sites/s01.yaml"] = "", ""
	last["sites/new.yaml"] = site("new", 2)
	waitUntil(t, 90*time.Second, "more applies after the fast restart", func() (bool, string) {
		c := countCalls(t, world, "apply")
		return c > n/2, fmt.Sprintf("%d applies", c)
	})
	start = time.Now()
	pg.Stop(t, "immediate")
	head := remote.Commit(t, last, "grow every site, drop two, add one")
	pg.Start(t)
	t.Logf("immediate restart took %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()

	want := map[string]int{"new": 2}
	for i := 2; i < n; i++ {
		want[fmt.Sprintf("s%02d", i)] = 3
	}
	waitUntil(t, 3*time.Minute, "the store and the world to match the last commit", func() (bool, string) {
		if a.Exited() {
			t.Fatalf("the agent exited after a database restart")
		}
		var src apiSource
		if apiGet(t, base+"/api/v1/sources/sites", &src) != 200 {
			return false, "source not readable"
		}
		if !strings.HasSuffix(src.LastAppliedRevision, head) {
			return false, fmt.Sprintf("source %s at %s (%s)", src.Phase, src.LastAppliedRevision, src.Message)
		}
		rs := listResources(t, base)
		if len(rs) != len(want) {
			return false, fmt.Sprintf("%d resources, want %d", len(rs), len(want))
		}
		for name, r := range rs {
			if _, ok := want[name]; !ok || r.Status != "ready" || r.ObservedGeneration != r.Generation {
				return false, fmt.Sprintf("%s: %s generation %d observed %d (%s)", name, r.Status, r.Generation, r.ObservedGeneration, r.StatusMessage)
			}
		}
		w := readWorld(t, world)
		if len(w) != len(want) {
			return false, fmt.Sprintf("world holds %d sites, want %d", len(w), len(want))
		}
		for name, replicas := range want {
			if spec := fmt.Sprintf(`{"replicas":%d}`, replicas); w[name] != spec {
				return false, fmt.Sprintf("world: %s has %q, want %q", name, w[name], spec)
			}
		}
		return true, ""
	})
	t.Logf("the last commit was applied and reconciled %v after the immediate restart", time.Since(start).Round(time.Millisecond))
	if got := countCalls(t, world, "OVERLAP"); got > 0 {
		t.Errorf("%d calls started while another run of the same site was still going", got)
	}
	if got := countCalls(t, world, "destroy"); got != 2 {
		t.Errorf("%d destroys, want 2 (the two sites the last commit removed)", got)
	}
}
