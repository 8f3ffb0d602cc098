package githubactions

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/manifest"
)

// Apply implements action.Action.
func (r *runner) Apply(ctx context.Context, req *action.Request) (*action.Result, error) {
	return r.operate(ctx, action.OperationApply, req)
}

// Destroy implements action.Action. It needs nothing but the request, so
// it works the same after the agent restarted.
func (r *runner) Destroy(ctx context.Context, req *action.Request) (*action.Result, error) {
	return r.operate(ctx, action.OperationDestroy, req)
}

// operate dispatches the workflow for op and follows the run to its end.
// When an earlier attempt left a run behind (req.PriorHandle), that run is
// seen to first: followed instead of dispatching when it does the same
// operation for the same generation, cancelled and waited for otherwise,
// so that a resource never has two runs at once.
func (r *runner) operate(ctx context.Context, op action.Operation, req *action.Request) (*action.Result, error) {
	rep := req.Reporter
	if rep == nil {
		rep = action.NoopReporter{}
	}
	// The run gets the configured time; cancelling it afterwards must still
	// be possible, so it has a context of its own.
	runCtx, cancel := context.WithTimeoutCause(ctx, r.timeout, errRunTimeout)
	defer cancel()
	run, err := r.prior(runCtx, op, req, rep)
	switch {
	case err != nil && run == nil:
		// The prior run could not be looked up: err says why (a timeout
		// or cancellation among them) and that it may still run.
		return nil, explain(err)
	case err != nil:
		return nil, r.stopped(ctx, runCtx, run, explain(err))
	}
	if run != nil {
		rep.SetCondition(manifest.Condition{Type: ConditionType, Status: manifest.ConditionUnknown, Reason: "Following",
			Message: "run " + run.GetHTMLURL() + " of an earlier attempt"})
	} else {
		if run, err = r.start(ctx, runCtx, op, req, rep); err != nil {
			return nil, err
		}
		rep.SetCondition(manifest.Condition{Type: ConditionType, Status: manifest.ConditionUnknown, Reason: "Dispatched",
			Message: "run " + run.GetHTMLURL()})
	}
	done, jobs, err := r.wait(runCtx, run.GetID(), rep)
	if err != nil {
		return nil, r.stopped(ctx, runCtx, run, explain(err))
	}
	// The run is over: reading its outputs must not fail because the
	// operation's time is nearly up.
	finishCtx, cancelFinish := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancelFinish()
	return r.finish(finishCtx, op, done, jobs)
}

// start dispatches the workflow for op, finds the run it started and
// records its id as the attempt's handle before anything else, so that an
// agent killed from then on leaves the run to the next attempt.
func (r *runner) start(ctx, runCtx context.Context, op action.Operation, req *action.Request, rep action.Reporter) (*github.WorkflowRun, error) {
	correlation, err := correlationID(req, op)
	if err != nil {
		return nil, err
	}
	inputs := r.inputsFor(op, req, correlation)
	rep.Progress(fmt.Sprintf("dispatching workflow %s on %s/%s@%s", r.workflow, r.owner, r.repo, r.ref))
	since := r.now().Add(-time.Minute)
	run, accepted, err := r.dispatch(runCtx, inputs, correlation)
	if err != nil {
		err = fmt.Errorf("dispatch workflow %s: %w", r.workflow, explain(err))
		if accepted {
			// A run may exist that nobody follows: look once more, on a
			// context of its own, and cancel it if it shows.
			rescueCtx, cancelRescue := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			run, _ = r.find(rescueCtx, correlation, since, 30*time.Second)
			if run != nil {
				// Until it is seen completed, the next attempt must know of it.
				if rerr := action.RecordHandle(rescueCtx, req, strconv.FormatInt(run.GetID(), 10)); rerr != nil {
					r.log.Warn("recording the handle of a run about to be cancelled failed", "run", run.GetID(), "error", rerr)
				}
			}
			cancelRescue()
		}
		return nil, r.stopped(ctx, runCtx, run, err)
	}
	if err := action.RecordHandle(runCtx, req, strconv.FormatInt(run.GetID(), 10)); err != nil {
		// A run nobody could find again must not go on.
		return nil, r.stopped(ctx, runCtx, run, err)
	}
	return run, nil
}

