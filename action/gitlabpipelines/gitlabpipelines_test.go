package gitlabpipelines_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/gitlabpipelines"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/manifest"
)

const (
	token        = "glpat-pluginTestT0ken"
	triggerToken = "glptt-pluginTestTr1gger"
	projectPath  = "acme/infra/pipelines"
	// workflowName is the example's workflow:name.
	workflowName = "no8s $[[ inputs.correlation_id ]]"
)

// newServer starts a fake GitLab with the project, named pipelines (as the
// example configuration names them) and the trigger token.
func newServer(t *testing.T, opts gitlabtest.Options, popts gitlabtest.ProjectOptions) *gitlabtest.Server {
	t.Helper()
	opts.Token = token
	srv := gitlabtest.New(t, opts)
	if popts.WorkflowName == "" {
		popts.WorkflowName = workflowName
	}
	popts.TriggerTokens = append(popts.TriggerTokens, triggerToken)
	srv.AddProject(projectPath, popts)
	return srv
}

// newAction builds an instance against srv with fast polling; extra adds
// or overrides settings.
func newAction(t *testing.T, srv *gitlabtest.Server, extra string) action.Action {
	t.Helper()
	a, err := build(srv, extra, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func build(srv *gitlabtest.Server, extra string, log *slog.Logger) (action.Action, error) {
	cfg := fmt.Sprintf(`{"baseURL": %q, "project": %q, "tokenEnv": "GL_TOKEN", "pollInterval": "5ms", "timeout": "20s",
		"findTimeout": "1s"%s}`, srv.URL, projectPath, extra)
	env := map[string]string{"GL_TOKEN": token, "GL_TRIGGER_TOKEN": triggerToken}
	return gitlabpipelines.New(action.Settings{Instance: "deploy", Config: json.RawMessage(cfg), Logger: log,
		Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
}

// reporter records what an operation reports.
type reporter struct {
	mu       gosync.Mutex
	progress []string
	conds    []manifest.Condition
}

func (r *reporter) SetCondition(c manifest.Condition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conds = append(r.conds, c)
}

func (r *reporter) Progress(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = append(r.progress, m)
}

func (r *reporter) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, p := range r.progress {
		b.WriteString(p + "\n")
	}
	for _, c := range r.conds {
		fmt.Fprintf(&b, "%s %s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func request(name string, gen int64, rep action.Reporter) *action.Request {
	return &action.Request{Instance: "deploy", Trigger: "create", Reporter: rep, Resource: action.Resource{
		ID: 7, Kind: "DatabaseCluster", APIVersion: "infra.example.com/v1", Name: name, Generation: gen,
		Spec: json.RawMessage(`{"engine":"postgres","storage_gb":500}`), Source: "infra"}}
}

// input reads an input (or variable) a pipeline was created with.
func input(c gitlabtest.Creation, name string) string {
	if v, ok := c.Inputs[name].(string); ok {
		return v
	}
	for _, v := range c.Variables {
		if v.Key == name {
			return v.Value
		}
	}
	return ""
}

// outputsScript succeeds after a few reads: a plan stage, then a deploy
// stage whose job uploads no8s-outputs.json naming the resource.
func outputsScript(c gitlabtest.Creation) gitlabtest.Script {
	name := input(c, "name")
	out := fmt.Sprintf(`{"endpoint": "%s.db.example.com", "resource": %q, "pipeline_id": -1}`, name, name)
	return gitlabtest.Script{Status: "success", Polls: 3, Jobs: []gitlabtest.Job{
		{Name: "plan", Stage: "plan", Log: "planned\n", Artifacts: map[string][]byte{"plan.txt": []byte("1 to add")}},
		{Name: "apply", Stage: "deploy", Log: "applied\n", Artifacts: map[string][]byte{"no8s-outputs.json": []byte(out)}}}}
}

func decodeOutputs(t *testing.T, res *action.Result) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(res.Outputs, &out); err != nil {
		t.Fatalf("outputs %s: %v", res.Outputs, err)
	}
	return out
}

// apiPipelines are the pipelines created by API or trigger (not children).
func apiPipelines(srv *gitlabtest.Server) []gitlabtest.Creation {
	var out []gitlabtest.Creation
	for _, c := range srv.Pipelines() {
		if c.ParentID == 0 {
			out = append(out, c)
		}
	}
	return out
}

func TestApplySucceeds(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
	rep := &reporter{}
	res, err := newAction(t, srv, "").Apply(t.Context(), request("production-pg", 3, rep))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ps := srv.Pipelines()
	if len(ps) != 1 {
		t.Fatalf("%d pipelines", len(ps))
	}
	c := ps[0]
	if len(c.Variables) != 0 || c.Source != "api" || c.Ref != "main" || input(c, "operation") != "apply" || input(c, "kind") != "DatabaseCluster" ||
		input(c, "name") != "production-pg" || input(c, "generation") != "3" || input(c, "spec") != `{"engine":"postgres","storage_gb":500}` ||
		!strings.HasPrefix(input(c, "correlation_id"), "databasecluster-production-pg-g3-apply-") {
		t.Errorf("created %+v", c)
	}
	for _, optional := range []string{"plugin_config", "namespace"} {
		if v, sent := c.Inputs[optional]; sent {
			t.Errorf("%s %q sent for a resource without one: a configuration that does not declare it would refuse the pipeline", optional, v)
		}
	}
	out := decodeOutputs(t, res)
	if out["endpoint"] != "production-pg.db.example.com" || out["status"] != "success" || out["pipeline_id"] != float64(c.PipelineID) ||
		out["pipeline_url"] != fmt.Sprintf("%s/%s/-/pipelines/%d", srv.URL, projectPath, c.PipelineID) {
		t.Errorf("outputs = %s", res.Outputs)
	}
	jobs, _ := out["jobs"].([]any)
	if len(jobs) != 2 {
		t.Fatalf("jobs %v", jobs)
	}
	plan, apply := jobs[0].(map[string]any), jobs[1].(map[string]any)
	if plan["name"] != "plan" || plan["stage"] != "plan" || apply["name"] != "apply" || apply["stage"] != "deploy" ||
		apply["status"] != "success" || !strings.Contains(apply["web_url"].(string), "/-/jobs/") {
		t.Errorf("jobs %v", jobs)
	}
	if st, _ := srv.Pipeline(c.PipelineID); st.Status != "success" {
		t.Errorf("pipeline %+v", st)
	}
	if all := rep.all(); !strings.Contains(all, "running: stage plan, job plan running ("+srv.URL) ||
		!strings.Contains(all, "Pipeline Unknown InProgress pipeline "+srv.URL) {
		t.Errorf("progress reported:\n%s", all)
	}
	if len(res.Conditions) != 1 || res.Conditions[0].Type != "Pipeline" || res.Conditions[0].Status != manifest.ConditionTrue {
		t.Errorf("conditions = %+v", res.Conditions)
	}
	if n := srv.Count(gitlabtest.Match{Method: "GET", PathSuffix: "/pipelines"}, 0); n != 0 {
		t.Errorf("the pipelines were listed %d times, though GitLab returned the pipeline it created", n)
	}
}

// TestConcurrentApplies runs 20 applies in one project at once; each must
// follow its own pipeline and get its own outputs.
func TestConcurrentApplies(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"access token", "trigger token"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
			extra := ""
			if mode == "trigger token" {
				extra = `, "triggerTokenEnv": "GL_TRIGGER_TOKEN"`
			}
			a := newAction(t, srv, extra)
			const n = 20
			type answer struct {
				name string
				out  map[string]any
				err  error
			}
			answers := make(chan answer, n)
			for i := range n {
				go func() {
					name := fmt.Sprintf("db-%02d", i)
					res, err := a.Apply(t.Context(), request(name, 1, &reporter{}))
					ans := answer{name: name, err: err}
					if err == nil {
						ans.out = decodeOutputs(t, res)
					}
					answers <- ans
				}()
			}
			seen := map[float64]bool{}
			for range n {
				ans := <-answers
				if ans.err != nil {
					t.Errorf("%s: %v", ans.name, ans.err)
					continue
				}
				if ans.out["resource"] != ans.name {
					t.Errorf("%s followed the pipeline of %v", ans.name, ans.out["resource"])
				}
				seen[ans.out["pipeline_id"].(float64)] = true
			}
			if ps := srv.Pipelines(); len(seen) != n || len(ps) != n {
				t.Errorf("%d distinct pipelines followed, %d created; want %d", len(seen), len(ps), n)
			}
		})
	}
}

// TestFailedJob checks that a failed pipeline's error names the failed job,
// its stage and the end of its log, cleaned of terminal codes and with the
// token masked, in a child pipeline too.
func TestFailedJob(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	log.WriteString("section_start:1700000000:prepare_script\r\x1b[0K\x1b[36;1mPreparing\x1b[0;m\nsection_end:1700000000:prepare_script\r\x1b[0K\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&log, "\x1b[32mstep %02d\x1b[0m\n", i)
	}
	log.WriteString("progress 10%\rprogress 100%\n")
	log.WriteString("curl -H 'PRIVATE-TOKEN: " + token + "' failed\n")
	log.WriteString("\x1b[31;1mERROR: Job failed: exit code 1\x1b[0;m\n")
	failing := gitlabtest.Script{Status: "failed", Polls: 1, Jobs: []gitlabtest.Job{
		{Name: "plan", Stage: "plan", Status: "success", Log: "ok\n"},
		{Name: "lint", Stage: "plan", Status: "failed", AllowFailure: true, Log: "lint warnings\n"},
		{Name: "terraform", Stage: "deploy", Status: "failed", FailureReason: "script_failure", Log: log.String()}}}
	tests := []struct {
		name      string
		script    gitlabtest.Script
		wantChild bool
	}{
		{"in the pipeline", failing, false},
		{"in a child pipeline", gitlabtest.Script{Status: "failed", Polls: 1, Jobs: []gitlabtest.Job{{Name: "build", Stage: "build", Status: "success"}},
			Bridges: []gitlabtest.Bridge{{Name: "deploy-child", Stage: "deploy", Child: &failing}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script { return tt.script }}, gitlabtest.ProjectOptions{})
			_, err := newAction(t, srv, "").Apply(t.Context(), request("staging-pg", 1, &reporter{}))
			if err == nil {
				t.Fatal("Apply succeeded")
			}
			msg := err.Error()
			id := apiPipelines(srv)[0].PipelineID
			for _, want := range []string{
				fmt.Sprintf("/-/pipelines/%d failed", id),
				`job "terraform" in stage "deploy" failed (script_failure)`,
				"/-/jobs/",
				"\n    step 14\n", "\n    step 30\n", "\n    progress 100%\n",
				"PRIVATE-TOKEN: ***' failed",
				"    ERROR: Job failed: exit code 1",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q:\n%s", want, msg)
				}
			}
			for _, unwanted := range []string{"step 13", "\x1b", "section_", "progress 10%", token, "lint"} {
				if strings.Contains(msg, unwanted) {
					t.Errorf("error shows %q:\n%s", unwanted, msg)
				}
			}
			if got := strings.Contains(msg, " in child pipeline "+srv.URL); got != tt.wantChild {
				t.Errorf("names a child pipeline: %v, want %v:\n%s", got, tt.wantChild, msg)
			}
		})
	}
}

// TestCreationWaitsOutRateLimitsAndServerErrors: a 429 and two 502s on the
// creation are waited out with exactly one pipeline created. A 502 is not
// retried blindly: GitLab may have created the pipeline behind it (a
// gateway that timed out), so the pipeline is looked for by its name
// first, and created again only when none shows. Reads are retried.
func TestCreationWaitsOutRateLimitsAndServerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// through: the 502 lets the creation through, so that the first
		// one is the last.
		through bool
		extra   string
	}{
		{name: "two 502s before GitLab"},
		{name: "a 502 after GitLab created the pipeline", through: true},
		{name: "trigger, a 502 after GitLab created the pipeline", through: true, extra: `, "triggerTokenEnv": "GL_TRIGGER_TOKEN"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
			create := gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}
			bad, wantBad := gitlabtest.BadGateway(), 2
			if tt.through {
				bad, wantBad = gitlabtest.Through(bad), 1
			}
			srv.FailNext(create, 1, gitlabtest.TooManyRequests(time.Second))
			srv.FailNext(create, wantBad, bad)
			srv.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/jobs"}, 2, gitlabtest.BadGateway())
			srv.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/no8s-outputs.json"}, 1, gitlabtest.TooManyRequests(time.Second))
			start := time.Now()
			res, err := newAction(t, srv, tt.extra).Apply(t.Context(), request("production-pg", 1, &reporter{}))
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			ps := srv.Pipelines()
			if len(ps) != 1 {
				t.Fatalf("%d pipelines created, want 1: %+v", len(ps), ps)
			}
			if out := decodeOutputs(t, res); out["pipeline_id"] != float64(ps[0].PipelineID) || out["endpoint"] != "production-pg.db.example.com" {
				t.Errorf("outputs %s, want those of pipeline %d", res.Outputs, ps[0].PipelineID)
			}
			if got := srv.Count(create, http.StatusTooManyRequests); got != 1 {
				t.Errorf("%d creations answered 429, want 1", got)
			}
			if got := srv.Count(create, http.StatusBadGateway); got != wantBad {
				t.Errorf("%d creations answered 502, want %d", got, wantBad)
			}
			if got := srv.Count(gitlabtest.Match{}, http.StatusBadGateway); got != wantBad+2 {
				t.Errorf("%d answers 502, want %d (the creations' and two job lists')", got, wantBad+2)
			}
			creations := srv.Count(create, http.StatusCreated)
			if tt.through && creations != 0 || !tt.through && creations != 1 {
				t.Errorf("%d creations answered 201", creations)
			}
			if listed := srv.Count(gitlabtest.Match{Method: "GET", PathSuffix: "/pipelines"}, http.StatusOK); listed == 0 {
				t.Error("the pipeline was never looked for after a 502")
			}
			if took := time.Since(start); took < 2*time.Second {
				t.Errorf("took %s: the rate limits were not waited out", took)
			}
		})
	}
}

// TestDestroyFromScratch checks that a fresh instance, knowing nothing of
// earlier pipelines, destroys with operation destroy, under renamed inputs.
func TestDestroyFromScratch(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	req := request("old-pg", 4, &reporter{})
	req.Resource.PluginConfig = json.RawMessage(`{"tier":"gold"}`)
	if _, err := newAction(t, srv, `, "names": {"operation": "op"}`).Destroy(t.Context(), req); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	c := srv.Pipelines()[0]
	if input(c, "op") != "destroy" || input(c, "name") != "old-pg" || input(c, "generation") != "4" || c.Inputs["operation"] != nil ||
		input(c, "plugin_config") != `{"tier":"gold"}` || !strings.Contains(input(c, "correlation_id"), "-g4-destroy-") {
		t.Errorf("inputs = %v", c.Inputs)
	}
}

// TestStoppedPipelineIsCancelled checks that a pipeline still going when
// the operation times out or is cancelled is cancelled through the API.
func TestStoppedPipelineIsCancelled(t *testing.T) {
	t.Parallel()
	never := func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "apply", Stage: "deploy", Log: "sleeping\n"}}}
	}
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, gitlabtest.Options{Script: never, CancelPolls: 2}, gitlabtest.ProjectOptions{})
		_, err := newAction(t, srv, `, "timeout": "300ms"`).Apply(t.Context(), request("slow", 1, &reporter{}))
		if err == nil || !strings.Contains(err.Error(), "did not finish within the timeout") || !strings.Contains(err.Error(), "cancelled") {
			t.Fatalf("error = %v", err)
		}
		// The pipeline goes on until its jobs stopped: the next attempt
		// must be told of it.
		if !errors.Is(err, action.ErrStillRunning) {
			t.Errorf("error %v is not ErrStillRunning", err)
		}
		id := srv.Pipelines()[0].PipelineID
		if got := srv.Cancels(); len(got) != 1 || got[0] != id {
			t.Errorf("cancelled %v, want pipeline %d", got, id)
		}
		if st, _ := srv.Pipeline(id); st.Status != "canceling" || !st.Cancelled {
			t.Errorf("pipeline %+v", st)
		}
	})
	t.Run("operation cancelled", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, gitlabtest.Options{Script: never}, gitlabtest.ProjectOptions{})
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := newAction(t, srv, "").Apply(ctx, request("slow", 1, &reporter{}))
			done <- err
		}()
		// Cancel once the pipeline is being followed.
		waitCtx, stop := context.WithTimeout(t.Context(), 10*time.Second)
		defer stop()
		if err := srv.WaitFor(waitCtx, func() bool {
			ps := srv.Pipelines()
			if len(ps) == 0 {
				return false
			}
			st, _ := srv.Pipeline(ps[0].PipelineID)
			return st.Polls >= 2
		}); err != nil {
			t.Fatalf("the pipeline was never followed: %v", err)
		}
		cancel(errors.New("lease lost"))
		err := <-done
		if err == nil || !strings.Contains(err.Error(), "lease lost") || !errors.Is(err, action.ErrStillRunning) {
			t.Fatalf("error = %v", err)
		}
		if st, _ := srv.Pipeline(srv.Pipelines()[0].PipelineID); st.Status != "canceled" || len(srv.Cancels()) != 1 {
			t.Errorf("pipeline %+v, cancels %v", st, srv.Cancels())
		}
	})
}

// TestChildPipelineFollowed follows a pipeline whose deploy stage triggers
// a child pipeline: the child's jobs are reported while they run, and its
// outputs file counts.
func TestChildPipelineFollowed(t *testing.T) {
	t.Parallel()
	child := &gitlabtest.Script{Status: "success", Polls: 2, Jobs: []gitlabtest.Job{
		{Name: "deploy-eu", Stage: "deploy", Log: "deployed\n", Artifacts: map[string][]byte{"no8s-outputs.json": []byte(`{"region": "eu"}`)}}}}
	srv := newServer(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Status: "success", Polls: 4, Bridges: []gitlabtest.Bridge{{Name: "regions", Stage: "trigger", Child: child}}}
	}}, gitlabtest.ProjectOptions{})
	rep := &reporter{}
	res, err := newAction(t, srv, "").Apply(t.Context(), request("multi", 1, rep))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ps := srv.Pipelines()
	if len(ps) != 2 || ps[1].ParentID != ps[0].PipelineID {
		t.Fatalf("pipelines %+v", ps)
	}
	out := decodeOutputs(t, res)
	jobs, _ := out["jobs"].([]any)
	if out["region"] != "eu" || out["pipeline_id"] != float64(ps[0].PipelineID) || len(jobs) != 2 ||
		jobs[1].(map[string]any)["name"] != "deploy-eu" || jobs[1].(map[string]any)["pipeline_id"] != float64(ps[1].PipelineID) {
		t.Errorf("outputs %s", res.Outputs)
	}
	childURL := fmt.Sprintf("%s/%s/-/pipelines/%d", srv.URL, projectPath, ps[1].PipelineID)
	if all := rep.all(); !strings.Contains(all, "stage deploy, job deploy-eu") || !strings.Contains(all, "in child pipeline "+childURL) {
		t.Errorf("progress reported:\n%s", all)
	}
}

// TestManualAndWaitingPipelinesAreInProgress: a pipeline waiting for its
// resource group, then for a person to run a manual job, is followed as
// in progress, with what it waits for, until it finishes.
func TestManualAndWaitingPipelinesAreInProgress(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{Script: func(c gitlabtest.Creation) gitlabtest.Script {
		s := outputsScript(c)
		s.Status, s.WaitingForResource, s.Jobs[0].Status = "manual", 2, "success"
		return s
	}}, gitlabtest.ProjectOptions{})
	rep := &reporter{}
	done := make(chan error, 1)
	go func() {
		_, err := newAction(t, srv, "").Apply(t.Context(), request("gated", 1, rep))
		done <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var id int64
	if err := srv.WaitFor(ctx, func() bool {
		ps := srv.Pipelines()
		if len(ps) == 0 {
			return false
		}
		id = ps[0].PipelineID
		st, _ := srv.Pipeline(id)
		return st.Status == "manual" && st.Polls >= 10
	}); err != nil {
		t.Fatalf("the manual pipeline was not followed: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Apply ended while the pipeline waited for a manual job: %v", err)
	default:
	}
	srv.Finish(id, "success")
	if err := <-done; err != nil {
		t.Fatalf("Apply: %v", err)
	}
	all := rep.all()
	for _, want := range []string{
		"Pipeline Unknown WaitingForResource pipeline " + srv.URL,
		"waiting for resource: stage plan, job plan waiting for resource (",
		": waiting for its resource group",
		"Pipeline Unknown WaitingForManualJob pipeline " + srv.URL,
		"manual: stage deploy, job apply manual (",
		": waiting for someone to run it",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("progress does not say %q:\n%s", want, all)
		}
	}
}

// TestVariables: with pass: variables the request travels as pipeline
// variables (named by workflow:name from a variable); a project that
// refuses pipeline variables fails the attempt at once, saying to use
// inputs.
func TestVariables(t *testing.T) {
	t.Parallel()
	t.Run("allowed", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{WorkflowName: "no8s $NO8S_CORRELATION_ID"})
		srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}, 1, gitlabtest.Through(gitlabtest.BadGateway()))
		extra := `, "pass": "variables", "names": {"correlation_id": "NO8S_CORRELATION_ID", "spec": "NO8S_SPEC"}`
		res, err := newAction(t, srv, extra).Apply(t.Context(), request("vars-pg", 2, &reporter{}))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		ps := srv.Pipelines()
		if len(ps) != 1 || len(ps[0].Inputs) != 0 || input(ps[0], "operation") != "apply" ||
			input(ps[0], "NO8S_SPEC") != `{"engine":"postgres","storage_gb":500}` || ps[0].Variables[0].VariableType != "env_var" {
			t.Fatalf("created %+v", ps)
		}
		if out := decodeOutputs(t, res); out["pipeline_id"] != float64(ps[0].PipelineID) {
			t.Errorf("outputs %s", res.Outputs)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{RefuseVariables: true})
		_, err := newAction(t, srv, `, "pass": "variables"`).Apply(t.Context(), request("vars-pg", 2, &reporter{}))
		var ce *gitlabapi.ConfigError
		if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "pipeline variables are not allowed") ||
			!strings.Contains(err.Error(), "use inputs (pass: inputs)") {
			t.Fatalf("error = %v", err)
		}
		if n := len(srv.Requests()); n != 1 || len(srv.Pipelines()) != 0 {
			t.Errorf("%d requests, %d pipelines: a refusal was retried", n, len(srv.Pipelines()))
		}
	})
}

// TestConfigErrorsNameTheFix checks that what no retry mends fails at once,
// saying what to fix, and never shows a token.
func TestConfigErrorsNameTheFix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		popts  gitlabtest.ProjectOptions
		fault  *gitlabtest.Fault
		extra  string
		status int
		hint   string
	}{
		{name: "token not accepted", fault: ptr(gitlabtest.Unauthorized()), status: 401,
			hint: "GitLab does not accept the token in tokenEnv: it is invalid, expired or revoked"},
		{name: "reporter token", popts: gitlabtest.ProjectOptions{Tokens: map[string]gitlabtest.Role{"glpat-reporterT0ken": gitlabtest.Reporter}},
			extra: `, "tokenEnv": "REPORTER"`, status: 403, hint: "needs the api scope and at least the Developer role"},
		{name: "unknown project", extra: `, "project": "acme/nope"`, status: 404,
			hint: "project acme/nope does not exist, or the token in tokenEnv cannot see it"},
		{name: "unknown trigger token", extra: `, "triggerTokenEnv": "WRONG_TRIGGER"`, status: 404,
			hint: "the token in triggerTokenEnv is not one of its pipeline trigger tokens"},
		{name: "no such ref", popts: gitlabtest.ProjectOptions{Refs: []string{}}, extra: `, "ref": "prod"`, status: 400,
			hint: `ref "prod" does not exist in project acme/infra/pipelines`},
		{name: "undeclared inputs", popts: gitlabtest.ProjectOptions{Inputs: []string{"operation"}}, status: 400,
			hint: "declare every input the plugin sends under spec:inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{}, tt.popts)
			if tt.fault != nil {
				srv.FailNext(gitlabtest.Match{}, 1, *tt.fault)
			}
			cfg := fmt.Sprintf(`{"baseURL": %q, "project": %q, "tokenEnv": "GL_TOKEN", "pollInterval": "5ms"%s}`, srv.URL, projectPath, tt.extra)
			env := map[string]string{"GL_TOKEN": token, "REPORTER": "glpat-reporterT0ken", "WRONG_TRIGGER": "glptt-wrongTr1gger"}
			a, err := gitlabpipelines.New(action.Settings{Instance: "deploy", Config: json.RawMessage(cfg),
				Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Apply(t.Context(), request("x", 1, &reporter{}))
			var ce *gitlabapi.ConfigError
			if !errors.As(err, &ce) || ce.Status != tt.status || !strings.Contains(err.Error(), tt.hint) {
				t.Fatalf("error = %v, want %d saying %q", err, tt.status, tt.hint)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests: a configuration error was retried", n)
			}
			for _, secret := range env {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a token: %v", err)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestTriggerToken: with triggerTokenEnv the pipeline is created through
// the trigger, the trigger token travelling in the body of that request
// alone, with no other credential; the access token follows it.
func TestTriggerToken(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
	if _, err := newAction(t, srv, `, "triggerTokenEnv": "GL_TRIGGER_TOKEN"`).Apply(t.Context(), request("trig", 1, &reporter{})); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ps := srv.Pipelines()
	if len(ps) != 1 || ps[0].Source != "trigger" || ps[0].TriggerToken != triggerToken || input(ps[0], "name") != "trig" {
		t.Fatalf("created %+v", ps)
	}
	for _, r := range srv.Requests() {
		trigger := strings.HasSuffix(r.Path, "/trigger/pipeline")
		switch {
		case trigger && (r.PrivateToken != "" || r.Authorization != "" || !strings.Contains(r.Body, triggerToken)):
			t.Errorf("trigger request %s with Private-Token %q, Authorization %q, body %s", r.Path, r.PrivateToken, r.Authorization, r.Body)
		case !trigger && (r.PrivateToken != token || strings.Contains(r.Body, triggerToken)):
			t.Errorf("request %s %s with Private-Token %q", r.Method, r.Path, r.PrivateToken)
		}
		if strings.Contains(r.Path+r.Query.Encode(), triggerToken) || strings.Contains(r.Path+r.Query.Encode(), token) {
			t.Errorf("a token in the URL of %s %s", r.Method, r.Path)
		}
	}
}

// TestTokensShownNowhere runs a success, a failure and errors with jobs that
// print the tokens into their logs and outputs, and looks for the tokens in
// everything the plugin gives back or writes: results, outputs, errors,
// conditions, progress and log records.
func TestTokensShownNowhere(t *testing.T) {
	t.Parallel()
	leaky := func(c gitlabtest.Creation) gitlabtest.Script {
		leak := "token " + token + " trigger " + triggerToken + "\n"
		out, _ := json.Marshal(map[string]string{"leak": leak})
		status := "success"
		if input(c, "operation") == "destroy" {
			status = "failed"
		}
		return gitlabtest.Script{Status: status, Polls: 1, Jobs: []gitlabtest.Job{{Name: "apply", Stage: "deploy", Log: strings.Repeat(leak, 40),
			Artifacts: map[string][]byte{"no8s-outputs.json": out}}}}
	}
	srv := newServer(t, gitlabtest.Options{Script: leaky}, gitlabtest.ProjectOptions{})
	var logs bytes.Buffer
	var mu gosync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := build(srv, `, "triggerTokenEnv": "GL_TRIGGER_TOKEN"`, logger)
	if err != nil {
		t.Fatal(err)
	}
	rep := &reporter{}
	var surfaces []string
	res, err := a.Apply(t.Context(), request("leaky", 1, rep))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if out := decodeOutputs(t, res); !strings.Contains(fmt.Sprint(out["leak"]), "token *** trigger ***") {
		t.Errorf("outputs %s: the job's own output is lost", res.Outputs)
	}
	surfaces = append(surfaces, string(res.Outputs), res.Message, fmt.Sprint(res.Conditions))
	_, err = a.Destroy(t.Context(), request("leaky", 1, rep))
	if err == nil || !strings.Contains(err.Error(), "token *** trigger ***") {
		t.Fatalf("Destroy = %v, want the failure with the masked log", err)
	}
	surfaces = append(surfaces, err.Error())
	// Errors of every kind: a 401, a timeout and a failed creation.
	srv.FailNext(gitlabtest.Match{Method: "GET"}, 1, gitlabtest.Unauthorized())
	_, err = a.Apply(t.Context(), request("leaky", 2, rep))
	surfaces = append(surfaces, fmt.Sprint(err))
	srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/trigger/pipeline"}, 3, gitlabtest.BadGateway())
	_, err = a.Apply(t.Context(), request("leaky", 3, rep))
	surfaces = append(surfaces, fmt.Sprint(err))
	surfaces = append(surfaces, rep.all())
	mu.Lock()
	surfaces = append(surfaces, logs.String())
	mu.Unlock()
	for i, s := range surfaces {
		for _, secret := range []string{token, triggerToken} {
			if strings.Contains(s, secret) {
				t.Errorf("surface %d shows a token:\n%s", i, s)
			}
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *gosync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestOutputsFile checks the outputs file's bounds: a job without one
// gives none, a malformed or oversized one fails the attempt saying so.
func TestOutputsFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string][]byte
		wantErr string
		wantKey string
	}{
		{name: "none", files: map[string][]byte{"report.txt": []byte("x")}},
		{name: "object", files: map[string][]byte{"no8s-outputs.json": []byte(`{"a": 1, "status": "mine"}`)}, wantKey: "a"},
		{name: "not an object", files: map[string][]byte{"no8s-outputs.json": []byte(`[1, 2]`)}, wantErr: "want a JSON object"},
		{name: "null", files: map[string][]byte{"no8s-outputs.json": []byte(`null`)}, wantErr: "want a JSON object"},
		{name: "two values", files: map[string][]byte{"no8s-outputs.json": []byte(`{} {}`)}, wantErr: "data follows it"},
		{name: "too large", files: map[string][]byte{"no8s-outputs.json": []byte(`{"a": "` + strings.Repeat("x", 1<<20) + `"}`)}, wantErr: "over the limit of 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
				return gitlabtest.Script{Polls: 1, Jobs: []gitlabtest.Job{{Name: "apply", Stage: "deploy", Artifacts: tt.files}}}
			}}, gitlabtest.ProjectOptions{})
			res, err := newAction(t, srv, "").Apply(t.Context(), request("out", 1, &reporter{}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `job "apply": artifact no8s-outputs.json`) {
					t.Fatalf("Apply = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			out := decodeOutputs(t, res)
			if out["status"] != "success" || tt.wantKey != "" && out[tt.wantKey] == nil || tt.wantKey == "" && len(out) != 4 {
				t.Errorf("outputs %s", res.Outputs)
			}
		})
	}
}
