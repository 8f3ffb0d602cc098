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

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

var createMatch = gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}

// TestCreationWithoutAnswer: GitLab created the pipeline, but its answer
// never came before the operation timed out or was cancelled. The pipeline
// must not be left to run unknown: it is found by its name, recorded as
// the handle and cancelled, and the error says it may still run.
func TestCreationWithoutAnswer(t *testing.T) {
	t.Parallel()
	never := func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "apply", Stage: "deploy"}}}
	}
	for _, how := range []string{"timeout", "operation cancelled"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: never}, gitlabtest.ProjectOptions{})
			srv.FailNext(createMatch, 1, gitlabtest.Through(gitlabtest.Hang()))
			extra := ""
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if how == "timeout" {
				extra = `, "timeout": "300ms"`
			} else {
				go func() {
					wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
					defer stop()
					_ = srv.WaitFor(wait, func() bool { return len(srv.Pipelines()) == 1 })
					cancel(errors.New("lease lost"))
				}()
			}
			rep := &recorder{srv: srv}
			_, err := newAction(t, srv, extra).Apply(ctx, request("pg", 1, rep))
			if err == nil || !errors.Is(err, action.ErrStillRunning) {
				t.Fatalf("Apply = %v, want an error saying the pipeline may still run", err)
			}
			ps := srv.Pipelines()
			if len(ps) != 1 {
				t.Fatalf("%d pipelines, want the one created behind the missing answer", len(ps))
			}
			if handles, _ := rep.recorded(); len(handles) != 1 || handles[0] != handleOf(ps[0]) {
				t.Errorf("recorded %v, want %s: the next attempt would not know of the pipeline", handles, handleOf(ps[0]))
			}
			if c := srv.Cancels(); len(c) != 1 || c[0] != ps[0].PipelineID {
				t.Errorf("cancelled %v, want pipeline %d", c, ps[0].PipelineID)
			}
		})
	}
}

