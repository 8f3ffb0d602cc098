package githubtest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
)

// client is go-github's client for srv, at the enterprise-style base URL
// (with /api/v3/) or at the root like api.github.com.
func client(t *testing.T, srv *githubtest.Server, token string, enterprise bool) *github.Client {
	t.Helper()
	c := github.NewClient(nil).WithAuthToken(token)
	if enterprise {
		var err error
		c, err = c.WithEnterpriseURLs(srv.URL, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.BaseURL.String(); got != srv.EnterpriseURL() {
			t.Fatalf("base URL %s, want %s", got, srv.EnterpriseURL())
		}
		return c
	}
	base, err := c.BaseURL.Parse(srv.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = base
	return c
}

// dispatchBody is the dispatch body with return_run_details, which go-github
// v60's CreateWorkflowDispatchEventRequest lacks.
type dispatchBody struct {
	Ref              string         `json:"ref"`
	Inputs           map[string]any `json:"inputs,omitempty"`
	ReturnRunDetails bool           `json:"return_run_details,omitempty"`
}

type runDetails struct {
	WorkflowRunID int64  `json:"workflow_run_id"`
	RunURL        string `json:"run_url"`
	HTMLURL       string `json:"html_url"`
}

func dispatch(ctx context.Context, c *github.Client, o githubtest.Options, body dispatchBody) (runDetails, *github.Response, error) {
	var d runDetails
	req, err := c.NewRequest("POST", fmt.Sprintf("repos/%s/%s/actions/workflows/%s/dispatches", o.Owner, o.Repo, o.Workflow), body)
	if err != nil {
		return d, nil, err
	}
	resp, err := c.Do(ctx, req, &d)
	return d, resp, err
}

func errorResponse(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("error %v (%T), want *github.ErrorResponse", err, err)
	}
	if er.Response.StatusCode != status {
		t.Fatalf("status %d, want %d: %v", er.Response.StatusCode, status, err)
	}
	return er
}

func TestDispatchWithRunDetailsAndFollowTheRun(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: true})
	o := srv.Options()
	c := client(t, srv, o.Token, true)
	ctx := context.Background()

	d, resp, err := dispatch(ctx, c, o, dispatchBody{Ref: "main", ReturnRunDetails: true,
		Inputs: map[string]any{"correlation_id": "abc123", "operation": "apply"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if resp.Rate.Limit != 5000 || resp.Rate.Remaining <= 0 || resp.Rate.Reset.IsZero() {
		t.Fatalf("rate %+v", resp.Rate)
	}
	if resp.Header.Get("X-RateLimit-Resource") != "core" {
		t.Fatalf("X-RateLimit-Resource %q", resp.Header.Get("X-RateLimit-Resource"))
	}
	ds := srv.Dispatches()
	if len(ds) != 1 || ds[0].RunID != d.WorkflowRunID || ds[0].Ref != "main" || ds[0].Inputs["correlation_id"] != "abc123" {
		t.Fatalf("dispatches %+v, details %+v", ds, d)
	}
	if want := fmt.Sprintf("%s/api/v3/repos/%s/%s/actions/runs/%d", srv.URL, o.Owner, o.Repo, d.WorkflowRunID); d.RunURL != want {
		t.Fatalf("run_url %s, want %s", d.RunURL, want)
	}
	if want := fmt.Sprintf("https://github.com/%s/%s/actions/runs/%d", o.Owner, o.Repo, d.WorkflowRunID); d.HTMLURL != want {
		t.Fatalf("html_url %s, want %s", d.HTMLURL, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Authorization != "Bearer "+o.Token || !strings.Contains(reqs[0].Body, `"return_run_details":true`) {
		t.Fatalf("requests %+v", reqs)
	}

	// The default script: queued, in progress, completed on the third read.
	for i, want := range []struct{ status, conclusion, job, step0, step1 string }{
		{"queued", "", "queued", "queued", "queued"},
		{"in_progress", "", "in_progress", "in_progress", "queued"},
		{"completed", "success", "completed", "completed", "completed"},
	} {
		run, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, d.WorkflowRunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.GetStatus() != want.status || run.GetConclusion() != want.conclusion {
			t.Fatalf("read %d: %s/%s, want %s/%s", i+1, run.GetStatus(), run.GetConclusion(), want.status, want.conclusion)
		}
		if run.GetName() != "no8s abc123" || run.GetDisplayTitle() != "no8s abc123" || run.GetEvent() != "workflow_dispatch" ||
			run.GetHeadBranch() != "main" || run.GetWorkflowID() != o.WorkflowID || run.GetRunNumber() != 1 || run.GetRunAttempt() != 1 ||
			run.GetHTMLURL() != d.HTMLURL || run.GetURL() != d.RunURL || run.GetJobsURL() != d.RunURL+"/jobs" ||
			run.GetArtifactsURL() != d.RunURL+"/artifacts" || run.GetCancelURL() != d.RunURL+"/cancel" ||
			run.CreatedAt == nil || run.UpdatedAt == nil || run.RunStartedAt == nil {
			t.Fatalf("run %+v", run)
		}
		jobs, _, err := c.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, d.WorkflowRunID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if jobs.GetTotalCount() != 1 || len(jobs.Jobs) != 1 || len(jobs.Jobs[0].Steps) != 2 {
			t.Fatalf("jobs %+v", jobs)
		}
		j := jobs.Jobs[0]
		if j.GetName() != "apply" || j.GetRunID() != d.WorkflowRunID || j.GetStatus() != want.job ||
			j.Steps[0].GetStatus() != want.step0 || j.Steps[1].GetStatus() != want.step1 || j.Steps[1].GetNumber() != 2 {
			t.Fatalf("read %d: job %s (%s, %s)", i+1, j.GetStatus(), j.Steps[0].GetStatus(), j.Steps[1].GetStatus())
		}
		if want.status == "completed" && (j.GetConclusion() != "success" || j.StartedAt == nil || j.CompletedAt == nil ||
			j.Steps[1].GetConclusion() != "success") {
			t.Fatalf("completed job %+v", j)
		}
		if want.status != "completed" && (j.Conclusion != nil || j.CompletedAt != nil) {
			t.Fatalf("running job %+v", j)
		}
	}
	st, ok := srv.Run(d.WorkflowRunID)
	if !ok || st.Status != "completed" || st.Conclusion != "success" || st.Cancelled || st.Polls != 3 || st.Inputs["operation"] != "apply" {
		t.Fatalf("state %+v", st)
	}
}

func TestDispatchNoContentThenListTheRun(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: true, ListDelay: 2})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)

	resp, err := c.Actions.CreateWorkflowDispatchEventByFileName(ctx, o.Owner, o.Repo, o.Workflow,
		github.CreateWorkflowDispatchEventRequest{Ref: "refs/heads/main", Inputs: map[string]any{"correlation_id": "xyz"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d, want 204", resp.StatusCode)
	}
	opts := &github.ListWorkflowRunsOptions{Event: "workflow_dispatch", Branch: "main", Created: ">=" + since.UTC().Format(time.RFC3339)}
	for i := range 3 {
		runs, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, opts)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if runs.GetTotalCount() != 0 || len(runs.WorkflowRuns) != 0 {
				t.Fatalf("listing %d shows %+v before the delay", i+1, runs)
			}
			continue
		}
		if runs.GetTotalCount() != 1 || len(runs.WorkflowRuns) != 1 || runs.WorkflowRuns[0].GetDisplayTitle() != "no8s xyz" ||
			runs.WorkflowRuns[0].GetID() != srv.Dispatches()[0].RunID || runs.WorkflowRuns[0].GetStatus() != "queued" {
			t.Fatalf("listing %+v", runs)
		}
	}
	q := srv.Requests()[1].Query
	if q.Get("created") != opts.Created || q.Get("event") != "workflow_dispatch" {
		t.Fatalf("query %v", q)
	}
	// Filters that exclude it.
	for _, o2 := range []*github.ListWorkflowRunsOptions{
		{Created: ">=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		{Created: "<" + since.UTC().Format(time.RFC3339)},
		{Event: "push"},
		{Branch: "other"},
		{Status: "completed"},
	} {
		runs, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, o2)
		if err != nil {
			t.Fatal(err)
		}
		if runs.GetTotalCount() != 0 {
			t.Fatalf("%+v: %+v", o2, runs.WorkflowRuns)
		}
	}
	// The workflow by its numeric id.
	runs, _, err := c.Actions.ListWorkflowRunsByID(ctx, o.Owner, o.Repo, o.WorkflowID, &github.ListWorkflowRunsOptions{Status: "queued"})
	if err != nil || runs.GetTotalCount() != 1 {
		t.Fatalf("by id: %+v, %v", runs, err)
	}
}

func TestListNewestFirstInPages(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Minute)
		return now
	}
	srv := githubtest.New(t, githubtest.Options{Now: clock})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := context.Background()
	for i := range 5 {
		if _, err := c.Actions.CreateWorkflowDispatchEventByID(ctx, o.Owner, o.Repo, o.WorkflowID,
			github.CreateWorkflowDispatchEventRequest{Ref: "main", Inputs: map[string]any{"correlation_id": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	ds := srv.Dispatches()
	var got []string
	opts := &github.ListWorkflowRunsOptions{ListOptions: github.ListOptions{PerPage: 2}}
	for {
		runs, resp, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, opts)
		if err != nil {
			t.Fatal(err)
		}
		if runs.GetTotalCount() != 5 {
			t.Fatalf("total %d", runs.GetTotalCount())
		}
		for _, r := range runs.WorkflowRuns {
			got = append(got, r.GetName())
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if want := "no8s 4,no8s 3,no8s 2,no8s 1,no8s 0"; strings.Join(got, ",") != want {
		t.Fatalf("runs %v, want %s", got, want)
	}
	// Created after the third dispatch: the last two.
	runs, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow,
		&github.ListWorkflowRunsOptions{Created: ">" + ds[2].At.Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	if runs.GetTotalCount() != 2 || runs.WorkflowRuns[0].GetID() != ds[4].RunID || runs.WorkflowRuns[1].GetID() != ds[3].RunID {
		t.Fatalf("created filter: %+v", runs.WorkflowRuns)
	}
	runs, _, err = c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow,
		&github.ListWorkflowRunsOptions{Created: ds[1].At.Format(time.RFC3339) + ".." + ds[2].At.Format(time.RFC3339)})
	if err != nil || runs.GetTotalCount() != 2 {
		t.Fatalf("created range: %+v, %v", runs, err)
	}
	_, _, err = c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, &github.ListWorkflowRunsOptions{Created: ">=yesterday"})
	errorResponse(t, err, http.StatusUnprocessableEntity)
}

func TestEnterpriseWithoutRunDetails(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: false})
	o := srv.Options()
	c := client(t, srv, o.Token, true)
	ctx := context.Background()

	_, _, err := dispatch(ctx, c, o, dispatchBody{Ref: "main", ReturnRunDetails: true, Inputs: map[string]any{"correlation_id": "a"}})
	er := errorResponse(t, err, http.StatusUnprocessableEntity)
	if er.Message != "Invalid request.\n\n\"return_run_details\" is not a permitted key." ||
		!strings.Contains(er.DocumentationURL, "enterprise-server@3.19") {
		t.Fatalf("error %+v", er)
	}
	if len(srv.Dispatches()) != 0 {
		t.Fatal("a refused dispatch created a run")
	}
	d, resp, err := dispatch(ctx, c, o, dispatchBody{Ref: "main", Inputs: map[string]any{"correlation_id": "a"}})
	if err != nil || resp.StatusCode != http.StatusNoContent || d.WorkflowRunID != 0 {
		t.Fatalf("without the parameter: %v, %v, %+v", resp, err, d)
	}
	if len(srv.Dispatches()) != 1 {
		t.Fatal("no run")
	}
}

func TestDispatchValidation(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: true})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := context.Background()

	many := map[string]any{}
	for i := range githubtest.MaxInputs + 1 {
		many[fmt.Sprintf("in%d", i)] = "v"
	}
	for _, tc := range []struct {
		name string
		body any
		want string
	}{
		{"non-string input", dispatchBody{Ref: "main", Inputs: map[string]any{"generation": 3}}, "For 'properties/generation', 3 is not a string."},
		{"boolean input", dispatchBody{Ref: "main", Inputs: map[string]any{"dry": true}}, "is not a string"},
		{"no ref", map[string]any{"inputs": map[string]any{}}, `"ref" wasn't supplied.`},
		{"too many inputs", dispatchBody{Ref: "main", Inputs: many}, "No more than 25 properties are allowed; 26 were supplied."},
		{"unknown key", map[string]any{"ref": "main", "extra": 1}, `"extra" is not a permitted key.`},
	} {
		req, err := c.NewRequest("POST", fmt.Sprintf("repos/%s/%s/actions/workflows/%s/dispatches", o.Owner, o.Repo, o.Workflow), tc.body)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Do(ctx, req, nil)
		er := errorResponse(t, err, http.StatusUnprocessableEntity)
		if !strings.Contains(er.Message, tc.want) {
			t.Errorf("%s: message %q, want %q", tc.name, er.Message, tc.want)
		}
	}
	// Twenty-five inputs are fine.
	delete(many, "in0")
	if _, _, err := dispatch(ctx, c, o, dispatchBody{Ref: "main", Inputs: many}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Dispatches()); n != 1 {
		t.Fatalf("%d dispatches, want 1", n)
	}
}

