package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// Condition reasons written by the controller.
const (
	ReasonSucceeded          = "Succeeded"
	ReasonProgressing        = "Progressing"
	ReasonActionFailed       = "ActionFailed"
	ReasonDestroyFailed      = "DestroyFailed"
	ReasonTimeout            = "Timeout"
	ReasonActionNotFound     = "ActionNotFound"
	ReasonDependencyNotReady = "DependencyNotReady"
	ReasonDependencyCycle    = "DependencyCycle"
	ReasonDependentsExist    = "DependentsExist"
	ReasonRetryScheduled     = "RetryScheduled"
	ReasonInterrupted        = "Interrupted"
)

// History phases: how far an attempt got.
const (
	stageInitializing = "initializing"
	stagePlanning     = "planning"
	stageApplying     = "applying"
	stageDestroying   = "destroying"
	stageCompleted    = "completed"
)

// completionWriteTimeout bounds the write of an outcome, which must happen
// even while the agent stops.
const completionWriteTimeout = 10 * time.Second

// triggerOf says why a claimed resource is being reconciled.
func triggerOf(cl *store.Claim) store.Trigger {
	switch {
	case cl.DeletionRequestedAt != nil:
		return store.TriggerDelete
	case cl.RetryCount > 0:
		return store.TriggerRetry
	case cl.ReconcileRequestedAt != nil:
		return store.TriggerManual
	case cl.ObservedGeneration == 0:
		return store.TriggerCreate
	case cl.Generation > cl.ObservedGeneration:
		return store.TriggerUpdate
	default:
		return store.TriggerDrift
	}
}

// attempt is one reconcile of one claim in progress.
type attempt struct {
	c       *Controller
	cl      *store.Claim
	trigger store.Trigger
	rec     *store.ReconcileRecord
	log     *lazyLog
	k       *keeper
	// conds starts as the claimed conditions and collects the outcome's.
	conds []manifest.Condition
	// drift is the summary of the drift a plan found, when it found some.
	drift string
	// acted is set once Apply or Destroy was called: they were offered the
	// claim's handle and dealt with it, so the outcome may clear it. An
	// attempt that never got that far keeps it for the next one, and so
	// does one whose action says its work may still run (stillRunning).
	acted, stillRunning bool
}

// work reconciles one claim and returns after comp wrote its outcome or it
// was discarded. It calls free, once, as soon as its worker may take other
// work: when the outcome is handed to comp (with the delay after which it
// asked to be reconciled again) or discarded. The lease holds the resource
// until the outcome is written.
func (c *Controller) work(ctx context.Context, cl *store.Claim, comp *completer, free func(requeue time.Duration)) {
	trigger := triggerOf(cl)
	a := &attempt{
		c: c, cl: cl, trigger: trigger,
		log:   &lazyLog{base: c.log, cl: cl, trigger: trigger},
		conds: slices.Clone(cl.Conditions),
		rec: &store.ReconcileRecord{
			ResourceID: cl.ID, Kind: cl.Kind, Namespace: cl.Namespace, Name: cl.Name, Generation: cl.Generation,
			SourceRevision: cl.Source.Revision, Trigger: trigger, Phase: stageInitializing,
			AgentID: c.opts.AgentID, StartedAt: time.Now().UTC(),
		},
	}
	if ctx.Err() != nil {
		// Claimed as the agent began to stop: handed back untouched.
		done := a.release()
		done.Record, done.Status.Conditions = nil, cl.Conditions
		if res := comp.complete(cl, done, func() { free(0) }); res.Err != nil {
			a.log.get().Warn("handing back a resource claimed while stopping failed", "error", res.Err)
		}
		return
	}
	leaseCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	k := startKeeper(leaseCtx, c.store, cl, c.opts.LeaseDuration, cancel, a.log)
	a.k = k
	done := a.run(leaseCtx, k)
	k.stop()

	if errors.Is(context.Cause(leaseCtx), errLeaseLost) {
		a.log.get().Warn("lease lost while reconciling; result discarded", "stage", a.rec.Phase)
		comp.forgo()
		free(0)
		return
	}
	if done.interrupted {
		done.Completion = a.release()
	}
	if !a.acted || a.stillRunning {
		done.KeepHandle = true
	}
	var requeue time.Duration
	if done.Requeue {
		requeue = max(done.RequeueAfter, time.Millisecond)
	}
	if err := comp.complete(cl, done.Completion, func() { free(requeue) }).Err; err != nil {
		if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
			a.log.get().Warn("lease lost before the result was written; result discarded", "error", err)
		} else {
			// The lease will expire and the resource be claimed again.
			a.log.get().Error("writing the reconcile result failed", "error", err)
		}
		return
	}
	if done.Record != nil && c.opts.OnAttempt != nil {
		name := cl.Action
		if name == "" {
			name = NoopInstance
		}
		c.opts.OnAttempt(Attempt{Record: done.Record, Action: name, Drift: a.drift != ""})
	}
}

