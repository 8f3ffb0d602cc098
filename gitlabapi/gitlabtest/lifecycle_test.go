package gitlabtest_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// A pipeline waiting for a resource, then one whose next job is manual,
// is not finished: it stays manual, without finished_at, until a person
// plays the job (Finish) or it is cancelled.
func TestWaitingAndManualPipelinesAreNotFinished(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{Script: func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Status: "manual", WaitingForResource: 2, Polls: 1, Jobs: []gitlabtest.Job{
			{Name: "plan", Stage: "plan", Status: "success"}, {Name: "apply", Stage: "apply"}}}
	}}, gitlabtest.ProjectOptions{})
	pl, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	for read, want := range []string{"waiting_for_resource", "waiting_for_resource", "running", "manual", "manual", "manual"} {
		p, _, err := c.Pipelines.GetPipeline(project, pl.ID)
		if err != nil || p.Status != want || p.FinishedAt != nil {
			t.Fatalf("read %d: %+v %v; want %s, unfinished", read+1, p, err, want)
		}
		if read == 0 {
			jobs, _, _ := c.Jobs.ListPipelineJobs(project, pl.ID, nil)
			if len(jobs) != 2 || jobs[1].Status != "waiting_for_resource" || jobs[0].Status != "created" {
				t.Fatalf("jobs while waiting: %+v", jobs)
			}
		}
	}
	jobs, _, err := c.Jobs.ListPipelineJobs(project, pl.ID, nil)
	if err != nil || jobs[0].Name != "apply" || jobs[0].Status != "manual" || jobs[1].Status != "success" {
		t.Fatalf("jobs of a manual pipeline: %+v %v", jobs, err)
	}
	if !srv.Finish(pl.ID, "success") {
		t.Fatal("Finish refused a manual pipeline")
	}
	if p, _, err := c.Pipelines.GetPipeline(project, pl.ID); err != nil || p.Status != "success" || p.FinishedAt == nil {
		t.Fatalf("after Finish: %+v %v", p, err)
	}
}

// With CancelPolls, a running pipeline that is cancelled shows canceling
// for that many reads, then canceled; one not started yet is canceled at
// once.
func TestCancelingTakesReads(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{CancelPolls: 2, Script: func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "a", Stage: "one"}, {Name: "b", Stage: "two"}}}
	}}, gitlabtest.ProjectOptions{})
	running, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	pending, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Pipelines.GetPipeline(project, running.ID); err != nil {
		t.Fatal(err)
	}
	if p, _, err := c.Pipelines.CancelPipelineBuild(project, running.ID); err != nil || p.Status != "canceling" {
		t.Fatalf("cancel of a running pipeline: %+v %v", p, err)
	}
	if p, _, err := c.Pipelines.CancelPipelineBuild(project, pending.ID); err != nil || p.Status != "canceled" {
		t.Fatalf("cancel of a pending pipeline: %+v %v", p, err)
	}
	jobs, _, _ := c.Jobs.ListPipelineJobs(project, running.ID, nil)
	if jobs[1].Status != "canceling" || jobs[0].Status != "canceled" {
		t.Fatalf("jobs while canceling: %s %s", jobs[1].Status, jobs[0].Status)
	}
	for read, want := range []string{"canceling", "canceled", "canceled"} {
		p, _, err := c.Pipelines.GetPipeline(project, running.ID)
		if err != nil || p.Status != want {
			t.Fatalf("read %d after the cancel: %+v %v; want %s", read+1, p, err, want)
		}
	}
	if st, _ := srv.Pipeline(running.ID); !st.Cancelled {
		t.Fatalf("state %+v", st)
	}
}

