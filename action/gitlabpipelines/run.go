package gitlabpipelines

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi"
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

// operate creates the pipeline for op and follows it to its end. When an
// earlier attempt left a pipeline behind (req.PriorHandle), that pipeline is
// seen to first: followed instead of creating one when it does the same
// operation for the same generation, cancelled and waited for otherwise, so
// that a resource never has two pipelines at once.
func (r *runner) operate(ctx context.Context, op action.Operation, req *action.Request) (_ *action.Result, err error) {
	// GitLab's error answers are quoted in errors, and a GitLab (or a
	// proxy before it) may echo a token in them.
	defer func() {
		if err != nil && r.masker.Contains(err.Error()) {
			err = &maskedError{err: err, text: r.masker.Mask(err.Error())}
		}
	}()
	rep := req.Reporter
	if rep == nil {
		rep = action.NoopReporter{}
	}
	// The pipeline gets the configured time; cancelling it afterwards must
	// still be possible, so it has a context of its own.
	runCtx, cancel := context.WithTimeoutCause(ctx, r.timeout, errTimeout)
	defer cancel()
	pl, err := r.prior(runCtx, op, req, rep)
	switch {
	case err != nil && pl == nil:
		// The prior pipeline could not be looked up: err says why (a
		// timeout or cancellation among them) and that it may still run.
		return nil, err
	case err != nil:
		return nil, r.stopped(ctx, runCtx, pl, err)
	}
	if pl != nil {
		rep.SetCondition(manifest.Condition{Type: ConditionType, Status: manifest.ConditionUnknown, Reason: "Following",
			Message: "pipeline " + pl.WebURL + " of an earlier attempt"})
	} else {
		if pl, err = r.start(ctx, runCtx, op, req, rep); err != nil {
			return nil, err
		}
		rep.SetCondition(manifest.Condition{Type: ConditionType, Status: manifest.ConditionUnknown, Reason: "Created",
			Message: "pipeline " + pl.WebURL})
	}
	done, jobs, err := r.wait(runCtx, pl, rep)
	if err != nil {
		return nil, r.stopped(ctx, runCtx, pl, err)
	}
	// The pipeline is over: reading its outputs must not fail because the
	// operation's time is nearly up.
	finishCtx, cancelFinish := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancelFinish()
	return r.finish(finishCtx, op, done, jobs)
}

// maskedError is an error whose text had a token masked. It unwraps to the
// error itself, so that errors.Is still finds action.ErrStillRunning.
type maskedError struct {
	err  error
	text string
}

func (e *maskedError) Error() string { return e.text }
func (e *maskedError) Unwrap() error { return e.err }

// errTimeout is the cause of a pipeline that outlived the timeout setting.
var errTimeout = errors.New("the pipeline did not finish within the timeout")

// handleOf is the handle of a pipeline: its project's id and its own, so
// that the next attempt finds it even if the project setting changed.
func handleOf(pl *gitlab.Pipeline) string {
	return strconv.FormatInt(pl.ProjectID, 10) + "/" + strconv.FormatInt(pl.ID, 10)
}

// parseHandle reads a handle handleOf wrote.
func parseHandle(h string) (projectID, pipelineID int64, ok bool) {
	p, id, found := strings.Cut(h, "/")
	if !found || !isDigits(p) || !isDigits(id) {
		return 0, 0, false
	}
	projectID, err1 := strconv.ParseInt(p, 10, 64)
	pipelineID, err2 := strconv.ParseInt(id, 10, 64)
	return projectID, pipelineID, err1 == nil && err2 == nil && projectID > 0 && pipelineID > 0
}

