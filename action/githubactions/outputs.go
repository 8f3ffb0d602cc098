package githubactions

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/manifest"
)

// maxOutputsArchive bounds the no8s-outputs archive and the JSON in it:
// outputs are stored with the resource and every history row.
const maxOutputsArchive = 1 << 20

// Job is a job of the run, as the outputs show it.
type Job struct {
	Name        string     `json:"name"`
	Status      string     `json:"status"`
	Conclusion  string     `json:"conclusion"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	URL         string     `json:"html_url,omitempty"`
}

// Artifact is an artifact of the run, as the outputs show it.
type Artifact struct {
	Name        string `json:"name"`
	SizeInBytes int64  `json:"size_in_bytes"`
}

// reservedOutputs are the keys the plugin sets; the workflow's own
// outputs may not replace them.
var reservedOutputs = []string{"run_id", "run_url", "conclusion", "jobs", "artifacts"}

// finish turns a completed run into the result: outputs on success, an
// error naming the run and its failed job otherwise.
func (r *runner) finish(ctx context.Context, op action.Operation, run *github.WorkflowRun, jobs []*github.WorkflowJob) (*action.Result, error) {
	conclusion := run.GetConclusion()
	if conclusion != "success" {
		return nil, fmt.Errorf("workflow run %s concluded %s%s", run.GetHTMLURL(), orUnknown(conclusion), failedJob(jobs))
	}
	arts, err := r.artifacts(ctx, run.GetID())
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, a := range arts {
		if a.GetName() != OutputsArtifact || a.GetExpired() {
			continue
		}
		own, err := r.outputsOf(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("workflow run %s: artifact %s: %w", run.GetHTMLURL(), OutputsArtifact, err)
		}
		for k, v := range own {
			if !slices.Contains(reservedOutputs, k) {
				out[k] = v
			}
		}
	}
	out["run_id"] = run.GetID()
	out["run_url"] = run.GetHTMLURL()
	out["conclusion"] = conclusion
	js := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		js = append(js, Job{Name: j.GetName(), Status: j.GetStatus(), Conclusion: j.GetConclusion(),
			StartedAt: timeOf(j.StartedAt), CompletedAt: timeOf(j.CompletedAt), URL: j.GetHTMLURL()})
	}
	out["jobs"] = js
	as := make([]Artifact, 0, len(arts))
	for _, a := range arts {
		as = append(as, Artifact{Name: a.GetName(), SizeInBytes: a.GetSizeInBytes()})
	}
	out["artifacts"] = as
	outputs, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("workflow run %s succeeded", run.GetHTMLURL())
	return &action.Result{Outputs: outputs, Message: msg, Conditions: []manifest.Condition{{Type: ConditionType,
		Status: manifest.ConditionTrue, Reason: "Succeeded", Message: fmt.Sprintf("%s: run %s succeeded", op, run.GetHTMLURL())}}}, nil
}

// artifacts lists the run's artifacts.
func (r *runner) artifacts(ctx context.Context, runID int64) ([]*github.Artifact, error) {
	var out []*github.Artifact
	opts := &github.ListOptions{PerPage: 100}
	for page := 1; page <= 10; page++ {
		opts.Page = page
		var list *github.ArtifactList
		err := r.retry.Call(ctx, func() (resp *github.Response, err error) {
			list, resp, err = r.client.Actions.ListWorkflowRunArtifacts(ctx, r.owner, r.repo, runID, opts)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list the artifacts of run %d: %w", runID, err)
		}
		out = append(out, list.Artifacts...)
		if len(list.Artifacts) < opts.PerPage {
			break
		}
	}
	return out, nil
}

// outputsOf downloads the outputs artifact and decodes the JSON object of
// its one JSON file.
func (r *runner) outputsOf(ctx context.Context, a *github.Artifact) (map[string]any, error) {
	if a.GetSizeInBytes() > maxOutputsArchive {
		return nil, fmt.Errorf("%d bytes, over the limit of %d", a.GetSizeInBytes(), maxOutputsArchive)
	}
	data, err := r.downloadArchive(ctx, a.GetID())
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("not a zip archive: %w", err)
	}
	var jsonFiles []*zip.File
	for _, f := range zr.File {
		if strings.EqualFold(path.Ext(f.Name), ".json") {
			jsonFiles = append(jsonFiles, f)
		}
	}
	if len(jsonFiles) != 1 {
		return nil, fmt.Errorf("want one .json file in it, found %d", len(jsonFiles))
	}
	f, err := jsonFiles[0].Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxOutputsArchive+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxOutputsArchive {
		return nil, fmt.Errorf("%s: over %d bytes", jsonFiles[0].Name, maxOutputsArchive)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%s: want a JSON object: %v", jsonFiles[0].Name, err)
	}
	return obj, nil
}

// downloadArchive fetches an artifact's zip: GitHub answers with a signed
// URL, valid for a minute, that is fetched without the token. The two are
// retried together, since a retry needs a fresh URL.
func (r *runner) downloadArchive(ctx context.Context, artifactID int64) ([]byte, error) {
	var lastErr error
	for attempt := range 4 {
		if attempt > 0 {
			if err := githubapi.Sleep(ctx, time.Duration(attempt)*r.pollInterval); err != nil {
				return nil, err
			}
		}
		var where *url.URL
		err := r.retry.Call(ctx, func() (*github.Response, error) {
			u, resp, err := r.client.Actions.DownloadArtifact(ctx, r.owner, r.repo, artifactID, 0)
			where = u
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("download: %w", err)
		}
		// The query holds the URL's signature: never in a message.
		shown := where.Scheme + "://" + where.Host + where.Path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, where.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("download %s: bad URL", shown)
		}
		resp, err := r.download.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			lastErr = fmt.Errorf("download %s: connection failed", shown)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxOutputsArchive+1))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			lastErr = fmt.Errorf("download %s: %s", shown, resp.Status)
			continue
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("download %s: %s", shown, resp.Status)
		case err != nil:
			lastErr = fmt.Errorf("download %s: reading failed", shown)
			continue
		case len(data) > maxOutputsArchive:
			return nil, fmt.Errorf("archive over %d bytes", maxOutputsArchive)
		}
		return data, nil
	}
	return nil, lastErr
}

// failedJob names the first failed job and its failed step.
func failedJob(jobs []*github.WorkflowJob) string {
	for _, j := range jobs {
		switch j.GetConclusion() {
		case "failure", "timed_out", "cancelled":
		default:
			continue
		}
		msg := fmt.Sprintf("; job %q %s", j.GetName(), j.GetConclusion())
		for _, s := range j.Steps {
			if s.GetConclusion() == "failure" {
				msg += fmt.Sprintf(" at step %q", s.GetName())
				break
			}
		}
		if u := j.GetHTMLURL(); u != "" {
			msg += " (" + u + ")"
		}
		return msg
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "without a conclusion"
	}
	return s
}

func timeOf(t *github.Timestamp) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	v := t.UTC()
	return &v
}
