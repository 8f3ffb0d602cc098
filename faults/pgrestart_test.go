package faults_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

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
	world := newWorld(t, work)

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