// start creates the pipeline for op and records it as the attempt's handle
// before anything else, so that an agent killed from then on leaves the
// pipeline to the next attempt.
func (r *runner) start(ctx, runCtx context.Context, op action.Operation, req *action.Request, rep action.Reporter) (*gitlab.Pipeline, error) {
	correlation, err := correlationID(req, op)
	if err != nil {
		return nil, err
	}
	values := r.valuesFor(op, req, correlation)
	how := "creating"
	if r.trigger != nil {
		how = "triggering"
	}
	rep.Progress(fmt.Sprintf("%s a pipeline on %s@%s", how, r.projectLabel, r.ref))
	since := r.now().Add(-time.Minute) // the server's clock may be behind ours
	pl, taken, err := r.create(runCtx, values, correlation, since)
	if err != nil {
		err = fmt.Errorf("create a pipeline in %s: %w", r.projectLabel, err)
		if taken {
			// A pipeline may exist that nobody follows: look once more,
			// on a context of its own, and cancel it if it shows.
			rescueCtx, cancelRescue := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			pl, _ = r.find(rescueCtx, correlation, since, min(r.findTimeout, 20*time.Second))
			if pl != nil {
				// Until it is seen finished, the next attempt must know of it.
				if rerr := action.RecordHandle(rescueCtx, req, handleOf(pl)); rerr != nil {
					r.log.Warn("recording the handle of a pipeline about to be cancelled failed", "pipeline", pl.ID, "error", rerr)
				}
			}
			cancelRescue()
		}
		return nil, r.stopped(ctx, runCtx, pl, err)
	}
	if err := action.RecordHandle(runCtx, req, handleOf(pl)); err != nil {
		// A pipeline nobody could find again must not go on.
		return nil, r.stopped(ctx, runCtx, pl, fmt.Errorf("record pipeline %s as the attempt's handle: %w", pl.WebURL, err))
	}
	return pl, nil
}

// validPipeline says whether GitLab's answer names a pipeline: a handle
// needs its project and id.
func validPipeline(pl *gitlab.Pipeline) bool {
	return pl != nil && pl.ID > 0 && pl.ProjectID > 0
}

// maxCreates bounds the creations of one operation: a creation that got a
// server or network error is repeated only when its pipeline cannot be
// found.
const maxCreates = 3

// create creates the pipeline and returns it. taken reports whether GitLab
// took (or may have taken) a creation, so that a pipeline may exist even
// when err says it was not found.
//
// A creation is not idempotent, so a server or network error is not
// retried blindly: the pipeline is looked for by its correlation id first,
// and created again only when none shows.
func (r *runner) create(ctx context.Context, values map[string]string, correlation string, since time.Time) (pl *gitlab.Pipeline, taken bool, err error) {
	once := r.retry
	once.NoServerRetry = true
	for attempt := 1; ; attempt++ {
		// refused says GitLab answered the last request, and created
		// nothing: a 4xx. A request that got no answer (the operation
		// ended while it was in flight) may have created the pipeline.
		// created says GitLab answered 2xx: it created a pipeline, which
		// its answer must name.
		refused, created := false, false
		err := once.Call(ctx, func() (resp *gitlab.Response, err error) {
			pl, resp, err = r.createCall(ctx, values)
			refused = err != nil && resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500
			created = resp != nil && resp.StatusCode >= 200 && resp.StatusCode < 300
			return resp, err
		})
		if created && (err != nil || !validPipeline(pl)) {
			// A handle without the pipeline's project and id would be
			// lost to the next attempt: look for it by its name.
			if err == nil {
				err = fmt.Errorf("GitLab's answer names pipeline %d of project %d", pl.ID, pl.ProjectID)
			}
			err = &gitlabapi.TransientError{Err: fmt.Errorf("GitLab created a pipeline, but its answer names none: %w", err)}
		}
		switch {
		case err == nil:
			return pl, true, nil
		case gitlabapi.IsTransient(err):
			found, ferr := r.find(ctx, correlation, since, r.findTimeout)
			if ferr == nil {
				r.log.Info("pipeline creation failed, but the pipeline was created: following it", "pipeline", found.ID, "error", err)
				return found, true, nil
			}
			if attempt >= maxCreates || ctx.Err() != nil {
				return nil, true, fmt.Errorf("%w (no pipeline of it found: %v)", err, ferr)
			}
			r.log.Warn("pipeline creation failed and no pipeline of it showed; creating again", "project", r.projectLabel, "error", err)
		default:
			return nil, !refused, r.explainCreate(err)
		}
	}
}