// prior sees to the run an earlier attempt left behind, if any. It returns
// the run to follow instead of dispatching: the prior run when it does the
// same operation for the same generation (still running, or completed, in
// which case its conclusion is this attempt's result: the attempt that
// dispatched it died before it could write it; only a cancelled run, which
// has no result, is dispatched anew). Any other prior run that
// has not completed is cancelled, and prior waits until GitHub reports it
// completed, then returns nil: dispatch anew. A handle GitHub does not
// know (404) is ignored. On error, the run it returns is one that may
// still be running and must be cancelled.
func (r *runner) prior(ctx context.Context, op action.Operation, req *action.Request, rep action.Reporter) (*github.WorkflowRun, error) {
	h := req.PriorHandle
	if h == nil {
		return nil, nil
	}
	id, err := strconv.ParseInt(h.Value, 10, 64)
	if err != nil || id <= 0 {
		r.log.Warn("ignoring a handle that is no workflow run id", "handle", h.Value)
		return nil, nil
	}
	var run *github.WorkflowRun
	err = r.retry.Call(ctx, func() (resp *github.Response, err error) {
		run, resp, err = r.client.Actions.GetWorkflowRunByID(ctx, r.owner, r.repo, id)
		return resp, err
	})
	if ce := (*githubapi.ConfigError)(nil); errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		r.log.Info("the run of an earlier attempt is unknown to GitHub; dispatching anew", "run", id)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up run %d of an earlier attempt: %w (%w)", id, err, action.ErrStillRunning)
	}
	same := h.Operation == op && h.Generation == req.Resource.Generation
	completed := run.GetStatus() == "completed"
	switch {
	case same && completed && run.GetConclusion() == "cancelled":
		// A cancelled run has no result to use: dispatch anew.
		return nil, nil
	case same:
		r.log.Info("following the run of an earlier attempt", "run", id, "status", run.GetStatus(), "conclusion", run.GetConclusion())
		rep.Progress(fmt.Sprintf("following run %s of an earlier attempt", run.GetHTMLURL()))
		return run, nil
	case completed:
		return nil, nil
	}
	r.log.Info("cancelling the run of an earlier attempt before dispatching", "run", id,
		"run operation", h.Operation, "run generation", h.Generation)
	rep.Progress(fmt.Sprintf("cancelling run %s (%s of generation %d) before dispatching", run.GetHTMLURL(), h.Operation, h.Generation))
	if err := r.cancelRun(ctx, id); err != nil {
		return run, fmt.Errorf("cancel run %s of an earlier attempt: %w", run.GetHTMLURL(), err)
	}
	if err := r.awaitCompleted(ctx, id); err != nil {
		return run, fmt.Errorf("wait for cancelled run %s to complete: %w", run.GetHTMLURL(), err)
	}
	return nil, nil
}

// cancelRun asks GitHub to cancel a run. A run that completed meanwhile
// (409) needs no cancelling.
func (r *runner) cancelRun(ctx context.Context, id int64) error {
	err := r.retry.Call(ctx, func() (*github.Response, error) {
		resp, err := r.client.Actions.CancelWorkflowRunByID(ctx, r.owner, r.repo, id)
		var accepted *github.AcceptedError
		if errors.As(err, &accepted) {
			return resp, nil
		}
		return resp, err
	})
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil &&
		(er.Response.StatusCode == http.StatusConflict || er.Response.StatusCode == http.StatusNotFound) {
		// Completed meanwhile, or gone: nothing runs any more.
		return nil
	}
	return err
}

