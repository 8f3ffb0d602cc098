package gitlabtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// A pipeline created with variables and inputs is recorded as sent, its
// script sees them, and it plays: pending, running for Polls reads, then
// its status, with integer durations.
func TestCreatePipelinePlaysItsScript(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []gitlabtest.Creation
	)
	script := func(c gitlabtest.Creation) gitlabtest.Script {
		mu.Lock()
		seen = append(seen, c)
		mu.Unlock()
		return gitlabtest.Script{Status: "failed", Polls: 2, Jobs: []gitlabtest.Job{
			{Name: "plan", Stage: "plan", Status: "success", Log: "planning\n", Artifacts: map[string][]byte{"out/plan.json": []byte(`{"changes":1}`)}},
			{Name: "apply", Stage: "apply", Log: "applying\nboom\n"},
		}}
	}
	srv, c, id := setup(t, gitlabtest.Options{Script: script}, gitlabtest.ProjectOptions{})
	pl, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{
		Ref: gitlab.Ptr("main"),
		Variables: &[]*gitlab.PipelineVariableOptions{
			{Key: gitlab.Ptr("A"), Value: gitlab.Ptr("1")},
			{Key: gitlab.Ptr("F"), Value: gitlab.Ptr("x"), VariableType: gitlab.Ptr(gitlab.FileVariableType)},
		},
		Inputs: gitlab.PipelineInputsOption{
			"env": gitlab.NewPipelineInputValue("prod"), "n": gitlab.NewPipelineInputValue(3),
			"dry": gitlab.NewPipelineInputValue(true), "l": gitlab.NewPipelineInputValue([]string{"a", "b"}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Status != "pending" || pl.ProjectID != id || pl.Ref != "main" || pl.SHA != gitlabtest.SHA(project, "main") ||
		pl.Source != "api" || pl.IID != 1 || !strings.HasSuffix(pl.WebURL, "/g/sub/p.x/-/pipelines/"+itoa(pl.ID)) {
		t.Fatalf("created = %+v", pl)
	}
	got := srv.Pipelines()
	want := gitlabtest.Creation{PipelineID: pl.ID, ProjectID: id, ProjectPath: project, Ref: "main", SHA: pl.SHA, Source: "api",
		Variables: []gitlabtest.Variable{{Key: "A", Value: "1", VariableType: "env_var"}, {Key: "F", Value: "x", VariableType: "file"}},
		Inputs:    map[string]any{"env": "prod", "n": 3.0, "dry": true, "l": []any{"a", "b"}}, At: got[0].At}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("recorded %+v\nwant %+v", got, want)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].Ref != "main" || seen[0].Inputs["env"] != "prod" {
		t.Fatalf("script saw %+v", seen)
	}
	mu.Unlock()

	jobs := func() map[string]*gitlab.Job {
		list, _, err := c.Jobs.ListPipelineJobs(project, pl.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*gitlab.Job{}
		for _, j := range list {
			out[j.Name] = j
		}
		return out
	}
	if js := jobs(); js["plan"].Status != "pending" || js["apply"].Status != "created" {
		t.Fatalf("jobs while pending: %s %s", js["plan"].Status, js["apply"].Status)
	}
	for read, wantStatus := range []string{"running", "running", "failed", "failed"} {
		p, _, err := c.Pipelines.GetPipeline(project, pl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != wantStatus {
			t.Fatalf("read %d: status %s, want %s", read+1, p.Status, wantStatus)
		}
		if wantStatus == "running" {
			if p.StartedAt == nil || p.FinishedAt != nil {
				t.Fatalf("running pipeline times: %+v", p)
			}
			js := jobs()
			if js["plan"].Status != "running" || js["apply"].Status != "created" {
				t.Fatalf("jobs while running: %s %s", js["plan"].Status, js["apply"].Status)
			}
			// Artifacts come only once the job finished.
			_, _, err := c.Jobs.DownloadSingleArtifactsFile(project, js["plan"].ID, "out/plan.json")
			if !errors.Is(err, gitlab.ErrNotFound) {
				t.Fatalf("artifact of a running job: %v", err)
			}
		}
	}
	st, _ := srv.Pipeline(pl.ID)
	if st.Status != "failed" || st.Polls != 4 || len(st.JobIDs) != 2 {
		t.Fatalf("state = %+v", st)
	}

	js := jobs()
	plan, apply := js["plan"], js["apply"]
	if plan.Status != "success" || apply.Status != "failed" || apply.FailureReason != "script_failure" ||
		plan.Stage != "plan" || plan.Pipeline.ID != pl.ID || plan.StartedAt == nil || plan.FinishedAt == nil {
		t.Fatalf("jobs: %+v\n%+v", plan, apply)
	}
	if plan.ArtifactsFile.Filename != "artifacts.zip" || len(plan.Artifacts) == 0 {
		t.Fatalf("plan artifacts: %+v %+v", plan.ArtifactsFile, plan.Artifacts)
	}
	r, _, err := c.Jobs.DownloadSingleArtifactsFile(project, plan.ID, "out/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r); string(b) != `{"changes":1}` {
		t.Fatalf("artifact = %q", b)
	}
	if _, _, err := c.Jobs.DownloadSingleArtifactsFile(project, plan.ID, "out/none.json"); !errors.Is(err, gitlab.ErrNotFound) {
		t.Fatalf("absent artifact: %v", err)
	}
	r, resp, err := c.Jobs.GetTraceFile(project, apply.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(r); string(b) != "applying\nboom\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("trace = %q (%s)", b, resp.Header.Get("Content-Type"))
	}
	// The whole pipeline, read raw: durations are integers.
	_, _, body := rawGet(t, srv, "/api/v4/projects/"+itoa(id)+"/pipelines/"+itoa(pl.ID), gitlabtest.DefaultToken)
	if !strings.Contains(body, `"duration":0,`) && !strings.Contains(body, `"duration":1,`) {
		t.Fatalf("pipeline body: %s", body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Job listings paginate like GitLab's: X-Total, X-Next-Page, Link.
func TestJobPagination(t *testing.T) {
	t.Parallel()
	var jobs []gitlabtest.Job
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		jobs = append(jobs, gitlabtest.Job{Name: n, Stage: "test"})
	}
	_, c, _ := setup(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Jobs: jobs}
	}}, gitlabtest.ProjectOptions{})
	pl, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	opt := &gitlab.ListJobsOptions{ListOptions: gitlab.ListOptions{PerPage: 2}}
	pages := 0
	for {
		list, resp, err := c.Jobs.ListPipelineJobs(project, pl.ID, opt)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if resp.TotalItems != 5 || resp.TotalPages != 3 || resp.ItemsPerPage != 2 || resp.CurrentPage != int64(pages) {
			t.Fatalf("page %d headers: %+v", pages, resp)
		}
		if resp.NextPage != 0 && !strings.Contains(resp.NextLink, "page="+itoa(resp.NextPage)) {
			t.Fatalf("Link next = %q", resp.NextLink)
		}
		for _, j := range list {
			names = append(names, j.Name)
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if pages != 3 || strings.Join(names, "") != "edcba" {
		t.Fatalf("%d pages, jobs %v (GitLab lists newest first)", pages, names)
	}
	scope := []gitlab.BuildStateValue{gitlab.Pending}
	list, _, err := c.Jobs.ListPipelineJobs(project, pl.ID, &gitlab.ListJobsOptions{Scope: &scope})
	if err != nil || len(list) != 5 {
		t.Fatalf("scope pending: %d jobs, %v", len(list), err)
	}
	scope = []gitlab.BuildStateValue{gitlab.Success}
	list, _, err = c.Jobs.ListPipelineJobs(project, pl.ID, &gitlab.ListJobsOptions{Scope: &scope})
	if err != nil || len(list) != 0 {
		t.Fatalf("scope success: %d jobs, %v", len(list), err)
	}
}

// A bridge starts a child pipeline when its parent runs; the child has its
// own jobs, plays by its own reads, and shows its status on the bridge.
func TestChildPipelineThroughBridge(t *testing.T) {
	t.Parallel()
	child := &gitlabtest.Script{Status: "success", Polls: 1, Jobs: []gitlabtest.Job{{Name: "deploy", Log: "deployed\n"}}}
	_, c, id := setup(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Polls: 3, Jobs: []gitlabtest.Job{{Name: "build", Stage: "build"}},
			Bridges: []gitlabtest.Bridge{{Name: "trigger-child", Stage: "build", Child: child}, {Name: "no-child"}}}
	}}, gitlabtest.ProjectOptions{})
	pl, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	bridges := func() map[string]*gitlab.Bridge {
		list, _, err := c.Jobs.ListPipelineBridges(project, pl.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*gitlab.Bridge{}
		for _, b := range list {
			out[b.Name] = b
		}
		return out
	}
	if b := bridges()["trigger-child"]; b.DownstreamPipeline != nil || b.Status != "pending" {
		t.Fatalf("bridge before start: %+v", b)
	}
	if _, _, err := c.Pipelines.GetPipeline(project, pl.ID); err != nil { // starts running
		t.Fatal(err)
	}
	bs := bridges()
	down := bs["trigger-child"].DownstreamPipeline
	if down == nil || down.ProjectID != id || down.Source != "parent_pipeline" || down.Status != "pending" || bs["no-child"].DownstreamPipeline != nil {
		t.Fatalf("bridges after start: %+v %+v", bs["trigger-child"], down)
	}
	// Bridges are not jobs.
	list, _, err := c.Jobs.ListPipelineJobs(project, pl.ID, nil)
	if err != nil || len(list) != 1 || list[0].Name != "build" {
		t.Fatalf("parent jobs: %v, %v", list, err)
	}
	childJobs, _, err := c.Jobs.ListPipelineJobs(down.ProjectID, down.ID, nil)
	if err != nil || len(childJobs) != 1 || childJobs[0].Name != "deploy" || childJobs[0].Pipeline.ID != down.ID {
		t.Fatalf("child jobs: %v, %v", childJobs, err)
	}
	for _, want := range []string{"running", "success"} {
		p, _, err := c.Pipelines.GetPipeline(down.ProjectID, down.ID)
		if err != nil || p.Status != want {
			t.Fatalf("child: %v, %v; want %s", p, err, want)
		}
	}
	if b := bridges()["trigger-child"]; b.Status != "success" || b.DownstreamPipeline.Status != "success" {
		t.Fatalf("bridge after the child: %+v", b)
	}
	r, _, err := c.Jobs.GetTraceFile(project, childJobs[0].ID)
	if b, _ := io.ReadAll(r); err != nil || string(b) != "deployed\n" {
		t.Fatalf("child log %q, %v", b, err)
	}
}

// A parent that finishes finishes its children; cancelling cancels them.
func TestChildrenFollowTheirParent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		end        func(*gitlabtest.Server, *gitlab.Client, int64) error
		wantParent string
		wantChild  string
	}{
		{"finish", func(s *gitlabtest.Server, _ *gitlab.Client, id int64) error {
			if !s.Finish(id, "failed") {
				return errors.New("Finish refused")
			}
			return nil
		}, "failed", "success"},
		{"cancel", func(_ *gitlabtest.Server, c *gitlab.Client, id int64) error {
			_, _, err := c.Pipelines.CancelPipelineBuild(project, id)
			return err
		}, "canceled", "canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c, _ := setup(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
				return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "j"}},
					Bridges: []gitlabtest.Bridge{{Name: "b", Child: &gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "cj"}}}}}}
			}}, gitlabtest.ProjectOptions{})
			pl, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if p, _, err := c.Pipelines.GetPipeline(project, pl.ID); err != nil || p.Status != "running" {
					t.Fatalf("Never: %v %v", p, err)
				}
			}
			if err := tt.end(srv, c, pl.ID); err != nil {
				t.Fatal(err)
			}
			st, _ := srv.Pipeline(pl.ID)
			if st.Status != tt.wantParent || len(st.Children) != 1 {
				t.Fatalf("parent = %+v", st)
			}
			ch, _ := srv.Pipeline(st.Children[0])
			if ch.Status != tt.wantChild || ch.ParentID != pl.ID || ch.Source != "parent_pipeline" {
				t.Fatalf("child = %+v", ch)
			}
			jobs, _, err := c.Jobs.ListPipelineJobs(project, ch.PipelineID, nil)
			if err != nil || len(jobs) != 1 || jobs[0].Status != tt.wantChild {
				t.Fatalf("child jobs %v %v", jobs, err)
			}
			if srv.Finish(pl.ID, "success") {
				t.Fatal("Finish of a finished pipeline")
			}
		})
	}
}

