package faults_test

import (
	"encoding/json"
	"fmt"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// gitlabTakeoverTokenEnv holds the fake GitLab's token for the agents:
// they inherit the test's environment.
const gitlabTakeoverTokenEnv = "NO8S_TAKEOVER_GITLAB_TOKEN"

// gitlabProject is the project whose pipelines provision the databases.
const gitlabProject = "acme/infra/pipelines"

// pipelineWatch checks, at every pipeline the fake GitLab creates, that no
// earlier pipeline is still going: two pipelines of one resource at once.
type pipelineWatch struct {
	srv *gitlabtest.Server

	mu       gosync.Mutex
	overlaps []string
}

// finished says whether a pipeline's status is final.
func finished(status string) bool {
	return slices.Contains([]string{"success", "failed", "canceled", "skipped"}, status)
}

func creationInput(c gitlabtest.Creation, name string) string {
	v, _ := c.Inputs[name].(string)
	return v
}

func (w *pipelineWatch) script(c gitlabtest.Creation) gitlabtest.Script {
	for _, earlier := range w.srv.Pipelines() {
		if st, ok := w.srv.Pipeline(earlier.PipelineID); ok && !finished(st.Status) {
			w.mu.Lock()
			w.overlaps = append(w.overlaps, fmt.Sprintf("generation %s created while pipeline %d of generation %s was %s",
				creationInput(c, "generation"), st.PipelineID, creationInput(st.Creation, "generation"), st.Status))
			w.mu.Unlock()
		}
	}
	// Slow pipelines: each goes on until the test finishes it, or it is
	// cancelled.
	out := fmt.Sprintf(`{"endpoint": "%s-g%s.db.example.com"}`, creationInput(c, "name"), creationInput(c, "generation"))
	return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "provision", Stage: "deploy", Log: "tofu apply\n",
		Artifacts: map[string][]byte{"no8s-outputs.json": []byte(out)}}}}
}