func TestAuthAndNotFound(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: "right"})
	o := srv.Options()
	ctx := context.Background()

	bad := client(t, srv, "wrong", true)
	_, _, err := bad.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, 1)
	er := errorResponse(t, err, http.StatusUnauthorized)
	if er.Message != "Bad credentials" || er.DocumentationURL != "https://docs.github.com/rest" {
		t.Fatalf("error %+v", er)
	}
	anon, _ := github.NewClient(nil).WithEnterpriseURLs(srv.URL, srv.URL)
	_, _, err = anon.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, nil)
	errorResponse(t, err, http.StatusUnauthorized)

	// "token <token>" works as well as Bearer.
	req, _ := http.NewRequest("GET", srv.URL+"/repos/"+o.Owner+"/"+o.Repo+"/actions/workflows/"+o.Workflow, nil)
	req.Header.Set("Authorization", "token right")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token scheme: %s", resp.Status)
	}

	c := client(t, srv, "right", true)
	wf, _, err := c.Actions.GetWorkflowByFileName(ctx, o.Owner, o.Repo, o.Workflow)
	if err != nil || wf.GetID() != o.WorkflowID || wf.GetState() != "active" {
		t.Fatalf("workflow %+v, %v", wf, err)
	}
	for _, call := range []func() error{
		func() error { _, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, 42); return err },
		func() error { _, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, "other", 42); return err },
		func() error {
			_, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, "someone", o.Repo, o.Workflow, nil)
			return err
		},
		func() error {
			_, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, "other.yml", nil)
			return err
		},
		func() error {
			_, err := c.Actions.CreateWorkflowDispatchEventByID(ctx, o.Owner, o.Repo, o.WorkflowID+1,
				github.CreateWorkflowDispatchEventRequest{Ref: "main"})
			return err
		},
		func() error { _, _, err := c.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, 42, nil); return err },
		func() error {
			_, _, err := c.Actions.ListWorkflowRunArtifacts(ctx, o.Owner, o.Repo, 42, nil)
			return err
		},
		func() error { _, err := c.Actions.CancelWorkflowRunByID(ctx, o.Owner, o.Repo, 42); return err },
	} {
		er := errorResponse(t, call(), http.StatusNotFound)
		if er.Message != "Not Found" {
			t.Fatalf("message %q", er.Message)
		}
	}
	// Owner and repository match whatever their case.
	if _, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, strings.ToUpper(o.Owner), o.Repo, o.Workflow, nil); err != nil {
		t.Fatal(err)
	}
}