// createCall sends one creation: through the trigger when there is a
// trigger token, else with the access token.
func (r *runner) createCall(ctx context.Context, values map[string]string) (*gitlab.Pipeline, *gitlab.Response, error) {
	var inputs gitlab.PipelineInputsOption
	if r.pass == PassInputs {
		inputs = make(gitlab.PipelineInputsOption, len(values))
		for k, v := range values {
			inputs[k] = gitlab.NewPipelineInputValue(v)
		}
	}
	if r.trigger != nil {
		opt := &gitlab.RunPipelineTriggerOptions{Ref: gitlab.Ptr(r.ref), Token: gitlab.Ptr(r.triggerValue), Inputs: inputs}
		if r.pass == PassVariables {
			opt.Variables = values
		}
		return r.trigger.PipelineTriggers.RunPipelineTrigger(r.project, opt, gitlab.WithContext(ctx))
	}
	opt := &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr(r.ref), Inputs: inputs}
	if r.pass == PassVariables {
		vars := make([]*gitlab.PipelineVariableOptions, 0, len(values))
		for _, k := range slices.Sorted(maps.Keys(values)) {
			vars = append(vars, &gitlab.PipelineVariableOptions{Key: gitlab.Ptr(k), Value: gitlab.Ptr(values[k]),
				VariableType: gitlab.Ptr(gitlab.EnvVariableType)})
		}
		opt.Variables = &vars
	}
	return r.client.Pipelines.CreatePipeline(r.project, opt, gitlab.WithContext(ctx))
}

// find looks for the pipeline whose name holds the correlation id among the
// ref's pipelines created by API or trigger since since, until it shows or
// timeout passes.
func (r *runner) find(ctx context.Context, correlation string, since time.Time, timeout time.Duration) (*gitlab.Pipeline, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	source := "api"
	if r.trigger != nil {
		source = "trigger"
	}
	opts := &gitlab.ListProjectPipelinesOptions{Ref: gitlab.Ptr(r.ref), Source: gitlab.Ptr(source),
		UpdatedAfter: gitlab.Ptr(since.UTC()), OrderBy: gitlab.Ptr("id"), Sort: gitlab.Ptr("desc"),
		ListOptions: gitlab.ListOptions{PerPage: 100}}
	wait := r.pollInterval
	for {
		for page := int64(1); page <= 5; page++ {
			opts.Page = page
			var list []*gitlab.PipelineInfo
			var resp *gitlab.Response
			err := r.retry.Call(ctx, func() (_ *gitlab.Response, err error) {
				list, resp, err = r.client.Pipelines.ListProjectPipelines(r.project, opts, gitlab.WithContext(ctx))
				return resp, err
			})
			if err != nil {
				return nil, fmt.Errorf("look for the pipeline of %s: %w", correlation, r.explain(err))
			}
			for _, p := range list {
				if p.ID > 0 && p.ProjectID > 0 && strings.Contains(p.Name, correlation) {
					return &gitlab.Pipeline{ID: p.ID, IID: p.IID, ProjectID: p.ProjectID, Status: p.Status, Source: gitlab.PipelineSource(p.Source),
						Ref: p.Ref, SHA: p.SHA, Name: p.Name, WebURL: p.WebURL, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}, nil
				}
			}
			if resp == nil || resp.NextPage == 0 {
				break
			}
		}
		if err := gitlabapi.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("no pipeline named after %s showed within %s: does .gitlab-ci.yml set workflow:name from the %s %s? (%w)",
				correlation, timeout, r.names[InputCorrelationID], strings.TrimSuffix(r.pass, "s"), err)
		}
		wait = min(wait*3/2, r.maxInterval)
	}
}

