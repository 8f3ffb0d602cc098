package faults_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// takeoverTokenEnv holds the fake GitHub's token for the agents: they
// inherit the test's environment.
const takeoverTokenEnv = "NO8S_TAKEOVER_GITHUB_TOKEN"

// databaseType is provisioned by a GitHub Actions workflow.
const databaseType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Database}
spec:
  action: provision
  versions:
    - name: v1
      schema:
        type: object
        required: [size]
        properties:
          size: {type: integer}
`

func database(name string, size int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Database\nmetadata: {name: %s}\nspec: {size: %d}\n", name, size)
}

// takeoverResource is what the scenario reads of a resource in the API.
type takeoverResource struct {
	Name               string          `json:"name"`
	Status             string          `json:"status"`
	StatusMessage      string          `json:"status_message"`
	Generation         int64           `json:"generation"`
	ObservedGeneration int64           `json:"observed_generation"`
	Outputs            json.RawMessage `json:"outputs"`
}

// runWatch checks, at every dispatch the fake GitHub takes, that no
// earlier run is still going: two runs of one resource at once.
type runWatch struct {
	srv *githubtest.Server

	mu       gosync.Mutex
	overlaps []string
}

func (w *runWatch) script(d githubtest.Dispatch) githubtest.Script {
	for _, earlier := range w.srv.Dispatches() {
		if run, ok := w.srv.Run(earlier.RunID); ok && run.Status != "completed" {
			w.mu.Lock()
			w.overlaps = append(w.overlaps, fmt.Sprintf("generation %s dispatched while run %d of generation %s was %s",
				d.Inputs["generation"], run.ID, run.Inputs["generation"], run.Status))
			w.mu.Unlock()
		}
	}
	// Slow runs: each goes on until the test finishes it, or it is cancelled.
	out := fmt.Sprintf(`{"endpoint": "%s-g%s.db.example.com"}`, d.Inputs["name"], d.Inputs["generation"])
	return githubtest.Script{Never: true, Jobs: []githubtest.Job{{Name: "provision", Steps: []string{"terraform apply"}}},
		Artifacts: []githubtest.Artifact{{Name: githubtestOutputs, Files: map[string][]byte{"outputs.json": []byte(out)}}}}
}

const githubtestOutputs = "no8s-outputs"

// TestTakeoverFollowsTheRun kills an agent (SIGKILL) while the workflow run
// it dispatched is in progress. The next agent to claim the resource must
// follow that run rather than dispatch a second one, and finish with its
// outputs; and when the generation changed meanwhile, it must cancel the
// old run and wait for it to end before dispatching the new one. Exactly
// one run per generation, never two at once.
//
// Not parallel: the agents read the token from the environment, which
// t.Setenv sets for this test alone.
func TestTakeoverFollowsTheRun(t *testing.T) {
	const token = "ghp_takeoverT0ken"
	t.Setenv(takeoverTokenEnv, token)
	watch := &runWatch{}
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: watch.script, CancelPolls: 3})
	watch.srv = srv

	dbURL := pgtest.URL(t)
	work := t.TempDir()
	remote := newGitRemote(t)
	remote.Commit(t, map[string]string{"types.yaml": databaseType, "dbs/orders.yaml": database("orders", 10)}, "orders database")
	o := srv.Options()
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: dbs
    git: {url: %q, branch: main, interval: 1s}
actions:
  provision:
    plugin: github_actions
    config:
      owner: %s
      repo: %s
      workflow: %s
      apiURL: %q
      tokenEnv: %s
      pollInterval: 100ms
      timeout: 5m
reconcile: {workers: 2, leaseDuration: 3s, backoff: {initial: 1s, max: 2s}}
`, dbURL, remote.FileURL(), o.Owner, o.Repo, o.Workflow, srv.BaseURL(), takeoverTokenEnv))

	dispatchesOf := func(gen int) []githubtest.Dispatch {
		var out []githubtest.Dispatch
		for _, d := range srv.Dispatches() {
			if d.Inputs["generation"] == strconv.Itoa(gen) {
				out = append(out, d)
			}
		}
		return out
	}
	// dispatchesSoFar are the dispatches when the last agent was killed.
	var dispatchesSoFar []githubtest.Dispatch
	// followed waits until the run was read at least twice more than
	// before: an agent is following it.
	followed := func(who string, id int64, before int) {
		t.Helper()
		waitUntil(t, 60*time.Second, who+" to follow run "+strconv.FormatInt(id, 10), func() (bool, string) {
			if n := len(srv.Dispatches()); n > len(dispatchesSoFar) {
				t.Fatalf("%s dispatched a second run instead of following run %d: %+v", who, id, srv.Dispatches())
			}
			run, _ := srv.Run(id)
			return run.Polls >= before+2, fmt.Sprintf("run %s, read %d times", run.Status, run.Polls)
		})
	}
	resource := func(base string) (takeoverResource, bool) {
		var list []takeoverResource
		if apiGet(t, base+"/api/v1/resources", &list) != 200 || len(list) != 1 {
			return takeoverResource{}, false
		}
		return list[0], true
	}
	readyAt := func(base string, gen int64) takeoverResource {
		t.Helper()
		var r takeoverResource
		waitUntil(t, 60*time.Second, fmt.Sprintf("generation %d ready", gen), func() (bool, string) {
			var ok bool
			r, ok = resource(base)
			return ok && r.Status == "ready" && r.ObservedGeneration == gen,
				fmt.Sprintf("%s generation %d observed %d (%s)", r.Status, r.Generation, r.ObservedGeneration, r.StatusMessage)
		})
		return r
	}

	// Agent a dispatches generation 1's run and is killed while it runs.
	a := startAgent(t, work, "run", "--config", cfg)
	a.URL()
	waitUntil(t, 60*time.Second, "agent a to follow its run", func() (bool, string) {
		ds := srv.Dispatches()
		if len(ds) == 0 {
			return false, "no dispatch"
		}
		// Read once means the handle was recorded: that comes first.
		run, _ := srv.Run(ds[0].RunID)
		return run.Polls >= 1, fmt.Sprintf("run %s", run.Status)
	})
	dispatchesSoFar = srv.Dispatches()
	first := dispatchesSoFar[0].RunID
	a.Kill9()
	killed, _ := srv.Run(first)
	if killed.Status == "completed" {
		t.Fatalf("run %d completed before the kill: %+v", first, killed)
	}

	// Agent b takes over once a's lease expired, and follows the run.
	b := startAgent(t, work, "run", "--config", cfg)
	baseB := b.URL()
	followed("agent b", first, killed.Polls)
	if !srv.Finish(first, "success") {
		t.Fatalf("run %d could not be finished", first)
	}
	r := readyAt(baseB, 1)
	var out map[string]any
	if err := json.Unmarshal(r.Outputs, &out); err != nil {
		t.Fatalf("outputs %s: %v", r.Outputs, err)
	}
	if out["run_id"] != float64(first) || out["endpoint"] != "orders-g1.db.example.com" {
		t.Errorf("outputs %s, want those of run %d", r.Outputs, first)
	}

	// Generation 2's run is going when b is killed; generation 3 arrives
	// before the next agent claims the resource.
	remote.Commit(t, map[string]string{"dbs/orders.yaml": database("orders", 20)}, "grow orders")
	waitUntil(t, 60*time.Second, "agent b to follow generation 2's run", func() (bool, string) {
		ds := dispatchesOf(2)
		if len(ds) == 0 {
			return false, "no dispatch of generation 2"
		}
		run, _ := srv.Run(ds[0].RunID)
		return run.Polls >= 1, fmt.Sprintf("run %s", run.Status)
	})
	second := dispatchesOf(2)[0].RunID
	b.Kill9()
	atKill, _ := srv.Run(second)
	remote.Commit(t, map[string]string{"dbs/orders.yaml": database("orders", 30)}, "grow orders more")
	dispatchesSoFar = srv.Dispatches()

	// Agent c may claim generation 2 before it syncs generation 3: then it
	// follows run 2, which the test lets end, and applies generation 3
	// after. Or it cancels run 2 and waits for its end first. Either way,
	// one run per generation, never two at once.
	c := startAgent(t, work, "run", "--config", cfg)
	baseC := c.URL()
	var third int64
	waitUntil(t, 60*time.Second, "agent c to dispatch generation 3", func() (bool, string) {
		if ds := dispatchesOf(3); len(ds) > 0 {
			third = ds[0].RunID
			return true, ""
		}
		run, _ := srv.Run(second)
		cancelled := slices.Contains(srv.Cancelled(), second)
		if run.Status != "completed" && run.Polls >= atKill.Polls+2 && !cancelled {
			// Agent c follows run 2: let it end.
			srv.Finish(second, "success")
		}
		return false, fmt.Sprintf("run %d %s, read %d times, cancel requested %v", second, run.Status, run.Polls, cancelled)
	})
	if slices.Contains(srv.Cancelled(), second) {
		t.Logf("agent c cancelled generation 2's run %d and waited for its end before dispatching run %d", second, third)
	} else {
		t.Logf("agent c followed generation 2's run %d to its end before dispatching run %d", second, third)
	}
	if !srv.Finish(third, "success") {
		t.Fatalf("run %d could not be finished", third)
	}
	r = readyAt(baseC, 3)
	if err := json.Unmarshal(r.Outputs, &out); err != nil {
		t.Fatalf("outputs %s: %v", r.Outputs, err)
	}
	if out["run_id"] != float64(third) || out["endpoint"] != "orders-g3.db.example.com" {
		t.Errorf("outputs %s, want those of run %d", r.Outputs, third)
	}

	for gen := 1; gen <= 3; gen++ {
		if ds := dispatchesOf(gen); len(ds) != 1 {
			t.Errorf("generation %d: %d runs dispatched, want exactly one", gen, len(ds))
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	for _, o := range watch.overlaps {
		t.Errorf("two runs at once: %s", o)
	}
}