// awaitCompleted polls a run until GitHub reports it completed: a
// cancelled run goes on until its jobs have stopped.
func (r *runner) awaitCompleted(ctx context.Context, id int64) error {
	wait := r.pollInterval
	for {
		var run *github.WorkflowRun
		err := r.retry.Call(ctx, func() (resp *github.Response, err error) {
			run, resp, err = r.client.Actions.GetWorkflowRunByID(ctx, r.owner, r.repo, id)
			return resp, err
		})
		if err != nil {
			return err
		}
		if run.GetStatus() == "completed" {
			return nil
		}
		if err := githubapi.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(wait*3/2, r.maxInterval)
	}
}

// explain gives configuration errors the plugin's own advice.
func explain(err error) error {
	var ce *githubapi.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Status {
	case http.StatusForbidden:
		ce.Hint = "the token in tokenEnv may not run this workflow: it needs actions: write on the repository"
	case http.StatusNotFound:
		ce.Hint = "owner, repo or workflow does not exist, or the token cannot see it"
	case http.StatusUnprocessableEntity:
		ce.Hint = "GitHub refused the dispatch: check ref and that the workflow declares the inputs on workflow_dispatch"
	}
	return err
}

// errRunTimeout is the cause of a run that outlived the timeout setting.
var errRunTimeout = errors.New("the workflow run did not complete within the timeout")

// stopped turns the end of a wait into the operation's error. Whenever the
// plugin stops following a run before it completed (the operation was
// cancelled or timed out, or GitHub could not be asked), the run is
// cancelled through the API first, so that nothing keeps changing the world
// after the agent gave up on it and the next attempt starts no second one
// beside it.
func (r *runner) stopped(ctx, runCtx context.Context, run *github.WorkflowRun, err error) error {
	cause := err
	switch {
	case ctx.Err() != nil:
		cause = context.Cause(ctx)
	case runCtx.Err() != nil:
		cause = context.Cause(runCtx)
	}
	if run == nil {
		if runCtx.Err() != nil {
			return fmt.Errorf("%w (no run was found to cancel)", cause)
		}
		return err
	}
	cancelCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err = r.client.Actions.CancelWorkflowRunByID(cancelCtx, r.owner, r.repo, run.GetID())
	var accepted *github.AcceptedError
	var er *github.ErrorResponse
	// Until GitHub reports the run completed, it may still be changing the
	// world: the handle is kept, so that the next attempt waits for it.
	switch {
	case err == nil, errors.As(err, &accepted):
		// 202: GitHub cancels the run.
		return fmt.Errorf("%w; run %s cancelled (%w)", cause, run.GetHTMLURL(), action.ErrStillRunning)
	case errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusConflict:
		// 409: it completed meanwhile.
		return fmt.Errorf("%w; run %s completed", cause, run.GetHTMLURL())
	default:
		return fmt.Errorf("%w; cancelling run %s failed: %v (%w)", cause, run.GetHTMLURL(), err, action.ErrStillRunning)
	}
}

// correlationID is unique per dispatch (see action.PipelineCorrelationIDFor).
func correlationID(req *action.Request, op action.Operation) (string, error) {
	return action.PipelineCorrelationIDFor(req, op)
}

// inputsFor builds the workflow inputs, under their configured names. Every
// value is a string, as GitHub requires.
func (r *runner) inputsFor(op action.Operation, req *action.Request, correlation string) map[string]any {
	values := action.PipelineValues(req, op, correlation, r.inputs)
	out := make(map[string]any, len(values))
	for k, v := range values {
		out[k] = v
	}
	return out
}

// dispatchRequest is the body of the dispatch endpoint. go-github v60's
// CreateWorkflowDispatchEventRequest has no return_run_details, so the
// request is built with the client's NewRequest.
type dispatchRequest struct {
	Ref              string         `json:"ref"`
	Inputs           map[string]any `json:"inputs,omitempty"`
	ReturnRunDetails bool           `json:"return_run_details,omitempty"`
}

// runDetails is the 200 answer of a dispatch with return_run_details.
type runDetails struct {
	WorkflowRunID int64  `json:"workflow_run_id"`
	RunURL        string `json:"run_url"`
	HTMLURL       string `json:"html_url"`
}