// TestGitLabTakeoverFollowsThePipeline kills an agent (SIGKILL) while the
// pipeline it created runs. The next agent to claim the resource must
// follow that pipeline rather than create a second one, and finish with its
// outputs; and when the generation changed meanwhile, it must cancel the
// old pipeline and wait until GitLab reports it finished (canceling takes a
// few reads) before creating the new one. Exactly one pipeline per
// generation, never two at once.
//
// Not parallel: the agents read the token from the environment, which
// t.Setenv sets for this test alone.
func TestGitLabTakeoverFollowsThePipeline(t *testing.T) {
	const token = "glpat-takeoverT0ken"
	t.Setenv(gitlabTakeoverTokenEnv, token)
	watch := &pipelineWatch{}
	srv := gitlabtest.New(t, gitlabtest.Options{Token: token, Script: watch.script, CancelPolls: 3})
	watch.srv = srv
	srv.AddProject(gitlabProject, gitlabtest.ProjectOptions{WorkflowName: "no8s $[[ inputs.correlation_id ]]"})

	dbURL := pgtest.URL(t)
	work := t.TempDir()
	remote := newGitRemote(t)
	remote.Commit(t, map[string]string{"types.yaml": databaseType, "dbs/orders.yaml": database("orders", 10)}, "orders database")
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: dbs
    git: {url: %q, branch: main, interval: 1s}
actions:
  provision:
    plugin: gitlab_pipelines
    config:
      baseURL: %q
      project: %s
      tokenEnv: %s
      pollInterval: 100ms
      timeout: 5m
reconcile: {workers: 2, leaseDuration: 3s, backoff: {initial: 1s, max: 2s}}
`, dbURL, remote.FileURL(), srv.URL, gitlabProject, gitlabTakeoverTokenEnv))

	pipelinesOf := func(gen int) []gitlabtest.Creation {
		var out []gitlabtest.Creation
		for _, c := range srv.Pipelines() {
			if creationInput(c, "generation") == fmt.Sprint(gen) {
				out = append(out, c)
			}
		}
		return out
	}
	state := func(id int64) gitlabtest.PipelineState {
		st, _ := srv.Pipeline(id)
		return st
	}
	// createdSoFar are the pipelines when the last agent was killed.
	var createdSoFar []gitlabtest.Creation
	// followed waits until the pipeline was read at least twice more than
	// before: an agent is following it.
	followed := func(who string, id int64, before int) {
		t.Helper()
		waitUntil(t, 60*time.Second, fmt.Sprintf("%s to follow pipeline %d", who, id), func() (bool, string) {
			if n := len(srv.Pipelines()); n > len(createdSoFar) {
				t.Fatalf("%s created a second pipeline instead of following pipeline %d: %+v", who, id, srv.Pipelines())
			}
			st := state(id)
			return st.Polls >= before+2, fmt.Sprintf("pipeline %s, read %d times", st.Status, st.Polls)
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
	outputsOf := func(r takeoverResource) map[string]any {
		t.Helper()
		var out map[string]any
		if err := json.Unmarshal(r.Outputs, &out); err != nil {
			t.Fatalf("outputs %s: %v", r.Outputs, err)
		}
		return out
	}

	// Agent a creates generation 1's pipeline and is killed while it runs.
	a := startAgent(t, work, "run", "--config", cfg)
	a.URL()
	waitUntil(t, 60*time.Second, "agent a to follow its pipeline", func() (bool, string) {
		ps := srv.Pipelines()
		if len(ps) == 0 {
			return false, "no pipeline"
		}
		// Read once means the handle was recorded: that comes first.
		st := state(ps[0].PipelineID)
		return st.Polls >= 1, fmt.Sprintf("pipeline %s", st.Status)
	})
	createdSoFar = srv.Pipelines()
	first := createdSoFar[0].PipelineID
	a.Kill9()
	killed := state(first)
	if finished(killed.Status) {
		t.Fatalf("pipeline %d finished before the kill: %+v", first, killed)
	}

	// Agent b takes over once a's lease expired, and follows the pipeline.
	b := startAgent(t, work, "run", "--config", cfg)
	baseB := b.URL()
	followed("agent b", first, killed.Polls)
	if !srv.Finish(first, "success") {
		t.Fatalf("pipeline %d could not be finished", first)
	}
	r := readyAt(baseB, 1)
	if out := outputsOf(r); out["pipeline_id"] != float64(first) || out["endpoint"] != "orders-g1.db.example.com" {
		t.Errorf("outputs %s, want those of pipeline %d", r.Outputs, first)
	}

	// Generation 2's pipeline is going when b is killed; generation 3
	// arrives before the next agent claims the resource.
	remote.Commit(t, map[string]string{"dbs/orders.yaml": database("orders", 20)}, "grow orders")
	waitUntil(t, 60*time.Second, "agent b to follow generation 2's pipeline", func() (bool, string) {
		ps := pipelinesOf(2)
		if len(ps) == 0 {
			return false, "no pipeline of generation 2"
		}
		st := state(ps[0].PipelineID)
		return st.Polls >= 1, fmt.Sprintf("pipeline %s", st.Status)
	})
	second := pipelinesOf(2)[0].PipelineID
	b.Kill9()
	atKill := state(second)
	remote.Commit(t, map[string]string{"dbs/orders.yaml": database("orders", 30)}, "grow orders more")
	createdSoFar = srv.Pipelines()

	// Agent c may claim generation 2 before it syncs generation 3: then it
	// follows pipeline 2, which the test lets end, and applies generation 3
	// after. Or it cancels pipeline 2 and waits until it is canceled.
	// Either way, one pipeline per generation, never two at once.
	c := startAgent(t, work, "run", "--config", cfg)
	baseC := c.URL()
	var third int64
	waitUntil(t, 60*time.Second, "agent c to create generation 3's pipeline", func() (bool, string) {
		if ps := pipelinesOf(3); len(ps) > 0 {
			third = ps[0].PipelineID
			return true, ""
		}
		st := state(second)
		if !finished(st.Status) && !st.Cancelled && st.Polls >= atKill.Polls+2 {
			// Agent c follows pipeline 2: let it end.
			srv.Finish(second, "success")
		}
		return false, fmt.Sprintf("pipeline %d %s, read %d times, cancelled %v", second, st.Status, st.Polls, st.Cancelled)
	})
	if st := state(second); st.Cancelled {
		t.Logf("agent c cancelled generation 2's pipeline %d and waited until it was %s before creating pipeline %d", second, st.Status, third)
	} else {
		t.Logf("agent c followed generation 2's pipeline %d to its end before creating pipeline %d", second, third)
	}
	if !srv.Finish(third, "success") {
		t.Fatalf("pipeline %d could not be finished", third)
	}
	r = readyAt(baseC, 3)
	if out := outputsOf(r); out["pipeline_id"] != float64(third) || out["endpoint"] != "orders-g3.db.example.com" {
		t.Errorf("outputs %s, want those of pipeline %d", r.Outputs, third)
	}

	for gen := 1; gen <= 3; gen++ {
		if ps := pipelinesOf(gen); len(ps) != 1 {
			t.Errorf("generation %d: %d pipelines created, want exactly one", gen, len(ps))
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	for _, o := range watch.overlaps {
		t.Errorf("two pipelines at once: %s", o)
	}
}
