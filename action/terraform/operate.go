package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/proc"
)

// handle is what an attempt records of the binary it runs: enough for the
// next attempt, on any agent, to tell whether any process of its run still
// runs. PID is the leader of the run's process group (the supervisor on
// Linux), whose pid is the group's id; Start is the leader's start time.
//
// A host name does not tell where a pid means that process: agents in
// containers given one name (pods on the host's network) each have their
// own PID namespace, and a machine rebooted, or another one, may have the
// same name. Boot and PIDNS are the kernel's boot id and the leader's PID
// namespace: a handle is read here only when both are this agent's. A
// handle without them, of an earlier version, is read by its host alone.
type handle struct {
	Host  string `json:"host"`
	Boot  string `json:"boot,omitempty"`
	PIDNS string `json:"pidns,omitempty"`
	PID   int    `json:"pid"`
	Start string `json:"start,omitempty"`
}

func encodeHandle(pid int) string {
	start, _ := startTime(pid)
	raw, _ := json.Marshal(handle{Host: hostname, Boot: bootID, PIDNS: pidNamespace, PID: pid, Start: start})
	return string(raw)
}

// here reports whether h's pid names a process as this agent sees it.
func (h handle) here() bool {
	if h.Host == "" || h.Host != hostname {
		return false
	}
	if h.Boot == "" && h.PIDNS == "" {
		return true // an earlier version's handle
	}
	return bootID != "" && pidNamespace != "" && h.Boot == bootID && h.PIDNS == pidNamespace
}

// priorState is what is known of a previous attempt's process.
type priorState int

const (
	priorNone    priorState = iota // no previous attempt's process
	priorGone                      // it ran on this host and has ended
	priorRunning                   // it still runs on this host
	priorUnknown                   // it ran elsewhere, or cannot be told
)

// prior tells the state of the process group a previous attempt recorded.
func prior(req *action.Request) (priorState, handle) {
	if req.PriorHandle == nil {
		return priorNone, handle{}
	}
	var h handle
	if err := json.Unmarshal([]byte(req.PriorHandle.Value), &h); err != nil || h.PID <= 0 {
		return priorUnknown, h
	}
	if !h.here() {
		return priorUnknown, h
	}
	start, known := startTime(h.PID)
	switch {
	case !known || h.Start == "":
		return priorUnknown, h
	case start == h.Start:
		return priorRunning, h
	case start != "":
		// Another process has the pid: it was free, so no process was left
		// in the group it named.
		return priorGone, h
	case proc.GroupAlive(h.PID):
		// The leader is gone, not the whole group: a provisioner's process
		// that outlived the binary, or one the supervisor is still ending.
		return priorRunning, h
	default:
		return priorGone, h
	}
}

// awaitPrior waits, up to priorWait, for every process of a previous
// attempt's run that still runs on this host (an agent that lost its
// lease, or a run the supervisor is winding down after the agent died) to
// end, so that one resource never has two runs at once.
func (a *Action) awaitPrior(ctx context.Context, req *action.Request) (priorState, handle, error) {
	st, h := prior(req)
	if st != priorRunning {
		return st, h, nil
	}
	req.Reporter.Progress(fmt.Sprintf("waiting for the previous run (process group %d) to end", h.PID))
	deadline := time.NewTimer(priorWait)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return st, h, fmt.Errorf("waiting for the previous run (process group %d): %w", h.PID, context.Cause(ctx))
		case <-deadline.C:
			return st, h, fmt.Errorf("the previous run (process group %d on %s) is still running after %s: %w", h.PID, h.Host, priorWait, action.ErrStillRunning)
		case <-tick.C:
			if st, h = prior(req); st != priorRunning {
				return st, h, nil
			}
		}
	}
}