// maxDispatches bounds the dispatches of one operation: a dispatch that
// got a server or network error is only repeated when its run cannot be
// found.
const maxDispatches = 3

// dispatch starts the run and returns it. accepted reports whether GitHub
// took (or may have taken) a dispatch, so that a run may exist even when
// err says it was not found.
//
// A dispatch is not idempotent: GitHub may start the run and still answer
// 5xx, or the connection may drop after it did. So a server or network
// error is not retried blindly; the run is looked for by its correlation
// id first, and the workflow dispatched again only when none shows.
func (r *runner) dispatch(ctx context.Context, inputs map[string]any, correlation string) (run *github.WorkflowRun, accepted bool, err error) {
	path := fmt.Sprintf("repos/%s/%s/actions/workflows/%s/dispatches", url.PathEscape(r.owner), url.PathEscape(r.repo), url.PathEscape(r.workflow))
	since := r.now().Add(-time.Minute) // the server's clock may be behind ours
	once := r.retry
	once.NoServerRetry = true
	for attempt := 1; ; attempt++ {
		withDetails := !r.noRunDetails.Load()
		var details runDetails
		// refused says the last request was not sent, or GitHub answered
		// it and dispatched nothing: a 4xx. A request that got no answer
		// (the operation ended while it was in flight) may have started
		// the run.
		// answered says GitHub answered 2xx: it started a run, whose id
		// the answer may lack or garble.
		refused, answered := false, false
		err := once.Call(ctx, func() (resp *github.Response, err error) {
			req, err := r.client.NewRequest(http.MethodPost, path, &dispatchRequest{Ref: r.ref, Inputs: inputs, ReturnRunDetails: withDetails})
			if err != nil {
				refused = true
				return nil, err
			}
			if withDetails {
				resp, err = r.client.Do(ctx, req, &details)
			} else {
				resp, err = r.client.Do(ctx, req, nil)
			}
			refused = err != nil && resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500
			answered = resp != nil && resp.StatusCode >= 200 && resp.StatusCode < 300
			return resp, err
		})
		var transient *githubapi.TransientError
		switch {
		case err == nil && details.WorkflowRunID > 0:
			return &github.WorkflowRun{ID: github.Int64(details.WorkflowRunID), HTMLURL: github.String(details.HTMLURL),
				URL: github.String(details.RunURL)}, true, nil
		case err == nil, answered:
			// 204, or a 2xx whose body names no run (no id, a zero or
			// negative one, no JSON): the run exists, and a handle that
			// is no run id would be lost to the next attempt. Its name
			// says which it is.
			if err != nil {
				r.log.Warn("GitHub dispatched the workflow, but its answer names no run; looking for it by its name", "workflow", r.workflow, "error", err)
			}
			run, err := r.find(ctx, correlation, since, r.findTimeout)
			return run, true, err
		case withDetails && refusesRunDetails(err):
			// An older GitHub Enterprise refuses the parameter, and
			// dispatched nothing: from now on dispatch without it.
			r.noRunDetails.Store(true)
			attempt--
			continue
		case errors.As(err, &transient):
			run, ferr := r.find(ctx, correlation, since, min(r.findTimeout, time.Minute))
			if ferr == nil {
				return run, true, nil
			}
			if attempt >= maxDispatches || ctx.Err() != nil {
				return nil, true, fmt.Errorf("%w (no run of it found: %v)", err, ferr)
			}
			r.log.Warn("dispatch failed and no run of it showed; dispatching again", "workflow", r.workflow, "error", err)
		default:
			return nil, !refused, err
		}
	}
}

// refusesRunDetails tells a 422 about return_run_details from others.
func refusesRunDetails(err error) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusUnprocessableEntity &&
		strings.Contains(er.Message, "return_run_details")
}