func TestJobsArtifactsAndDownload(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{"outputs.json": []byte(`{"url":"https://example.com"}`), "logs/plan.txt": []byte("no changes\n")}
	srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: true, Script: func(d githubtest.Dispatch) githubtest.Script {
		return githubtest.Script{Conclusion: "failure", Polls: 3,
			Jobs: []githubtest.Job{
				{Name: "plan", Conclusion: "success", Steps: []string{"checkout", "plan"}},
				{Name: "apply", Steps: []string{"checkout", "apply", "upload"}},
			},
			Artifacts: []githubtest.Artifact{{Name: "no8s-outputs", Files: files}}}
	}})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := context.Background()
	d, _, err := dispatch(ctx, c, o, dispatchBody{Ref: "main", ReturnRunDetails: true})
	if err != nil {
		t.Fatal(err)
	}
	id := d.WorkflowRunID
	if !strings.HasPrefix(d.RunURL, srv.URL+"/repos/") {
		t.Fatalf("run_url %s", d.RunURL)
	}

	for range 3 {
		run, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, id)
		if err != nil || run.GetStatus() == "completed" {
			t.Fatalf("completed early: %v %v", run.GetStatus(), err)
		}
		arts, _, err := c.Actions.ListWorkflowRunArtifacts(ctx, o.Owner, o.Repo, id, nil)
		if err != nil || arts.GetTotalCount() != 0 {
			t.Fatalf("artifacts of a running run: %+v %v", arts, err)
		}
	}
	jobs, _, err := c.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, id, &github.ListWorkflowJobsOptions{Filter: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	if jobs.Jobs[0].GetStatus() != "in_progress" || jobs.Jobs[1].GetStatus() != "queued" || jobs.Jobs[1].StartedAt != nil {
		t.Fatalf("running jobs %s %s", jobs.Jobs[0].GetStatus(), jobs.Jobs[1].GetStatus())
	}
	run, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, id)
	if err != nil || run.GetStatus() != "completed" || run.GetConclusion() != "failure" {
		t.Fatalf("run %s/%s %v", run.GetStatus(), run.GetConclusion(), err)
	}
	jobs, _, err = c.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs.Jobs {
		s := j.GetName() + ":" + j.GetStatus() + "/" + j.GetConclusion()
		for _, st := range j.Steps {
			s += " " + st.GetName() + "=" + st.GetConclusion()
		}
		got = append(got, s)
		if !strings.HasPrefix(j.GetHTMLURL(), run.GetHTMLURL()+"/job/") {
			t.Fatalf("job html_url %s", j.GetHTMLURL())
		}
	}
	if want := "plan:completed/success checkout=success plan=success|apply:completed/failure checkout=success apply=success upload=failure"; strings.Join(got, "|") != want {
		t.Fatalf("jobs\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}

	arts, _, err := c.Actions.ListWorkflowRunArtifacts(ctx, o.Owner, o.Repo, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if arts.GetTotalCount() != 1 || len(arts.Artifacts) != 1 {
		t.Fatalf("artifacts %+v", arts)
	}
	a := arts.Artifacts[0]
	if a.GetName() != "no8s-outputs" || a.GetExpired() || a.GetWorkflowRun().GetID() != id || a.GetSizeInBytes() <= 0 ||
		a.GetArchiveDownloadURL() != a.GetURL()+"/zip" || a.ExpiresAt == nil || a.GetNodeID() == "" {
		t.Fatalf("artifact %+v", a)
	}

	u, resp, err := c.Actions.DownloadArtifact(ctx, o.Owner, o.Repo, a.GetID(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusFound || u.Query().Get("token") == "" || !strings.HasPrefix(u.String(), srv.URL+"/_downloads/") {
		t.Fatalf("download URL %s (%d)", u, resp.StatusCode)
	}
	// The signed URL needs no Authorization header.
	dl, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(dl.Body)
	dl.Body.Close()
	if err != nil || dl.StatusCode != http.StatusOK || int64(len(data)) != a.GetSizeInBytes() {
		t.Fatalf("download: %s, %d bytes, %v", dl.Status, len(data), err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != len(files) {
		t.Fatalf("%d files in the archive", len(zr.File))
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(b, files[f.Name]) {
			t.Fatalf("%s: %q", f.Name, b)
		}
	}
	// Without its token the URL is refused.
	q := u.Query()
	q.Set("token", "forged")
	u.RawQuery = q.Encode()
	dl, err = http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	dl.Body.Close()
	if dl.StatusCode != http.StatusForbidden {
		t.Fatalf("forged token: %s", dl.Status)
	}
	// An unknown artifact: go-github's DownloadArtifact reports any
	// status but 302 as a plain error, not an *ErrorResponse.
	_, resp, err = c.Actions.DownloadArtifact(ctx, o.Owner, o.Repo, a.GetID()+1000, 1)
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown artifact: %v, %v", resp, err)
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) {
		t.Fatalf("go-github now types DownloadArtifact errors: %v", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Script: func(githubtest.Dispatch) githubtest.Script {
		return githubtest.Script{Never: true, Jobs: []githubtest.Job{{Name: "apply", Steps: []string{"one", "two"}}},
			Artifacts: []githubtest.Artifact{{Name: "x", Files: map[string][]byte{"a": []byte("a")}}}}
	}})
	o := srv.Options()
	c := client(t, srv, o.Token, true)
	ctx := context.Background()
	if _, err := c.Actions.CreateWorkflowDispatchEventByFileName(ctx, o.Owner, o.Repo, o.Workflow,
		github.CreateWorkflowDispatchEventRequest{Ref: "main"}); err != nil {
		t.Fatal(err)
	}
	id := srv.Dispatches()[0].RunID
	for range 10 {
		run, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, id)
		if err != nil || run.GetStatus() == "completed" {
			t.Fatalf("run %s, %v", run.GetStatus(), err)
		}
	}
	// go-github v60 reports 202 Accepted as an *AcceptedError.
	resp, err := c.Actions.CancelWorkflowRunByID(ctx, o.Owner, o.Repo, id)
	var accepted *github.AcceptedError
	if !errors.As(err, &accepted) || resp.StatusCode != http.StatusAccepted || string(accepted.Raw) != "{}" {
		t.Fatalf("cancel: %v, %v", resp, err)
	}
	if got := srv.Cancelled(); len(got) != 1 || got[0] != id {
		t.Fatalf("cancelled %v", got)
	}
	st, _ := srv.Run(id)
	if st.Status != "completed" || st.Conclusion != "cancelled" || !st.Cancelled {
		t.Fatalf("state %+v", st)
	}
	run, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, id)
	if err != nil || run.GetStatus() != "completed" || run.GetConclusion() != "cancelled" {
		t.Fatalf("run %s/%s, %v", run.GetStatus(), run.GetConclusion(), err)
	}
	jobs, _, err := c.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := jobs.Jobs[0]
	if j.GetConclusion() != "cancelled" || j.Steps[0].GetConclusion() != "cancelled" || j.Steps[1].GetConclusion() != "skipped" {
		t.Fatalf("job %s: %s %s", j.GetConclusion(), j.Steps[0].GetConclusion(), j.Steps[1].GetConclusion())
	}
	arts, _, err := c.Actions.ListWorkflowRunArtifacts(ctx, o.Owner, o.Repo, id, nil)
	if err != nil || arts.GetTotalCount() != 0 {
		t.Fatalf("artifacts of a cancelled run: %+v, %v", arts, err)
	}
	_, err = c.Actions.CancelWorkflowRunByID(ctx, o.Owner, o.Repo, id)
	er := errorResponse(t, err, http.StatusConflict)
	if er.Message != "Cannot cancel a workflow run that is completed." {
		t.Fatalf("message %q", er.Message)
	}
	if len(srv.Cancelled()) != 1 {
		t.Fatal("a refused cancel counted")
	}

	// Finish ends a run that never ends by itself.
	if _, err := c.Actions.CreateWorkflowDispatchEventByFileName(ctx, o.Owner, o.Repo, o.Workflow,
		github.CreateWorkflowDispatchEventRequest{Ref: "main"}); err != nil {
		t.Fatal(err)
	}
	id2 := srv.Dispatches()[1].RunID
	if !srv.Finish(id2, "success") || srv.Finish(id2, "success") {
		t.Fatal("Finish")
	}
	arts, _, err = c.Actions.ListWorkflowRunArtifacts(ctx, o.Owner, o.Repo, id2, nil)
	if err != nil || arts.GetTotalCount() != 1 {
		t.Fatalf("artifacts of a finished run: %+v, %v", arts, err)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	reset := time.Now().Add(3 * time.Second).Truncate(time.Second)
	for _, tc := range []struct {
		name  string
		fault githubtest.Fault
		check func(t *testing.T, err error)
	}{
		{"secondary", githubtest.SecondaryRateLimit(90 * time.Second), func(t *testing.T, err error) {
			var e *github.AbuseRateLimitError
			if !errors.As(err, &e) || e.RetryAfter == nil || *e.RetryAfter != 90*time.Second || e.Response.StatusCode != http.StatusForbidden {
				t.Fatalf("error %v (%T)", err, err)
			}
		}},
		{"primary", githubtest.PrimaryRateLimit(reset), func(t *testing.T, err error) {
			var e *github.RateLimitError
			if !errors.As(err, &e) || !e.Rate.Reset.Time.Equal(reset) || e.Rate.Remaining != 0 || e.Rate.Limit != 5000 ||
				e.Message != "API rate limit exceeded for user ID 1." {
				t.Fatalf("error %v (%T)", err, err)
			}
		}},
		{"too many requests", githubtest.TooManyRequests(30 * time.Second), func(t *testing.T, err error) {
			er := errorResponse(t, err, http.StatusTooManyRequests)
			if er.Response.Header.Get("Retry-After") != "30" {
				t.Fatalf("Retry-After %q", er.Response.Header.Get("Retry-After"))
			}
		}},
		{"bad gateway", githubtest.BadGateway(), func(t *testing.T, err error) {
			er := errorResponse(t, err, http.StatusBadGateway)
			if !strings.HasPrefix(er.Response.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("content type %q", er.Response.Header.Get("Content-Type"))
			}
		}},
		{"bad credentials", githubtest.BadCredentials(), func(t *testing.T, err error) {
			if er := errorResponse(t, err, http.StatusUnauthorized); er.Message != "Bad credentials" {
				t.Fatalf("message %q", er.Message)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{})
			o := srv.Options()
			c := client(t, srv, o.Token, true)
			ctx := context.Background()
			if _, err := c.Actions.CreateWorkflowDispatchEventByFileName(ctx, o.Owner, o.Repo, o.Workflow,
				github.CreateWorkflowDispatchEventRequest{Ref: "main"}); err != nil {
				t.Fatal(err)
			}
			id := srv.Dispatches()[0].RunID
			srv.FailNext(githubtest.Match{Method: "GET", PathSuffix: "/jobs"}, 2, tc.fault)
			// Other requests pass.
			if _, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, id); err != nil {
				t.Fatal(err)
			}
			// A fresh client for each faulted call: go-github remembers
			// rate limits and would refuse the second call itself.
			for range 2 {
				fresh := client(t, srv, o.Token, true)
				_, _, err := fresh.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, id, nil)
				tc.check(t, err)
			}
			jobs, _, err := c.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, id, nil)
			if err != nil || jobs.GetTotalCount() != 1 {
				t.Fatalf("after the faults: %v", err)
			}
			if st, _ := srv.Run(id); st.Polls != 1 {
				t.Fatalf("polls %d", st.Polls)
			}
		})
	}
}

// go-github v60 keeps the rate limits it saw and refuses calls by itself,
// without a request, until they pass.
func TestGoGithubRemembersRateLimits(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := context.Background()

	srv.FailNext(githubtest.Match{}, 1, githubtest.PrimaryRateLimit(time.Now().Add(time.Hour)))
	_, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, nil)
	var rl *github.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("error %v", err)
	}
	n := len(srv.Requests())
	_, _, err = c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, nil)
	if !errors.As(err, &rl) || len(srv.Requests()) != n {
		t.Fatalf("second call: %v, %d requests, want %d", err, len(srv.Requests()), n)
	}

	c = client(t, srv, o.Token, false)
	srv.FailNext(githubtest.Match{}, 1, githubtest.SecondaryRateLimit(time.Hour))
	_, _, err = c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, nil)
	var ab *github.AbuseRateLimitError
	if !errors.As(err, &ab) {
		t.Fatalf("error %v", err)
	}
	n = len(srv.Requests())
	_, _, err = c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, nil)
	if !errors.As(err, &ab) || len(srv.Requests()) != n {
		t.Fatalf("second call: %v, %d requests, want %d", err, len(srv.Requests()), n)
	}

	// A 429 is remembered by nothing.
	c = client(t, srv, o.Token, false)
	srv.FailNext(githubtest.Match{}, 1, githubtest.TooManyRequests(time.Hour))
	_, _, err = c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, nil)
	errorResponse(t, err, http.StatusTooManyRequests)
	if _, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, nil); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentDispatches(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: true, Script: func(d githubtest.Dispatch) githubtest.Script {
		return githubtest.Script{Polls: 1, Jobs: []githubtest.Job{{Name: "apply", Steps: []string{"go"}}},
			Artifacts: []githubtest.Artifact{{Name: "out", Files: map[string][]byte{"id": []byte(d.Inputs["correlation_id"])}}}}
	}})
	o := srv.Options()
	c := client(t, srv, o.Token, true)
	ctx := context.Background()
	const n = 20
	ids := make([]int64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			corr := fmt.Sprintf("c%02d", i)
			d, _, err := dispatch(ctx, c, o, dispatchBody{Ref: "main", ReturnRunDetails: true, Inputs: map[string]any{"correlation_id": corr}})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = d.WorkflowRunID
			for {
				run, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, d.WorkflowRunID)
				if err != nil {
					errs <- err
					return
				}
				if run.GetName() != "no8s "+corr {
					errs <- fmt.Errorf("run %d named %q, want %q", d.WorkflowRunID, run.GetName(), "no8s "+corr)
					return
				}
				if _, _, err := c.Actions.ListWorkflowJobs(ctx, o.Owner, o.Repo, d.WorkflowRunID, nil); err != nil {
					errs <- err
					return
				}
				if run.GetStatus() == "completed" {
					break
				}
			}
			_ = srv.Requests()
			_ = srv.Dispatches()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[int64]bool{}
	for _, id := range ids {
		if id == 0 || seen[id] {
			t.Fatalf("ids %v", ids)
		}
		seen[id] = true
		if st, ok := srv.Run(id); !ok || st.Conclusion != "success" {
			t.Fatalf("run %d: %+v", id, st)
		}
	}
	if len(srv.Dispatches()) != n {
		t.Fatalf("%d dispatches", len(srv.Dispatches()))
	}
	runs, _, err := c.Actions.ListWorkflowRunsByFileName(ctx, o.Owner, o.Repo, o.Workflow, &github.ListWorkflowRunsOptions{ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil || runs.GetTotalCount() != n || len(runs.WorkflowRuns) != n {
		t.Fatalf("listing: %v", err)
	}
	numbers := map[int]bool{}
	for _, r := range runs.WorkflowRuns {
		numbers[r.GetRunNumber()] = true
	}
	if len(numbers) != n {
		t.Fatalf("run numbers not distinct: %v", numbers)
	}
}

// TestCancelTakesPolls: with CancelPolls, a cancelled run is still in
// progress for that many reads, as on GitHub while its jobs stop; a second
// cancel meanwhile is accepted again.
func TestCancelTakesPolls(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{CancelPolls: 2, Script: func(githubtest.Dispatch) githubtest.Script {
		return githubtest.Script{Never: true, Jobs: []githubtest.Job{{Name: "apply", Steps: []string{"one"}}}}
	}})
	o := srv.Options()
	c := client(t, srv, o.Token, false)
	ctx := t.Context()
	if _, err := c.Actions.CreateWorkflowDispatchEventByFileName(ctx, o.Owner, o.Repo, o.Workflow,
		github.CreateWorkflowDispatchEventRequest{Ref: "main"}); err != nil {
		t.Fatal(err)
	}
	id := srv.Dispatches()[0].RunID
	var statuses []string
	for i := range 4 {
		if i == 1 || i == 2 {
			var accepted *github.AcceptedError
			if _, err := c.Actions.CancelWorkflowRunByID(ctx, o.Owner, o.Repo, id); !errors.As(err, &accepted) {
				t.Fatalf("cancel %d: %v", i, err)
			}
		}
		run, _, err := c.Actions.GetWorkflowRunByID(ctx, o.Owner, o.Repo, id)
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, run.GetStatus()+"/"+run.GetConclusion())
	}
	if want := []string{"queued/", "queued/", "completed/cancelled", "completed/cancelled"}; !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	if got := srv.Cancelled(); len(got) != 1 || got[0] != id {
		t.Errorf("cancelled %v, want [%d] once", got, id)
	}
}