// lazyLog is an attempt's logger, with the resource, generation and trigger
// as attributes, made when first used: most attempts log nothing, and
// adding attributes to a logger costs more than a quick action.
type lazyLog struct {
	once    gosync.Once
	base    *slog.Logger
	cl      *store.Claim
	trigger store.Trigger
	l       *slog.Logger
}

func (l *lazyLog) get() *slog.Logger {
	l.once.Do(func() {
		l.l = l.base.With("resource", l.cl.Ref().String(), "generation", l.cl.Generation, "trigger", l.trigger)
	})
	return l.l
}

// outcome is a completion, and whether the attempt was cut short by the
// agent stopping (so that its resource is handed back rather than failed).
type outcome struct {
	store.Completion
	interrupted bool
}

// run decides what the claim needs and does it.
func (a *attempt) run(ctx context.Context, k *keeper) outcome {
	inst, err := a.instance()
	if a.cl.DeletionRequestedAt != nil {
		return a.destroy(ctx, k, inst, err)
	}
	if err != nil {
		return a.failed(ReasonActionNotFound, err)
	}
	if len(a.cl.DependsOn) > 0 {
		if o, wait := a.checkDependencies(ctx); wait {
			return o
		}
	}
	if err := action.CheckPluginConfig(inst, a.cl.PluginConfig); err != nil {
		return a.failed(ReasonActionNotFound, err)
	}
	req := a.request(inst, action.OperationApply, k)
	if a.trigger == store.TriggerDrift {
		if planner, ok := inst.Action.(action.Planner); ok {
			o, apply := a.plan(ctx, k, inst, planner, req)
			if !apply {
				return o
			}
		}
	}
	a.rec.Phase = stageApplying
	a.progress(k, fmt.Sprintf("applying generation %d with action %s", a.cl.Generation, inst.Name))
	a.acted = true
	res, err := a.call(ctx, inst, func(ctx context.Context) (*action.Result, error) { return inst.Action.Apply(ctx, req) })
	if err != nil {
		return a.actionFailed(ctx, ReasonActionFailed, err)
	}
	return a.succeeded(inst, res)
}

// instance resolves the claim's action instance; none named means noop.
func (a *attempt) instance() (action.Instance, error) {
	name := a.cl.Action
	if name == "" {
		name = NoopInstance
	}
	inst, ok := a.c.actions.Get(name)
	if !ok {
		return action.Instance{}, fmt.Errorf("action %q is not configured on agent %s (configured: %s)",
			name, a.c.opts.AgentID, strings.Join(a.c.actions.Names(), ", "))
	}
	return inst, nil
}

// request builds the request for an operation on the claimed resource.
func (a *attempt) request(inst action.Instance, op action.Operation, k *keeper) *action.Request {
	cl := a.cl
	req := &action.Request{
		Operation: op,
		Instance:  inst.Name,
		Trigger:   string(a.trigger),
		Reporter:  attemptReporter{keeper: k, instance: inst.Name, op: op},
		// The claim's lease token fences the action's side effects too, for
		// systems that check it.
		FencingToken: cl.Lease.Token,
		Resource: action.Resource{
			ID: cl.ID, Kind: cl.Kind, APIVersion: cl.APIVersion(), Namespace: cl.Namespace, Name: cl.Name,
			Labels: cl.Labels, Annotations: cl.Annotations, Spec: cl.Spec, PluginConfig: cl.PluginConfig, Generation: cl.Generation,
			Outputs: cl.Outputs, Source: cl.Source.Name, Revision: string(cl.Source.Revision),
		},
	}
	// Only the instance that recorded a handle can make sense of it.
	if h := cl.Handle; h != nil && h.Action == inst.Name {
		req.PriorHandle = &action.Handle{Value: h.Value, Operation: action.Operation(h.Operation), Generation: h.Generation}
	}
	return req
}

// timeoutError is the cause of an operation cancelled by its timeout.
type timeoutError struct {
	action string
	after  time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("action %s timed out after %v", e.action, e.after)
}