// TestCreationAnswerWithoutPipeline: GitLab (or a proxy before it) created
// the pipeline but answered 201 with no usable id, or 200 with a page that
// is no JSON. The handle must name the pipeline that exists, so that the
// next attempt finds it; it is looked for by its name and followed.
func TestCreationAnswerWithoutPipeline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body string }{
		{"id 0", `{"id": 0, "project_id": 0, "status": "pending", "web_url": ""}`},
		{"negative id", `{"id": -5, "project_id": -1, "status": "pending"}`},
		{"no project", `{"id": 12, "status": "pending"}`},
		{"html", `<html><body>Signed in</body></html>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
			srv.FailNext(createMatch, 1, gitlabtest.Through(gitlabtest.Fault{Status: http.StatusCreated, Body: tt.body}))
			rep := &recorder{srv: srv}
			res, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 1, rep))
			ps := srv.Pipelines()
			if len(ps) != 1 {
				t.Fatalf("%d pipelines, want 1", len(ps))
			}
			if handles, _ := rep.recorded(); len(handles) == 0 || handles[0] != handleOf(ps[0]) {
				t.Errorf("recorded %v, want %s", handles, handleOf(ps[0]))
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if out := decodeOutputs(t, res); out["pipeline_id"] != float64(ps[0].PipelineID) {
				t.Errorf("outputs %s", res.Outputs)
			}
		})
	}
}

// TestPriorPipelineCanceling: the earlier attempt of the same operation
// and generation timed out and cancelled its pipeline, which GitLab shows
// canceling for a long while. It has no result to give: the next attempt
// waits until it is canceled, then creates a new one (never two at once),
// rather than fail with the cancelled pipeline's status.
func TestPriorPipelineCanceling(t *testing.T) {
	t.Parallel()
	var srv *gitlabtest.Server
	var mu gosync.Mutex
	var priorID int64
	var createdWhilePriorRan []string
	script := func(c gitlabtest.Creation) gitlabtest.Script {
		if input(c, "correlation_id") == "prior" {
			return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "apply", Stage: "deploy"}}}
		}
		mu.Lock()
		defer mu.Unlock()
		if st, _ := srv.Pipeline(priorID); st.Status != "canceled" {
			createdWhilePriorRan = append(createdWhilePriorRan, st.Status)
		}
		return outputsScript(c)
	}
	srv = newServer(t, gitlabtest.Options{Script: script, CancelPolls: 20}, gitlabtest.ProjectOptions{})
	prior := createPrior(t, srv, "apply", 3)
	mu.Lock()
	priorID = prior.PipelineID
	mu.Unlock()
	c, err := gitlabapi.NewClient(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Pipelines.GetPipeline(projectPath, prior.PipelineID); err != nil { // running
		t.Fatal(err)
	}
	if p, _, err := c.Pipelines.CancelPipelineBuild(projectPath, prior.PipelineID); err != nil || p.Status != "canceling" {
		t.Fatalf("cancel: %v, %v", p, err)
	}
	rep := &recorder{srv: srv}
	req := request("pg", 3, rep)
	req.PriorHandle = &action.Handle{Value: handleOf(prior), Operation: action.OperationApply, Generation: 3}
	res, err := newAction(t, srv, "").Apply(t.Context(), req)
	if err != nil {
		t.Fatalf("Apply = %v, want a new pipeline's result once the cancelled one ended", err)
	}
	ps := apiPipelines(srv)
	if len(ps) != 2 || decodeOutputs(t, res)["pipeline_id"] != float64(ps[1].PipelineID) {
		t.Fatalf("pipelines %+v, outputs %s: want a new one followed", ps, res.Outputs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(createdWhilePriorRan) > 0 {
		t.Errorf("created a pipeline while the prior one was %v: two pipelines at once", createdWhilePriorRan)
	}
}

// TestTokensInGitLabAnswers: a hostile or broken GitLab echoes the tokens
// in its error bodies (a 400 quoting the trigger token, a 502 page, a 403
// on a read). Neither token may show in the error, the progress, the
// conditions or the log records.
func TestTokensInGitLabAnswers(t *testing.T) {
	t.Parallel()
	echo := fmt.Sprintf(`{"message": {"base": ["token %s (trigger %s) is not valid"]}}`, token, triggerToken)
	page := fmt.Sprintf("<html>request with Private-Token %s, body token=%s</html>", token, triggerToken)
	for _, tt := range []struct {
		name  string
		match gitlabtest.Match
		n     int
		fault gitlabtest.Fault
	}{
		{"400 on the trigger", gitlabtest.Match{Method: "POST", PathSuffix: "/trigger/pipeline"}, 1, gitlabtest.Fault{Status: http.StatusBadRequest, Body: echo}},
		{"502 after the pipeline was created", gitlabtest.Match{Method: "POST", PathSuffix: "/trigger/pipeline"}, 1, gitlabtest.Through(gitlabtest.Fault{Status: http.StatusBadGateway, Body: page})},
		{"502 every time", gitlabtest.Match{Method: "POST", PathSuffix: "/trigger/pipeline"}, 3, gitlabtest.Fault{Status: http.StatusBadGateway, Body: page}},
		{"403 on a read", gitlabtest.Match{Method: "GET", PathSuffix: "/jobs"}, 1, gitlabtest.Fault{Status: http.StatusForbidden, Body: echo}},
		{"500s on a read", gitlabtest.Match{Method: "GET", PathSuffix: "/jobs"}, 2, gitlabtest.Fault{Status: http.StatusInternalServerError, Body: page}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
			srv.FailNext(tt.match, tt.n, tt.fault)
			var logs bytes.Buffer
			var mu gosync.Mutex
			logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			a, err := build(srv, `, "triggerTokenEnv": "GL_TRIGGER_TOKEN"`, logger)
			if err != nil {
				t.Fatal(err)
			}
			rep := &reporter{}
			res, err := a.Apply(t.Context(), request("pg", 1, rep))
			surfaces := []string{fmt.Sprint(err), rep.all()}
			if res != nil {
				surfaces = append(surfaces, string(res.Outputs), res.Message, fmt.Sprint(res.Conditions))
			}
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
		})
	}
}

// loopReporter answers the pipeline's trigger jobs, once its handle is
// recorded, with fanOut bridges whose downstream pipeline is the pipeline
// itself.
type loopReporter struct {
	reporter
	srv    *gitlabtest.Server
	fanOut int
}

func (r *loopReporter) RecordHandle(_ context.Context, handle string) error {
	p, id, _ := strings.Cut(handle, "/")
	var bridges []map[string]any
	for i := range r.fanOut {
		bridges = append(bridges, map[string]any{"id": 8_000_000_000 + i, "name": fmt.Sprintf("loop-%d", i), "stage": "deploy", "status": "success",
			"downstream_pipeline": map[string]any{"id": json.Number(id), "project_id": json.Number(p), "status": "success",
				"web_url": fmt.Sprintf("%s/%s/-/pipelines/%s", r.srv.URL, projectPath, id)}})
	}
	body, err := json.Marshal(bridges)
	if err != nil {
		return err
	}
	r.srv.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/pipelines/" + id + "/bridges"}, 1_000_000,
		gitlabtest.Fault{Status: http.StatusOK, Body: string(body)})
	return nil
}

// TestChildPipelineLoop: a hostile GitLab answers that the pipeline's
// trigger job started the pipeline itself, or that many trigger jobs all
// did. Each pipeline is read once per poll, and its jobs show once in the
// outputs.
func TestChildPipelineLoop(t *testing.T) {
	t.Parallel()
	for _, fanOut := range []int{1, 100} {
		t.Run(fmt.Sprintf("%d bridges", fanOut), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
			res, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 1, &loopReporter{srv: srv, fanOut: fanOut}))
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			jobs, _ := decodeOutputs(t, res)["jobs"].([]any)
			if len(jobs) != 2+fanOut {
				t.Errorf("%d jobs in the outputs, want the 2 jobs and %d trigger jobs once each", len(jobs), fanOut)
			}
			id := srv.Pipelines()[0].PipelineID
			polls := srv.Count(gitlabtest.Match{Method: "GET", PathSuffix: fmt.Sprintf("/pipelines/%d", id)}, http.StatusOK)
			lists := srv.Count(gitlabtest.Match{Method: "GET", PathSuffix: fmt.Sprintf("/pipelines/%d/jobs", id)}, http.StatusOK)
			if lists != polls {
				t.Errorf("the jobs were listed %d times in %d polls, want once a poll", lists, polls)
			}
		})
	}
}

// TestOutputsFilesBoundedTogether: outputs are stored with the resource and
// every history row, so their files are bounded together, not only each:
// many jobs with a file under the limit each must not add up to many MiB.
func TestOutputsFilesBoundedTogether(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
		var jobs []gitlabtest.Job
		for i := range 8 {
			out := fmt.Sprintf(`{"part%d": %q}`, i, strings.Repeat("x", 600<<10))
			jobs = append(jobs, gitlabtest.Job{Name: fmt.Sprintf("part-%d", i), Stage: "deploy", Artifacts: map[string][]byte{"no8s-outputs.json": []byte(out)}})
		}
		return gitlabtest.Script{Polls: 1, Jobs: jobs}
	}}, gitlabtest.ProjectOptions{})
	res, err := newAction(t, srv, "").Apply(t.Context(), request("big", 1, &reporter{}))
	if err == nil {
		t.Fatalf("Apply gave %d bytes of outputs, want an error: over the limit of 1 MiB", len(res.Outputs))
	}
	if !strings.Contains(err.Error(), "1048576 bytes") {
		t.Errorf("error %v does not name the limit", err)
	}
}

// createNamed creates a pipeline in project straight through the API, as
// someone else would, with the given correlation id (its name).
func createNamed(t *testing.T, srv *gitlabtest.Server, project, op, correlation string) gitlabtest.Creation {
	t.Helper()
	c, err := gitlabapi.NewClient(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	inputs := gitlab.PipelineInputsOption{}
	for k, v := range map[string]string{"operation": op, "kind": "DatabaseCluster", "name": "pg", "generation": "1", "spec": "{}", "correlation_id": correlation} {
		inputs[k] = gitlab.NewPipelineInputValue(v)
	}
	if _, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main"), Inputs: inputs}); err != nil {
		t.Fatal(err)
	}
	ps := srv.Pipelines()
	return ps[len(ps)-1]
}

// TestFindMatchesOnlyItsOwnPipeline: after a creation answered 502 before
// GitLab (nothing created), the pipelines of the ref include others of the
// same resource, operation and generation, by people or earlier attempts,
// whose names share all of the correlation id but its random part. None
// is taken for the attempt's own: a new pipeline is created and followed.
func TestFindMatchesOnlyItsOwnPipeline(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
	const prefix = "databasecluster-pg-g1-apply-"
	var others []int64
	for _, name := range []string{prefix, prefix + "0", prefix + "00000000000", "x" + prefix + "ffffffffffff", "databasecluster-pg-g1-apply"} {
		others = append(others, createNamed(t, srv, projectPath, "apply", name).PipelineID)
	}
	srv.FailNext(createMatch, 1, gitlabtest.BadGateway())
	res, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 1, &reporter{}))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ps := apiPipelines(srv)
	own := ps[len(ps)-1]
	if len(ps) != len(others)+1 || decodeOutputs(t, res)["pipeline_id"] != float64(own.PipelineID) || !strings.HasPrefix(input(own, "correlation_id"), prefix) {
		t.Fatalf("outputs %s of %d pipelines: want the new one's", res.Outputs, len(ps))
	}
	if c := srv.Cancels(); len(c) != 0 {
		t.Errorf("cancelled %v: other pipelines", c)
	}
}

// TestHandleOfAnotherProject: the project setting changed since the earlier
// attempt, whose pipeline (a destroy, still going) is in the old project.
// The handle names that project: the pipeline is cancelled there and
// waited for, and the new one created in the configured project.
func TestHandleOfAnotherProject(t *testing.T) {
	t.Parallel()
	never := func(c gitlabtest.Creation) gitlabtest.Script {
		if c.ProjectPath == "acme/old" {
			return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "destroy", Stage: "deploy"}}}
		}
		return outputsScript(c)
	}
	srv := newServer(t, gitlabtest.Options{Script: never, CancelPolls: 2}, gitlabtest.ProjectOptions{})
	srv.AddProject("acme/old", gitlabtest.ProjectOptions{WorkflowName: workflowName})
	prior := createNamed(t, srv, "acme/old", "destroy", "old")
	req := request("pg", 1, &recorder{srv: srv})
	req.PriorHandle = &action.Handle{Value: handleOf(prior), Operation: action.OperationDestroy, Generation: 1}
	res, err := newAction(t, srv, "").Apply(t.Context(), req)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ps := apiPipelines(srv)
	if len(ps) != 2 || ps[1].ProjectPath != projectPath || decodeOutputs(t, res)["pipeline_id"] != float64(ps[1].PipelineID) {
		t.Fatalf("pipelines %+v", ps)
	}
	if st, _ := srv.Pipeline(prior.PipelineID); st.Status != "canceled" || !st.Cancelled {
		t.Errorf("the old project's pipeline %+v, want it cancelled", st)
	}
}

// TestCreationRateLimitedPastTimeout: a 429 asking to wait for hours is
// waited out only until the operation's timeout; nothing was created, so
// nothing is looked for and the handle stays empty.
func TestCreationRateLimitedPastTimeout(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	srv.FailNext(createMatch, 1, gitlabtest.TooManyRequests(1000*time.Hour))
	rep := &recorder{srv: srv}
	start := time.Now()
	_, err := newAction(t, srv, `, "timeout": "300ms"`).Apply(t.Context(), request("pg", 1, rep))
	if err == nil || !strings.Contains(err.Error(), "did not finish within the timeout") || errors.Is(err, action.ErrStillRunning) {
		t.Fatalf("Apply = %v, want the timeout, nothing running", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	if n := len(srv.Pipelines()); n != 0 {
		t.Errorf("%d pipelines", n)
	}
	if n := srv.Count(gitlabtest.Match{Method: "GET", PathSuffix: "/pipelines"}, http.StatusOK); n != 0 {
		t.Errorf("looked for a pipeline %d times after a 429, which creates none", n)
	}
}

// TestHugeJobLog: a failed job's log of 16 MiB ending in a token is read
// to its end, its last lines quoted with the token masked, the quote
// bounded.
func TestHugeJobLog(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("y", 1023) + "\n"
	log := strings.Repeat(line, 16<<10) + "echo " + token + "\n" + "split " + token[:10] + "\n" + token[10:] + "\n"
	srv := newServer(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Status: "failed", Polls: 1, Jobs: []gitlabtest.Job{{Name: "apply", Stage: "deploy", Log: log}}}
	}}, gitlabtest.ProjectOptions{})
	_, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 1, &reporter{}))
	if err == nil || !strings.Contains(err.Error(), "echo ***") || strings.Contains(err.Error(), token) {
		t.Fatalf("Apply = %.300v, want the end of the log with the token masked", err)
	}
	if len(err.Error()) > 8<<10 {
		t.Errorf("error of %d bytes", len(err.Error()))
	}
}