// Apply implements action.Action: plan into a file, apply exactly that
// plan, read the outputs.
func (a *Action) Apply(ctx context.Context, req *action.Request) (*action.Result, error) {
	req = withReporter(req)
	ctx, cancel := context.WithTimeoutCause(ctx, a.timeout, fmt.Errorf("apply timed out after %s", a.timeout))
	defer cancel()
	if err := a.checkSpec(req.Resource); err != nil {
		return nil, a.explain(err, req)
	}
	st, h, err := a.awaitPrior(ctx, req)
	if err != nil {
		return nil, err
	}
	dir, _, err := a.locate(ctx, req.Resource, true)
	if err != nil {
		return nil, a.explain(err, req)
	}
	if err := a.prepare(ctx, dir, req, prepareOwn); err != nil {
		return nil, a.explain(err, req)
	}
	planArgs := a.withParallelism([]string{"plan", "-input=false", "-no-color", "-compact-warnings", "-var-file=" + varsFile, "-out=" + planFile})
	req.Reporter.Progress("plan")
	if _, err := a.withLock(ctx, dir, st, h, runSpec{dir: dir, args: planArgs, phase: "plan", req: req, record: true}); err != nil {
		return nil, a.explain(fmt.Errorf("plan: %w", err), req)
	}
	plan, err := a.showPlan(ctx, dir, planFile)
	if err != nil {
		return nil, err
	}
	created, updated, deleted := counts(plan)
	req.Reporter.Progress(fmt.Sprintf("apply: %d to add, %d to change, %d to destroy", created, updated, deleted))
	applyArgs := a.withParallelism([]string{"apply", "-input=false", "-no-color", "-compact-warnings", "-auto-approve"})
	if _, err := a.run(ctx, runSpec{dir: dir, args: append(applyArgs, planFile), phase: "apply", req: req, record: true}); err != nil {
		return nil, a.explain(fmt.Errorf("apply: %w", err), req)
	}
	_ = os.Remove(filepath.Join(dir, planFile))
	outputs, err := a.outputs(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &action.Result{
		Outputs: outputs,
		Message: fmt.Sprintf("applied: %d added, %d changed, %d destroyed", created, updated, deleted),
		Created: created, Updated: updated, Deleted: deleted,
	}, nil
}

// Destroy implements action.Action: destroy what the state holds, then
// remove the work folder.
func (a *Action) Destroy(ctx context.Context, req *action.Request) (*action.Result, error) {
	req = withReporter(req)
	ctx, cancel := context.WithTimeoutCause(ctx, a.timeout, fmt.Errorf("destroy timed out after %s", a.timeout))
	defer cancel()
	if err := a.checkSpec(req.Resource); err != nil {
		return nil, a.explain(err, req)
	}
	st, h, err := a.awaitPrior(ctx, req)
	if err != nil {
		return nil, err
	}
	dir, _, err := a.locate(ctx, req.Resource, true)
	if err != nil {
		return nil, a.explain(err, req)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && a.backend == nil {
		// Local state lives in the work folder: none, nothing to destroy.
		return &action.Result{Message: "nothing to destroy: no work folder"}, nil
	}
	if err := a.prepare(ctx, dir, req, prepareOwn); err != nil {
		return nil, a.explain(err, req)
	}
	req.Reporter.Progress("destroy")
	args := a.withParallelism([]string{"destroy", "-input=false", "-no-color", "-compact-warnings", "-auto-approve", "-var-file=" + varsFile})
	res, err := a.withLock(ctx, dir, st, h, runSpec{dir: dir, args: args, phase: "destroy", req: req, record: true})
	if err != nil {
		return nil, a.explain(fmt.Errorf("destroy: %w", err), req)
	}
	deleted := destroyedCount(res.stdout)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("destroyed, but the work folder stays: %w", err)
	}
	return &action.Result{Message: fmt.Sprintf("destroyed: %d resource(s)", deleted), Deleted: deleted}, nil
}

// Plan implements action.Planner: a plan with -detailed-exitcode. Under a
// lease (a drift check) it runs in the resource's work folder; otherwise (a
// pull-request preview) in a copy of it, so that it never disturbs the
// folder or takes the state's lock.
func (a *Action) Plan(ctx context.Context, req *action.Request) (*action.Plan, error) {
	req = withReporter(req)
	ctx, cancel := context.WithTimeoutCause(ctx, a.planTimeout, fmt.Errorf("plan timed out after %s", a.planTimeout))
	defer cancel()
	if err := a.checkSpec(req.Resource); err != nil {
		return nil, a.explain(err, req)
	}
	preview := req.FencingToken == 0
	lock := []string{}
	st, h := priorNone, handle{}
	mode := prepareOwn
	var dir string
	if preview {
		_, from, err := a.locate(ctx, req.Resource, false)
		if err != nil {
			return nil, a.explain(err, req)
		}
		tmp, err := os.MkdirTemp("", "no8s-terraform-plan-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := copyForPreview(from, tmp); err != nil {
			return nil, fmt.Errorf("copy the work folder for a preview: %w", err)
		}
		dir, mode = tmp, preparePreview
		lock = []string{"-lock=false"}
	} else {
		var err error
		if st, h, err = a.awaitPrior(ctx, req); err != nil {
			return nil, err
		}
		if dir, _, err = a.locate(ctx, req.Resource, true); err != nil {
			return nil, a.explain(err, req)
		}
	}
	if err := a.prepare(ctx, dir, req, mode); err != nil {
		return nil, a.explain(err, req)
	}
	const previewPlan = "no8s-check.tfplan"
	args := append([]string{"plan", "-input=false", "-no-color", "-compact-warnings", "-detailed-exitcode", "-var-file=" + varsFile, "-out=" + previewPlan}, lock...)
	req.Reporter.Progress("plan")
	// A drift check's run is recorded like an apply's: it holds the lock.
	res, err := a.withLock(ctx, dir, st, h, runSpec{dir: dir, args: a.withParallelism(args), phase: "plan", req: req, record: !preview, okCodes: []int{2}})
	if err != nil {
		return nil, a.explain(fmt.Errorf("plan: %w", err), req)
	}
	defer os.Remove(filepath.Join(dir, previewPlan))
	plan := &action.Plan{Changes: res.code == 2, Output: planText(res.stdout)}
	if !plan.Changes {
		plan.Summary = "no changes"
		return plan, nil
	}
	p, err := a.showPlan(ctx, dir, previewPlan)
	if err != nil {
		return nil, err
	}
	add, change, destroy := counts(p)
	plan.Summary = fmt.Sprintf("%d to add, %d to change, %d to destroy", add, change, destroy)
	if add+change+destroy == 0 {
		plan.Summary = "outputs change"
	}
	return plan, nil
}

// withReporter returns req with a Reporter that discards everything when
// it has none.
func withReporter(req *action.Request) *action.Request {
	if req.Reporter != nil {
		return req
	}
	r := *req
	r.Reporter = action.NoopReporter{}
	return &r
}

// withLock runs spec; when the state is locked by a previous attempt's
// process, proven gone, it force-unlocks that lock (logging its id) and
// runs spec once more.
func (a *Action) withLock(ctx context.Context, dir string, st priorState, h handle, spec runSpec) (*runResult, error) {
	res, err := a.run(ctx, spec)
	li, locked := lockError(err)
	if !locked {
		return res, err
	}
	if li.id == "" {
		// Forcing a lock nobody can name could free someone else's.
		return res, fmt.Errorf("the state is locked, and the backend did not say by which lock (its answer held no lock info); "+
			"if no run of this resource is going on, find the lock's id where the backend keeps it and run `%s force-unlock ID` in %s: %w",
			filepath.Base(a.binary), dir, err)
	}
	who := li.who
	if who == "" {
		who = "an unknown holder"
	}
	if st != priorGone {
		return res, fmt.Errorf("the state is locked (lock %s, held by %s) and its holder is not known to be gone; "+
			"if no run of this resource is going on, run `%s force-unlock %s` in %s: %w", li.id, who, filepath.Base(a.binary), li.id, dir, err)
	}
	a.log.Warn("force-unlocking the state lock of a run that is gone",
		"lock", li.id, "holder", li.who, "pid", h.PID, "host", h.Host, "dir", dir)
	spec.req.Reporter.Progress("force-unlocking lock " + li.id + " of a run that is gone")
	if _, uerr := a.run(ctx, runSpec{dir: dir, args: []string{"force-unlock", "-force", "-no-color", li.id}, phase: "unlock"}); uerr != nil {
		return res, fmt.Errorf("force-unlock %s: %w", li.id, uerr)
	}
	return a.run(ctx, spec)
}

// showPlan reads a saved plan as JSON. It holds every value, sensitive
// ones too: only the counts are taken from it, and it is not kept.
func (a *Action) showPlan(ctx context.Context, dir, file string) (*tfjson.Plan, error) {
	res, err := a.run(ctx, runSpec{dir: dir, args: []string{"show", "-json", "-no-color", file}, phase: "show"})
	if err != nil {
		return nil, fmt.Errorf("read the plan: %w", err)
	}
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(res.stdout), &p); err != nil {
		return nil, fmt.Errorf("read the plan's JSON: %w", err)
	}
	return &p, nil
}