// call runs one action operation under the instance's timeout, turning a
// panic into an error so that one broken plugin cannot stop the agent.
func (a *attempt) call(ctx context.Context, inst action.Instance, op func(context.Context) (*action.Result, error)) (res *action.Result, err error) {
	timeout := action.DefaultTimeout
	if t, ok := inst.Action.(action.Timeouter); ok && t.Timeout() > 0 {
		timeout = t.Timeout()
	}
	expired := &timeoutError{action: inst.Name, after: timeout}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, expired)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			a.log.get().Error("action panicked", "action", inst.Name, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("action %s panicked: %v", inst.Name, p)
		}
	}()
	res, err = op(ctx)
	if errors.Is(err, action.ErrStillRunning) {
		a.stillRunning = true
	}
	if err == nil && res == nil {
		res = &action.Result{}
	}
	// Whatever the plugin made of its cancelled context, say it timed out.
	if err != nil && context.Cause(ctx) == error(expired) && !errors.Is(err, expired) {
		err = fmt.Errorf("%w: %w", expired, err)
	}
	return res, err
}

// plan runs a drift check. It returns the outcome to write when nothing
// drifted, or apply = true when the action reported changes.
func (a *attempt) plan(ctx context.Context, k *keeper, inst action.Instance, planner action.Planner, req *action.Request) (outcome, bool) {
	a.rec.Phase = stagePlanning
	a.progress(k, fmt.Sprintf("checking for drift with action %s", inst.Name))
	planReq := *req
	planReq.Operation = action.OperationPlan
	var plan *action.Plan
	_, err := a.call(ctx, inst, func(ctx context.Context) (*action.Result, error) {
		p, err := planner.Plan(ctx, &planReq)
		plan = p
		return nil, err
	})
	if err != nil {
		return a.actionFailed(ctx, ReasonActionFailed, fmt.Errorf("drift check: %w", err)), false
	}
	if plan == nil {
		plan = &action.Plan{}
	}
	a.rec.PlanOutput = plan.Output
	if plan.Changes {
		a.log.get().Info("drift detected; applying", "summary", plan.Summary)
		a.drift = plan.Summary
		if a.drift == "" {
			a.drift = "changes"
		}
		return outcome{}, true
	}
	msg := "no drift"
	if plan.Summary != "" {
		msg = "no drift: " + plan.Summary
	}
	// Nothing changed: the resource stays as it was, checked again later.
	// Identical checks in a row fold into one history record.
	a.rec.NoDriftChecks = 1
	o := a.succeeded(inst, &action.Result{Outputs: a.cl.Outputs, Message: msg})
	return o, false
}

// succeeded is the outcome of a successful apply.
func (a *attempt) succeeded(inst action.Instance, res *action.Result) outcome {
	cl := a.cl
	msg := res.Message
	switch {
	case msg != "":
	case a.drift != "":
		msg = fmt.Sprintf("corrected drift (%s) with action %s", a.drift, inst.Name)
	default:
		msg = fmt.Sprintf("applied generation %d with action %s", cl.Generation, inst.Name)
	}
	now := time.Now().UTC()
	a.setPluginConditions(a.k.pluginConditions())
	a.setPluginConditions(res.Conditions)
	a.set(manifest.ConditionReady, manifest.ConditionTrue, ReasonSucceeded, msg)
	a.set(manifest.ConditionReconciling, manifest.ConditionFalse, ReasonSucceeded, "")
	a.set(manifest.ConditionDegraded, manifest.ConditionFalse, ReasonSucceeded, "")
	if a.rec.Phase == stageApplying || a.rec.Phase == stagePlanning {
		a.rec.Phase = stageCompleted
	}
	a.rec.Success = true
	a.countChanges(res, action.OperationApply)
	a.rec.Outputs = res.Outputs
	done := store.Completion{
		Status: store.StatusUpdate{
			Phase: manifest.PhaseReady, Message: msg, Conditions: a.conds,
			ObservedGeneration: cl.Generation, Outputs: res.Outputs, LastReconcileTime: &now,
		},
		Record: a.finish(now),
	}
	// Only an action that can observe the world is run again as time passes.
	_, planner := inst.Action.(action.Planner)
	switch {
	case res.RequeueAfter > 0:
		done.Requeue, done.RequeueAfter = true, res.RequeueAfter
	case planner && cl.DriftInterval > 0:
		done.Requeue, done.RequeueAfter = true, cl.DriftInterval
	}
	// Every attempt has its history record: a log line each would cost a
	// busy queue more than the attempt itself.
	a.log.get().Debug("reconciled", "action", inst.Name, "duration", a.rec.Duration, "message", msg)
	return outcome{Completion: done}
}

// countChanges records what the operation changed: the action's counts,
// or, when it reports none, the resource itself, as the history has always
// shown: created by its first successful apply, updated by the apply of a
// new generation, deleted by its destroy. Other runs (a manual reconcile,
// a retry at the same generation) record no change the action did not report.
func (a *attempt) countChanges(res *action.Result, op action.Operation) {
	r := a.rec
	r.Created, r.Updated, r.Deleted = res.Created, res.Updated, res.Deleted
	if r.Created+r.Updated+r.Deleted > 0 {
		return
	}
	switch {
	case op == action.OperationDestroy:
		r.Deleted = 1
	case a.cl.ObservedGeneration == 0:
		r.Created = 1
	case a.cl.Generation > a.cl.ObservedGeneration:
		r.Updated = 1
	}
}