// Cancel answers 200 whatever the state, and records every request.
func TestCancel(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Polls: 5, Jobs: []gitlabtest.Job{{Name: "a", Stage: "one", Log: "started\n"}, {Name: "b", Stage: "two", Log: "never\n"}}}
	}}, gitlabtest.ProjectOptions{})
	pl, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Pipelines.GetPipeline(project, pl.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		p, resp, err := c.Pipelines.CancelPipelineBuild(project, pl.ID)
		if err != nil || resp.StatusCode != http.StatusOK || p.Status != "canceled" || p.FinishedAt == nil {
			t.Fatalf("cancel: %+v %v", p, err)
		}
	}
	if got := srv.Cancels(); len(got) != 2 || got[0] != pl.ID {
		t.Fatalf("Cancels = %v", got)
	}
	jobs, _, err := c.Jobs.ListPipelineJobs(project, pl.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Status != "canceled" {
			t.Fatalf("job %s: %s", j.Name, j.Status)
		}
		r, _, err := c.Jobs.GetTraceFile(project, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		if want := map[string]string{"a": "started\n", "b": ""}[j.Name]; string(b) != want {
			t.Fatalf("log of %s = %q, want %q", j.Name, b, want)
		}
	}
	if _, _, err := c.Pipelines.CancelPipelineBuild(project, 1); !errors.Is(err, gitlab.ErrNotFound) {
		t.Fatalf("cancel of no pipeline: %v", err)
	}
}

