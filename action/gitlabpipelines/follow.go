package gitlabpipelines

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/manifest"
)

// step is a job or a bridge (trigger job) of the pipeline or of one of its
// child pipelines.
type step struct {
	ID                  int64
	Name, Stage, Status string
	FailureReason       string
	AllowFailure        bool
	WebURL              string
	// ProjectID and PipelineID are the pipeline's the step belongs to: a
	// multi-project trigger's child runs in another project.
	ProjectID, PipelineID int64
	// ChildURL is the web URL of the child pipeline the step belongs to;
	// "" for a step of the pipeline itself.
	ChildURL string
	// Bridge marks a trigger job; Downstream is its pipeline, nil until
	// GitLab created it.
	Bridge     bool
	Downstream *gitlab.PipelineInfo
	// Archive says the job uploaded an artifacts archive.
	Archive bool
}

// Bounds of what is read of one pipeline.
const (
	// maxDepth is how deep child pipelines of child pipelines are followed
	// (GitLab allows two levels of nesting).
	maxDepth = 3
	// maxPages bounds the pages of 100 jobs read per pipeline.
	maxPages = 10
	// maxPipelines bounds the pipelines, children included, read per
	// poll: each costs two lists at least.
	maxPipelines = 50
)

// walk is what one reading of a pipeline and its children has seen.
type walk struct {
	// seen holds the pipelines read, by id: a downstream pipeline that
	// is one already read (GitLab's answer loops) is not read again.
	seen map[int64]bool
}

// wait polls the pipeline until it finishes, reporting its current stage
// and job. The interval grows while nothing changes and starts over when
// something does.
func (r *runner) wait(ctx context.Context, pl *gitlab.Pipeline, rep action.Reporter) (*gitlab.Pipeline, []step, error) {
	wait := r.pollInterval
	last := ""
	for {
		cur, err := r.getPipeline(ctx, pl.ProjectID, pl.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("poll pipeline %s: %w", pl.WebURL, r.explain(err))
		}
		steps, err := r.steps(ctx, &walk{seen: map[int64]bool{}}, cur.ProjectID, cur.ID, "", 0)
		if err != nil {
			return nil, nil, fmt.Errorf("pipeline %s: %w", pl.WebURL, err)
		}
		if finished(cur.Status) {
			return cur, steps, nil
		}
		now := describe(cur, steps)
		if now != last {
			rep.Progress(now)
			rep.SetCondition(manifest.Condition{Type: ConditionType, Status: manifest.ConditionUnknown,
				Reason: reasonOf(cur.Status), Message: now})
			last, wait = now, r.pollInterval
		} else {
			wait = min(wait*3/2, r.maxInterval)
		}
		if err := gitlabapi.Sleep(ctx, wait); err != nil {
			return nil, nil, err
		}
	}
}