// counts counts the plan's resource changes: a replacement counts as one
// added and one destroyed, as the binary's own summary does.
func counts(p *tfjson.Plan) (add, change, destroy int) {
	for _, rc := range p.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		acts := rc.Change.Actions
		switch {
		case acts.Replace():
			add++
			destroy++
		case acts.Create():
			add++
		case acts.Update():
			change++
		case acts.Delete():
			destroy++
		}
	}
	return add, change, destroy
}

// outputs reads the outputs as {name: value}, with sensitive values
// replaced by "(sensitive)".
func (a *Action) outputs(ctx context.Context, dir string) (json.RawMessage, error) {
	res, err := a.run(ctx, runSpec{dir: dir, args: []string{"output", "-json", "-no-color"}, phase: "output"})
	if err != nil {
		return nil, fmt.Errorf("read the outputs: %w", err)
	}
	var outs map[string]*tfjson.StateOutput
	if err := json.Unmarshal([]byte(res.stdout), &outs); err != nil {
		return nil, fmt.Errorf("read the outputs' JSON: %w", err)
	}
	out := make(map[string]json.RawMessage, len(outs))
	for name, o := range outs {
		if o == nil {
			continue
		}
		if o.Sensitive {
			out[name] = json.RawMessage(`"(sensitive)"`)
			continue
		}
		raw, err := json.Marshal(o.Value)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		out[name] = raw
	}
	return json.Marshal(out)
}