// Creation fails as GitLab's does: variables a project refuses, a ref that
// does not exist, inputs it does not declare, a missing ref, a Reporter.
func TestCreatePipelineRefusals(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	srv.AddProject(project, gitlabtest.ProjectOptions{RefuseVariables: true, Refs: []string{"v1"}, Inputs: []string{"env"},
		Tokens: map[string]gitlabtest.Role{"glpat-rep": gitlabtest.Reporter, "glpat-dev": gitlabtest.Developer}})
	vars := &[]*gitlab.PipelineVariableOptions{{Key: gitlab.Ptr("K"), Value: gitlab.Ptr("V")}}
	tests := []struct {
		name   string
		token  string
		opt    *gitlab.CreatePipelineOptions
		status int
		msg    string
	}{
		{"variables", gitlabtest.DefaultToken, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main"), Variables: vars},
			http.StatusBadRequest, "Insufficient permissions to set pipeline variables"},
		{"no such ref", gitlabtest.DefaultToken, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("nope")}, http.StatusBadRequest, "Reference not found"},
		{"undeclared inputs", gitlabtest.DefaultToken, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("v1"),
			Inputs: gitlab.PipelineInputsOption{"env": gitlab.NewPipelineInputValue("x"), "zz": gitlab.NewPipelineInputValue(1), "aa": gitlab.NewPipelineInputValue(true)}},
			http.StatusBadRequest, "unknown input arguments: aa, zz"},
		{"no ref", gitlabtest.DefaultToken, &gitlab.CreatePipelineOptions{}, http.StatusBadRequest, "ref is missing"},
		{"reporter", "glpat-rep", &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")}, http.StatusForbidden, "403 Forbidden"},
		{"developer", "glpat-dev", &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main"),
			Inputs: gitlab.PipelineInputsOption{"env": gitlab.NewPipelineInputValue("x")}}, 0, ""},
	}
	for _, tt := range tests {
		_, _, err := client(t, srv, tt.token).Pipelines.CreatePipeline(project, tt.opt)
		if tt.status == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if statusOf(err) != tt.status || gitlabapi.Message(err) != tt.msg {
			t.Errorf("%s: %v (message %q); want %d %q", tt.name, err, gitlabapi.Message(err), tt.status, tt.msg)
		}
	}
	if got := srv.Pipelines(); len(got) != 1 {
		t.Fatalf("pipelines = %+v, want only the developer's", got)
	}
	// A Reporter reads.
	if _, _, err := client(t, srv, "glpat-rep").Pipelines.GetPipeline(project, srv.Pipelines()[0].PipelineID); err != nil {
		t.Fatalf("reporter reads: %v", err)
	}
	if _, _, err := client(t, srv, "glpat-rep").Pipelines.CancelPipelineBuild(project, srv.Pipelines()[0].PipelineID); statusOf(err) != http.StatusForbidden {
		t.Fatalf("reporter cancels: %v", err)
	}
}