// actionFailed is the outcome of an action that returned an error: a
// failure, unless the agent is stopping, in which case the resource is
// handed back.
func (a *attempt) actionFailed(ctx context.Context, reason string, err error) outcome {
	if ctx.Err() != nil {
		// The agent is stopping (or the lease is gone, which work handles).
		return outcome{interrupted: true}
	}
	return a.failed(reason, err)
}

// failed is the outcome of a failed attempt: retried after a backoff.
func (a *attempt) failed(reason string, err error) outcome {
	cl := a.cl
	if expired := (*timeoutError)(nil); errors.As(err, &expired) {
		reason = ReasonTimeout
	}
	retries := cl.RetryCount + 1
	a.setPluginConditions(a.k.pluginConditions())
	delay := Backoff(retries, a.c.opts.BackoffInitial, a.c.opts.BackoffMax)
	msg := err.Error()
	now := time.Now().UTC()
	a.set(manifest.ConditionReady, manifest.ConditionFalse, reason, msg)
	a.set(manifest.ConditionReconciling, manifest.ConditionFalse, ReasonRetryScheduled,
		fmt.Sprintf("attempt %d failed; next attempt in %v", retries, delay.Round(time.Second)))
	a.set(manifest.ConditionDegraded, manifest.ConditionTrue, reason, msg)
	a.rec.Error = msg
	a.log.get().Warn("reconcile failed", "reason", reason, "error", msg, "retry", retries, "in", delay)
	return outcome{Completion: store.Completion{
		Status: store.StatusUpdate{
			Phase: manifest.PhaseFailed, Message: msg, Conditions: a.conds,
			ObservedGeneration: cl.ObservedGeneration, Outputs: cl.Outputs, RetryCount: retries,
			LastReconcileTime: &now,
		},
		Requeue: true, RequeueAfter: delay,
		Record: a.finish(now),
	}}
}

// release is the completion that hands an interrupted claim back to the
// queue as it was, due at once for whichever agent is still running.
func (a *attempt) release() store.Completion {
	cl := a.cl
	phase := a.cl.PriorPhase
	if phase == manifest.PhaseReconciling || phase == "" {
		phase = manifest.PhasePending
	}
	a.set(manifest.ConditionReconciling, manifest.ConditionFalse, ReasonInterrupted, "the agent stopped during the attempt")
	a.rec.Error = "interrupted: the agent stopped during the attempt"
	now := time.Now().UTC()
	return store.Completion{
		Status: store.StatusUpdate{
			Phase: phase, Message: cl.StatusMessage, Conditions: a.conds,
			ObservedGeneration: cl.ObservedGeneration, Outputs: cl.Outputs, RetryCount: cl.RetryCount,
			LastReconcileTime: cl.LastReconcileTime,
		},
		Requeue: true,
		Record:  a.finish(now),
		// The action was stopped with its work perhaps still running: the
		// next attempt must see to it.
		KeepHandle: true,
	}
}

// finish completes the history record.
func (a *attempt) finish(now time.Time) *store.ReconcileRecord {
	a.rec.FinishedAt = now
	a.rec.Duration = now.Sub(a.rec.StartedAt)
	return a.rec
}

// progress reports the attempt's progress through k: Reconciling turns
// True, in the attempt's conditions too, so that the outcome's Reconciling
// False is a transition with a time of its own, not the claimed one.
func (a *attempt) progress(k *keeper, message string) {
	a.set(manifest.ConditionReconciling, manifest.ConditionTrue, ReasonProgressing, message)
	k.progress(message, a.conds)
}

// set sets one of the controller's conditions for the claimed generation.
func (a *attempt) set(typ string, status manifest.ConditionStatus, reason, msg string) {
	a.conds = manifest.SetCondition(a.conds, manifest.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: time.Now().UTC(), ObservedGeneration: a.cl.Generation,
	})
}

// setPluginConditions merges an action's own conditions; the standard ones
// belong to the controller.
func (a *attempt) setPluginConditions(conds []manifest.Condition) {
	for _, c := range conds {
		if isStandardCondition(c.Type) || c.Type == "" {
			continue
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = time.Now().UTC()
		}
		a.conds = manifest.SetCondition(a.conds, c)
	}
}

func isStandardCondition(typ string) bool {
	return typ == manifest.ConditionReady || typ == manifest.ConditionReconciling || typ == manifest.ConditionDegraded
}