// planText is the plan's human part: from "OpenTofu will perform" (or
// "Terraform will perform", or "No changes") on, without the advice on how
// to apply the saved plan.
func planText(out string) string {
	for _, start := range []string{"OpenTofu used the selected providers", "Terraform used the selected providers", "No changes."} {
		if i := strings.Index(out, start); i >= 0 {
			out = out[i:]
			break
		}
	}
	if i := strings.Index(out, "\nSaved the plan to:"); i >= 0 {
		out = out[:i]
	}
	out = strings.TrimRight(out, "\n─ \t")
	return strings.TrimSpace(out)
}

// destroyedCount reads "Destroy complete! Resources: N destroyed."
func destroyedCount(out string) int {
	const marker = "Destroy complete! Resources: "
	i := strings.LastIndex(out, marker)
	if i < 0 {
		return 0
	}
	fields := strings.Fields(out[i+len(marker):])
	if len(fields) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(fields[0])
	return n
}

func (a *Action) withParallelism(args []string) []string {
	if a.parallelism > 0 {
		return append(args, "-parallelism="+strconv.Itoa(a.parallelism))
	}
	return args
}

// explain names the instance and the resource in an error, with the fix
// for the mistakes that have one.
func (a *Action) explain(err error, req *action.Request) error {
	msg := err.Error()
	hint := ""
	switch {
	case strings.Contains(msg, "No value for required variable"):
		hint = "; set it in the resource's spec (declare a default in the ResourceType's schema) or in the instance's vars"
	case strings.Contains(msg, "Unsupported argument") || strings.Contains(msg, "Invalid block definition") ||
		strings.Contains(msg, "Argument or block definition required") || strings.Contains(msg, "Unsupported block type"):
		hint = "; fix the module"
	}
	return fmt.Errorf("terraform instance %q, %s/%s: %w%s", a.instance, req.Resource.Kind, req.Resource.Name, err, hint)
}