// find looks for the dispatched run by the correlation id in its name,
// until it shows or timeout passes.
func (r *runner) find(ctx context.Context, correlation string, since time.Time, timeout time.Duration) (*github.WorkflowRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := &github.ListWorkflowRunsOptions{Event: "workflow_dispatch", Created: ">=" + since.UTC().Format(time.RFC3339),
		ListOptions: github.ListOptions{PerPage: 100}}
	wait := r.pollInterval
	for {
		for page := 1; page <= 5; page++ {
			opts.Page = page
			var runs *github.WorkflowRuns
			err := r.retry.Call(ctx, func() (resp *github.Response, err error) {
				runs, resp, err = r.client.Actions.ListWorkflowRunsByFileName(ctx, r.owner, r.repo, r.workflow, opts)
				return resp, err
			})
			if err != nil {
				return nil, fmt.Errorf("look for the run of %s: %w", correlation, err)
			}
			for _, run := range runs.WorkflowRuns {
				if strings.Contains(run.GetName(), correlation) || strings.Contains(run.GetDisplayTitle(), correlation) {
					return run, nil
				}
			}
			if len(runs.WorkflowRuns) < opts.PerPage {
				break
			}
		}
		if err := githubapi.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("no run named after %s showed within %s: does the workflow set run-name from the %s input? (%w)",
				correlation, timeout, r.inputs[InputCorrelationID], err)
		}
		wait = min(wait*3/2, r.maxInterval)
	}
}

// wait polls the run until it completes, reporting its current job and
// step. The interval grows while nothing changes and starts over when
// something does.
func (r *runner) wait(ctx context.Context, runID int64, rep action.Reporter) (*github.WorkflowRun, []*github.WorkflowJob, error) {
	wait := r.pollInterval
	last := ""
	for {
		var run *github.WorkflowRun
		err := r.retry.Call(ctx, func() (resp *github.Response, err error) {
			run, resp, err = r.client.Actions.GetWorkflowRunByID(ctx, r.owner, r.repo, runID)
			return resp, err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("poll run %d: %w", runID, err)
		}
		jobs, err := r.jobs(ctx, runID)
		if err != nil {
			return nil, nil, err
		}
		if run.GetStatus() == "completed" {
			return run, jobs, nil
		}
		now := describeProgress(run, jobs)
		if now != last {
			rep.Progress(now)
			rep.SetCondition(manifest.Condition{Type: ConditionType, Status: manifest.ConditionUnknown,
				Reason: reasonOf(run.GetStatus()), Message: now})
			last, wait = now, r.pollInterval
		} else {
			wait = min(wait*3/2, r.maxInterval)
		}
		if err := githubapi.Sleep(ctx, wait); err != nil {
			return nil, nil, err
		}
	}
}

// jobs lists the run's jobs of its latest attempt.
func (r *runner) jobs(ctx context.Context, runID int64) ([]*github.WorkflowJob, error) {
	var out []*github.WorkflowJob
	opts := &github.ListWorkflowJobsOptions{Filter: "latest", ListOptions: github.ListOptions{PerPage: 100}}
	for page := 1; page <= 10; page++ {
		opts.Page = page
		var jobs *github.Jobs
		err := r.retry.Call(ctx, func() (resp *github.Response, err error) {
			jobs, resp, err = r.client.Actions.ListWorkflowJobs(ctx, r.owner, r.repo, runID, opts)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list the jobs of run %d: %w", runID, err)
		}
		out = append(out, jobs.Jobs...)
		if len(jobs.Jobs) < opts.PerPage {
			break
		}
	}
	return out, nil
}

// describeProgress says where the run is: its URL, the job and the step.
func describeProgress(run *github.WorkflowRun, jobs []*github.WorkflowJob) string {
	msg := fmt.Sprintf("run %s %s", run.GetHTMLURL(), strings.ReplaceAll(run.GetStatus(), "_", " "))
	for _, j := range jobs {
		if j.GetStatus() != "in_progress" {
			continue
		}
		msg += ": job " + j.GetName()
		for _, s := range j.Steps {
			if s.GetStatus() == "in_progress" {
				msg += ", step " + s.GetName()
				break
			}
		}
		break
	}
	return msg
}

func reasonOf(status string) string {
	switch status {
	case "queued", "waiting", "requested", "pending":
		return "Queued"
	}
	return "InProgress"
}