// prior sees to the pipeline an earlier attempt left behind, if any. It
// returns the pipeline to follow instead of creating one: the prior
// pipeline when it does the same operation for the same generation (still
// going, or finished, in which case its status is this attempt's result:
// the attempt that created it died before it could write it; only a
// canceled or canceling pipeline, which has no result, is created anew,
// once it stopped). Any other prior pipeline that has not finished is
// cancelled, and prior waits until GitLab reports it finished, then
// returns nil: create anew. A handle GitLab does
// not know (404) is ignored. On error, the pipeline it returns is one that
// may still be running and must be cancelled.
func (r *runner) prior(ctx context.Context, op action.Operation, req *action.Request, rep action.Reporter) (*gitlab.Pipeline, error) {
	h := req.PriorHandle
	if h == nil {
		return nil, nil
	}
	project, id, ok := parseHandle(h.Value)
	if !ok {
		r.log.Warn("ignoring a handle that names no pipeline", "handle", h.Value)
		return nil, nil
	}
	pl, err := r.getPipeline(ctx, project, id)
	if ce := (*gitlabapi.ConfigError)(nil); errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		r.log.Info("the pipeline of an earlier attempt is unknown to GitLab; creating anew", "project", project, "pipeline", id)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up pipeline %d of an earlier attempt: %w (%w)", id, r.explain(err), action.ErrStillRunning)
	}
	same := h.Operation == op && h.Generation == req.Resource.Generation
	done := finished(pl.Status)
	switch {
	case same && pl.Status == "canceled":
		// A canceled pipeline has no result to use: create anew.
		return nil, nil
	case same && pl.Status == "canceling":
		// Cancelled (the earlier attempt gave up on it), its jobs still
		// stopping: it will have no result either. Create anew once it
		// has stopped.
		r.log.Info("waiting for the cancelled pipeline of an earlier attempt to stop before creating one", "pipeline", id)
		rep.Progress(fmt.Sprintf("waiting for cancelled pipeline %s of an earlier attempt to stop", pl.WebURL))
		if err := r.awaitFinished(ctx, project, id); err != nil {
			return pl, fmt.Errorf("wait for cancelled pipeline %s to finish: %w", pl.WebURL, err)
		}
		return nil, nil
	case same:
		r.log.Info("following the pipeline of an earlier attempt", "pipeline", id, "status", pl.Status)
		rep.Progress(fmt.Sprintf("following pipeline %s of an earlier attempt", pl.WebURL))
		return pl, nil
	case done:
		return nil, nil
	}
	r.log.Info("cancelling the pipeline of an earlier attempt before creating one", "pipeline", id,
		"pipeline operation", h.Operation, "pipeline generation", h.Generation)
	rep.Progress(fmt.Sprintf("cancelling pipeline %s (%s of generation %d) before creating one", pl.WebURL, h.Operation, h.Generation))
	if _, err := r.cancel(ctx, project, id); err != nil {
		return pl, fmt.Errorf("cancel pipeline %s of an earlier attempt: %w", pl.WebURL, err)
	}
	if err := r.awaitFinished(ctx, project, id); err != nil {
		return pl, fmt.Errorf("wait for cancelled pipeline %s to finish: %w", pl.WebURL, err)
	}
	return nil, nil
}

// getPipeline reads a pipeline.
func (r *runner) getPipeline(ctx context.Context, project, id int64) (*gitlab.Pipeline, error) {
	var pl *gitlab.Pipeline
	err := r.retry.Call(ctx, func() (resp *gitlab.Response, err error) {
		pl, resp, err = r.client.Pipelines.GetPipeline(project, id, gitlab.WithContext(ctx))
		return resp, err
	})
	return pl, err
}

// cancel asks GitLab to cancel a pipeline and returns its status after:
// GitLab answers 200 whatever the state, canceling while jobs stop.
// Cancelling is idempotent, so server errors are retried, a few times.
func (r *runner) cancel(ctx context.Context, project, id int64) (string, error) {
	retry := r.retry
	retry.ServerErrors = 3
	var pl *gitlab.Pipeline
	err := retry.Call(ctx, func() (resp *gitlab.Response, err error) {
		pl, resp, err = r.client.Pipelines.CancelPipelineBuild(project, id, gitlab.WithContext(ctx))
		return resp, err
	})
	if err != nil {
		return "", r.explain(err)
	}
	return pl.Status, nil
}

// awaitFinished polls a pipeline until GitLab reports it finished: a
// cancelled pipeline goes on until its jobs have stopped.
func (r *runner) awaitFinished(ctx context.Context, project, id int64) error {
	wait := r.pollInterval
	for {
		pl, err := r.getPipeline(ctx, project, id)
		if err != nil {
			return r.explain(err)
		}
		if finished(pl.Status) {
			return nil
		}
		if err := gitlabapi.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(wait*3/2, r.maxInterval)
	}
}

// finished says whether a pipeline's status is final. A pipeline waiting
// for a manual job, a resource or a schedule is not: it goes on.
func finished(status string) bool {
	switch status {
	case "success", "failed", "canceled", "skipped":
		return true
	}
	return false
}