// A trigger token creates a pipeline with variables as a hash; the call
// carries no other credential.
func TestTriggerPipeline(t *testing.T) {
	t.Parallel()
	srv, _, id := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{TriggerTokens: []string{"glptt-ok"}})
	tc, err := gitlabapi.NewTriggerClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	pl, resp, err := tc.PipelineTriggers.RunPipelineTrigger(project, &gitlab.RunPipelineTriggerOptions{
		Ref: gitlab.Ptr("main"), Token: gitlab.Ptr("glptt-ok"), Variables: map[string]string{"B": "2", "A": "1"},
		Inputs: gitlab.PipelineInputsOption{"env": gitlab.NewPipelineInputValue("prod")}})
	if err != nil || resp.StatusCode != http.StatusCreated || pl.Source != "trigger" || pl.ProjectID != id {
		t.Fatalf("trigger: %+v %v", pl, err)
	}
	got := srv.Pipelines()
	if len(got) != 1 || got[0].TriggerToken != "glptt-ok" || got[0].Source != "trigger" ||
		!reflect.DeepEqual(got[0].Variables, []gitlabtest.Variable{{Key: "A", Value: "1", VariableType: "env_var"}, {Key: "B", Value: "2", VariableType: "env_var"}}) ||
		got[0].Inputs["env"] != "prod" {
		t.Fatalf("recorded %+v", got)
	}
	tests := []struct {
		token  *string
		ref    *string
		status int
	}{
		{gitlab.Ptr("glptt-wrong"), gitlab.Ptr("main"), http.StatusNotFound},
		{nil, gitlab.Ptr("main"), http.StatusBadRequest},
		{gitlab.Ptr("glptt-ok"), nil, http.StatusBadRequest},
		{gitlab.Ptr("glptt-ok"), gitlab.Ptr("nope"), 0},
	}
	for _, tt := range tests {
		_, _, err := tc.PipelineTriggers.RunPipelineTrigger(project, &gitlab.RunPipelineTriggerOptions{Ref: tt.ref, Token: tt.token})
		if statusOf(err) != tt.status {
			t.Errorf("token %v ref %v: %v, want %d", tt.token, tt.ref, err, tt.status)
		}
	}
	if _, _, err := tc.Projects.GetProject(project, nil); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("anonymous read: %v", err)
	}
}

// The Retrier against the fake: a 502 on a pipeline's read is retried.
func TestRetrierReadsThroughFaults(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	pl, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	srv.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/pipelines/" + itoa(pl.ID)}, 2, gitlabtest.BadGateway())
	r := gitlabapi.Retrier{Backoff: 1, MaxBackoff: 2}
	var got *gitlab.Pipeline
	err = r.Call(context.Background(), func() (*gitlab.Response, error) {
		var resp *gitlab.Response
		var err error
		got, resp, err = c.Pipelines.GetPipeline(project, pl.ID)
		return resp, err
	})
	if err != nil || got.Status != "running" {
		t.Fatalf("%+v %v", got, err)
	}
}