// steps lists the jobs and bridges of a pipeline in the order GitLab
// created them (stage by stage), each bridge followed by the steps of its
// child pipeline, each pipeline once, at most maxPipelines of them.
func (r *runner) steps(ctx context.Context, w *walk, projectID, pipelineID int64, childURL string, depth int) ([]step, error) {
	w.seen[pipelineID] = true
	var out []step
	opts := &gitlab.ListJobsOptions{ListOptions: gitlab.ListOptions{PerPage: 100}}
	for page := int64(1); page <= maxPages; page++ {
		opts.Page = page
		var jobs []*gitlab.Job
		var resp *gitlab.Response
		err := r.retry.Call(ctx, func() (_ *gitlab.Response, err error) {
			jobs, resp, err = r.client.Jobs.ListPipelineJobs(projectID, pipelineID, opts, gitlab.WithContext(ctx))
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list the jobs of pipeline %d: %w", pipelineID, r.explain(err))
		}
		for _, j := range jobs {
			archive := j.ArtifactsFile.Filename != ""
			for _, a := range j.Artifacts {
				archive = archive || a.FileType == "archive"
			}
			out = append(out, step{ID: j.ID, Name: j.Name, Stage: j.Stage, Status: j.Status, FailureReason: j.FailureReason,
				AllowFailure: j.AllowFailure, WebURL: j.WebURL, ProjectID: projectID, PipelineID: pipelineID, ChildURL: childURL, Archive: archive})
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
	}
	for page := int64(1); page <= maxPages; page++ {
		opts.Page = page
		var bridges []*gitlab.Bridge
		var resp *gitlab.Response
		err := r.retry.Call(ctx, func() (_ *gitlab.Response, err error) {
			bridges, resp, err = r.client.Jobs.ListPipelineBridges(projectID, pipelineID, opts, gitlab.WithContext(ctx))
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list the trigger jobs of pipeline %d: %w", pipelineID, r.explain(err))
		}
		for _, b := range bridges {
			out = append(out, step{ID: b.ID, Name: b.Name, Stage: b.Stage, Status: b.Status, FailureReason: b.FailureReason,
				AllowFailure: b.AllowFailure, WebURL: b.WebURL, ProjectID: projectID, PipelineID: pipelineID, ChildURL: childURL,
				Bridge: true, Downstream: b.DownstreamPipeline})
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
	}
	// GitLab lists newest first; jobs and bridges share one sequence of
	// ids, in the order of their stages.
	slices.SortFunc(out, func(a, b step) int { return cmp.Compare(a.ID, b.ID) })
	if depth+1 >= maxDepth {
		return out, nil
	}
	expanded := make([]step, 0, len(out))
	for _, s := range out {
		expanded = append(expanded, s)
		if !s.Bridge || s.Downstream == nil || s.Downstream.ID <= 0 || w.seen[s.Downstream.ID] || len(w.seen) >= maxPipelines {
			continue
		}
		child, err := r.steps(ctx, w, s.Downstream.ProjectID, s.Downstream.ID, s.Downstream.WebURL, depth+1)
		if err != nil {
			return nil, fmt.Errorf("child pipeline %s: %w", s.Downstream.WebURL, err)
		}
		expanded = append(expanded, child...)
	}
	return expanded, nil
}

// busy ranks what a job may be doing, most telling first: the job that
// runs is the one to show.
var busy = []string{"running", "canceling", "preparing", "pending", "waiting_for_resource", "manual", "scheduled", "created"}

// current is the step to show for an unfinished pipeline: the first by
// the order of busy, then of the pipeline. A bridge counts only until its
// child exists: then the child's jobs are shown.
func current(steps []step) *step {
	for _, st := range busy {
		for i, s := range steps {
			if s.Status == st && (!s.Bridge || s.Downstream == nil) {
				return &steps[i]
			}
		}
	}
	return nil
}

// describe says where the pipeline is: its URL and status, the current
// stage and job with its URL, and what it waits for.
func describe(pl *gitlab.Pipeline, steps []step) string {
	msg := fmt.Sprintf("pipeline %s %s", pl.WebURL, strings.ReplaceAll(pl.Status, "_", " "))
	s := current(steps)
	if s == nil {
		return msg
	}
	msg += fmt.Sprintf(": stage %s, job %s %s (%s)", s.Stage, s.Name, strings.ReplaceAll(s.Status, "_", " "), s.WebURL)
	if s.ChildURL != "" {
		msg += " in child pipeline " + s.ChildURL
	}
	switch s.Status {
	case "manual":
		msg += ": waiting for someone to run it"
	case "waiting_for_resource":
		msg += ": waiting for its resource group"
	}
	return msg
}

// reasonOf is the Pipeline condition's reason for an unfinished status.
func reasonOf(status string) string {
	switch status {
	case "created", "pending", "preparing", "scheduled":
		return "Queued"
	case "waiting_for_resource":
		return "WaitingForResource"
	case "manual":
		return "WaitingForManualJob"
	case "canceling":
		return "Canceling"
	}
	return "InProgress"
}