// explainCreate gives a creation's configuration errors the plugin's own
// advice.
func (r *runner) explainCreate(err error) error {
	var ce *gitlabapi.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Status {
	case http.StatusBadRequest:
		msg := gitlabapi.Message(err)
		switch {
		case strings.Contains(msg, gitlabapi.MsgVariablesForbidden):
			ce.Hint = "pipeline variables are not allowed in project " + r.projectLabel +
				": use inputs (pass: inputs), declared under spec:inputs in .gitlab-ci.yml"
		case strings.Contains(msg, "Reference not found"):
			ce.Hint = fmt.Sprintf("ref %q does not exist in project %s: set ref to a branch or tag", r.ref, r.projectLabel)
		case strings.Contains(msg, "input"):
			ce.Hint = "GitLab refused the pipeline's inputs (" + msg + "): declare every input the plugin sends under spec:inputs " +
				"in .gitlab-ci.yml (examples/gitlab/.gitlab-ci.yml), or rename them with names"
		case msg != "":
			ce.Hint = "GitLab refused to create the pipeline: " + msg
		}
		return err
	case http.StatusNotFound:
		if r.trigger != nil {
			ce.Hint = "project " + r.projectLabel + " does not exist, or the token in triggerTokenEnv is not one of its pipeline trigger tokens"
			return err
		}
	case http.StatusForbidden:
		if r.trigger != nil {
			ce.Hint = "the owner of the token in triggerTokenEnv may not run pipelines on " + r.ref + " of " + r.projectLabel +
				": it needs the Developer role, and may need to be allowed to merge into a protected branch"
			return err
		}
	}
	return r.explain(err)
}

// explain gives configuration errors the plugin's own advice.
func (r *runner) explain(err error) error {
	var ce *gitlabapi.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Status {
	case http.StatusUnauthorized:
		ce.Hint = "GitLab does not accept the token in tokenEnv: it is invalid, expired or revoked"
	case http.StatusForbidden:
		if strings.HasPrefix(ce.Hint, "the token lacks the scope") {
			ce.Hint = "the token in tokenEnv lacks the api scope: read_api reads pipelines but cannot create or cancel them"
		} else {
			ce.Hint = "the token in tokenEnv may not do this in project " + r.projectLabel +
				": it needs the api scope and at least the Developer role (Developer creates and cancels pipelines; Reporter only reads)"
		}
	case http.StatusNotFound:
		ce.Hint = "project " + r.projectLabel + " does not exist, or the token in tokenEnv cannot see it (GitLab answers 404 for both): " +
			"check project and that the token is a member of it"
	}
	return err
}

// stopped turns the end of a wait into the operation's error. Whenever the
// plugin stops following a pipeline before it finished (the operation was
// cancelled or timed out, or GitLab could not be asked), the pipeline is
// cancelled through the API first, so that nothing keeps changing the world
// after the agent gave up on it and the next attempt starts no second one
// beside it.
func (r *runner) stopped(ctx, runCtx context.Context, pl *gitlab.Pipeline, err error) error {
	cause := err
	switch {
	case ctx.Err() != nil:
		cause = context.Cause(ctx)
	case runCtx.Err() != nil:
		cause = context.Cause(runCtx)
	}
	if pl == nil {
		if runCtx.Err() != nil {
			return fmt.Errorf("%w (no pipeline was found to cancel)", cause)
		}
		return err
	}
	if cause != err && !errors.Is(err, cause) {
		// Say what was going on when time ran out.
		r.log.Info("stopped following a pipeline", "pipeline", pl.ID, "error", err)
	}
	cancelCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	status, cerr := r.cancel(cancelCtx, pl.ProjectID, pl.ID)
	// Until GitLab reports the pipeline finished, it may still be changing
	// the world: the handle is kept, so that the next attempt waits for it.
	switch {
	case cerr != nil:
		return fmt.Errorf("%w; cancelling pipeline %s failed: %v (%w)", cause, pl.WebURL, cerr, action.ErrStillRunning)
	case finished(status) && status != "canceled":
		// It finished before the cancel.
		return fmt.Errorf("%w; pipeline %s %s", cause, pl.WebURL, status)
	default:
		return fmt.Errorf("%w; pipeline %s cancelled (%w)", cause, pl.WebURL, action.ErrStillRunning)
	}
}

// correlationID is unique per pipeline (see action.PipelineCorrelationIDFor).
func correlationID(req *action.Request, op action.Operation) (string, error) {
	return action.PipelineCorrelationIDFor(req, op)
}

// valuesFor builds the inputs (or variables), under their configured
// names. Every value is a string: the inputs are declared type: string.
func (r *runner) valuesFor(op action.Operation, req *action.Request, correlation string) map[string]string {
	return action.PipelineValues(req, op, correlation, r.names)
}