// Through lets a dispatch take effect: answered 502 (a gateway that timed
// out), or never answered (Hang), the run exists all the same. A fault
// without Through changes nothing, however long it holds the request.
func TestThroughFaults(t *testing.T) {
	t.Parallel()
	dispatches := githubtest.Match{Method: "POST", PathSuffix: "/dispatches"}
	for _, tc := range []struct {
		name   string
		fault  githubtest.Fault
		runs   int
		status int // the answer the server records; 0 for none
	}{
		{"answered 502", githubtest.Through(githubtest.BadGateway()), 1, http.StatusBadGateway},
		{"never answered", githubtest.Through(githubtest.Hang()), 1, 0},
		{"answered too late", githubtest.Through(githubtest.Slow(time.Minute)), 1, 0},
		{"held back, not through", githubtest.Hang(), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: true})
			o := srv.Options()
			srv.FailNext(dispatches, 1, tc.fault)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, _, err := dispatch(ctx, client(t, srv, o.Token, false), o, dispatchBody{Ref: "main", ReturnRunDetails: true})
			if tc.status == 0 && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("dispatch: %v, want no answer", err)
			}
			if tc.status != 0 {
				errorResponse(t, err, tc.status)
			}
			if n := len(srv.Dispatches()); n != tc.runs {
				t.Fatalf("%d runs, want %d", n, tc.runs)
			}
			// The server records the request once it gave up on it.
			wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
			defer stop()
			if err := srv.WaitFor(wait, func() bool { return len(srv.Requests()) == 1 }); err != nil {
				t.Fatal("the server still holds the request")
			}
			reqs := srv.Requests()
			if len(reqs) != 1 || reqs[0].Status != tc.status {
				t.Fatalf("requests %+v, want the dispatch with status %d", reqs, tc.status)
			}
		})
	}
	t.Run("slow", func(t *testing.T) {
		t.Parallel()
		srv := githubtest.New(t, githubtest.Options{ReturnRunDetails: true})
		o := srv.Options()
		srv.FailNext(dispatches, 1, githubtest.Slow(50*time.Millisecond))
		start := time.Now()
		d, _, err := dispatch(t.Context(), client(t, srv, o.Token, false), o, dispatchBody{Ref: "main", ReturnRunDetails: true})
		if err != nil || d.WorkflowRunID != srv.Dispatches()[0].RunID {
			t.Fatalf("dispatch: %+v, %v", d, err)
		}
		if took := time.Since(start); took < 50*time.Millisecond {
			t.Fatalf("answered after %s, want the delay", took)
		}
	})
}