// workflow:name names API and trigger pipelines from their inputs or
// variables, and the pipeline list filters by it, by ref, source and time,
// newest first.
func TestWorkflowNameAndPipelineList(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{
		WorkflowName: "no8s $[[ inputs.correlation_id ]]$CORRELATION_ID", TriggerTokens: []string{"glptt-list"}})
	before := time.Now().Add(-time.Minute)
	a, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main"),
		Inputs: gitlab.PipelineInputsOption{"correlation_id": gitlab.NewPipelineInputValue("corr-a")}})
	if err != nil || a.Name != "no8s corr-a" {
		t.Fatalf("created %+v %v", a, err)
	}
	b, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("release"),
		Variables: &[]*gitlab.PipelineVariableOptions{{Key: gitlab.Ptr("CORRELATION_ID"), Value: gitlab.Ptr("corr-b")}}})
	if err != nil || b.Name != "no8s corr-b" {
		t.Fatalf("created %+v %v", b, err)
	}
	tc := triggerClient(t, srv)
	tr, _, err := tc.PipelineTriggers.RunPipelineTrigger(project, &gitlab.RunPipelineTriggerOptions{Ref: gitlab.Ptr("main"),
		Token: gitlab.Ptr("glptt-list"), Inputs: gitlab.PipelineInputsOption{"correlation_id": gitlab.NewPipelineInputValue("corr-t")}})
	if err != nil || tr.Name != "no8s corr-t" {
		t.Fatalf("triggered %+v %v", tr, err)
	}
	tests := []struct {
		name string
		opt  gitlab.ListProjectPipelinesOptions
		want []int64
	}{
		{"all, newest first", gitlab.ListProjectPipelinesOptions{}, []int64{tr.ID, b.ID, a.ID}},
		{"ascending", gitlab.ListProjectPipelinesOptions{Sort: gitlab.Ptr("asc")}, []int64{a.ID, b.ID, tr.ID}},
		{"by name", gitlab.ListProjectPipelinesOptions{Name: gitlab.Ptr("no8s corr-b")}, []int64{b.ID}},
		{"by ref and source", gitlab.ListProjectPipelinesOptions{Ref: gitlab.Ptr("main"), Source: gitlab.Ptr("api")}, []int64{a.ID}},
		{"trigger", gitlab.ListProjectPipelinesOptions{Source: gitlab.Ptr("trigger")}, []int64{tr.ID}},
		{"updated since", gitlab.ListProjectPipelinesOptions{UpdatedAfter: gitlab.Ptr(before)}, []int64{tr.ID, b.ID, a.ID}},
		{"updated later", gitlab.ListProjectPipelinesOptions{UpdatedAfter: gitlab.Ptr(time.Now().Add(time.Hour))}, nil},
	}
	for _, tt := range tests {
		list, resp, err := c.Pipelines.ListProjectPipelines(project, &tt.opt)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []int64
		for _, p := range list {
			got = append(got, p.ID)
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
				break
			}
		}
	}
	list, _, _ := c.Pipelines.ListProjectPipelines(project, &gitlab.ListProjectPipelinesOptions{Name: gitlab.Ptr("no8s corr-a")})
	if len(list) != 1 || list[0].Name != "no8s corr-a" || list[0].WebURL == "" || list[0].Status != "pending" {
		t.Errorf("listed %+v", list)
	}
}

// A Through fault lets the request take effect, then answers the fault: a
// pipeline is created although the client saw a 502.
func TestThroughFault(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}, 1, gitlabtest.Through(gitlabtest.BadGateway()))
	_, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
	if statusOf(err) != http.StatusBadGateway {
		t.Fatalf("create: %v, want the 502", err)
	}
	if n := len(srv.Pipelines()); n != 1 {
		t.Fatalf("%d pipelines, want the one created behind the 502", n)
	}
}

// Through with Hang creates the pipeline and never answers: the client
// sees its context end, and the pipeline exists all the same.
func TestThroughHangFault(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}, 1, gitlabtest.Through(gitlabtest.Hang()))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, _, err := c.Pipelines.CreatePipeline(project, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")}, gitlab.WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("create: %v, want no answer", err)
	}
	if n := len(srv.Pipelines()); n != 1 {
		t.Fatalf("%d pipelines, want the one created behind the missing answer", n)
	}
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := srv.WaitFor(wait, func() bool { return srv.InFlight() == 0 }); err != nil {
		t.Fatal("the server still holds the request")
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Status != 0 {
		t.Fatalf("requests %+v, want the creation, unanswered", reqs)
	}
}

func triggerClient(t *testing.T, srv *gitlabtest.Server) *gitlab.Client {
	t.Helper()
	tc, err := gitlabapi.NewTriggerClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}
