package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// maxDependencyWalk bounds the resources read while looking for a cycle.
const maxDependencyWalk = 1000

// ready reports whether r is what a dependent waits for: its current
// generation reconciled and Ready, and not being deleted.
func ready(r *store.Resource) bool {
	c := manifest.FindCondition(r.Conditions, manifest.ConditionReady)
	return c != nil && c.Status == manifest.ConditionTrue && r.ObservedGeneration == r.Generation &&
		r.DeletionRequestedAt == nil
}

// checkDependencies returns wait = true, with the outcome to write, when a
// dependency is missing or not Ready, or when the dependencies form a cycle.
func (a *attempt) checkDependencies(ctx context.Context) (outcome, bool) {
	deps, err := a.c.store.ListResources(ctx, store.ResourceFilter{Refs: a.cl.DependsOn})
	if err != nil {
		return a.failed(ReasonDependencyNotReady, fmt.Errorf("reading dependencies: %w", err)), true
	}
	found := make(map[manifest.ObjectRef]*store.Resource, len(deps))
	for _, d := range deps {
		found[d.Ref()] = d
	}
	var (
		waiting  []string
		notReady []manifest.ObjectRef
	)
	for _, ref := range a.cl.DependsOn {
		d, ok := found[ref]
		if !ok || !ready(d) {
			notReady = append(notReady, ref)
		}
		switch {
		case !ok:
			waiting = append(waiting, ref.String()+" does not exist")
		case d.DeletionRequestedAt != nil:
			waiting = append(waiting, ref.String()+" is being deleted")
		case !ready(d):
			state := string(d.Phase)
			if d.StatusMessage != "" && d.Phase == manifest.PhaseFailed {
				state += ": " + d.StatusMessage
			}
			waiting = append(waiting, fmt.Sprintf("%s is not ready (%s)", ref, state))
		}
	}
	if len(waiting) == 0 {
		return outcome{}, false
	}
	if cycle := a.findCycle(ctx, found); cycle != nil {
		msg := "dependency cycle: " + strings.Join(cycle, " -> ")
		a.set(manifest.ConditionReady, manifest.ConditionFalse, ReasonDependencyCycle, msg)
		a.set(manifest.ConditionReconciling, manifest.ConditionFalse, ReasonDependencyCycle, msg)
		a.set(manifest.ConditionDegraded, manifest.ConditionTrue, ReasonDependencyCycle, msg)
		a.log.get().Warn("dependency cycle", "cycle", msg)
		// Waiting on members of its own cycle would also make the store's
		// locks go round in a circle; a cycle ends with a change of
		// dependsOn, which wakes the resource anyway.
		return a.wait(manifest.PhaseFailed, msg, nil, nil), true
	}
	msg := "waiting for " + strings.Join(waiting, "; ")
	a.set(manifest.ConditionReady, manifest.ConditionFalse, ReasonDependencyNotReady, msg)
	a.set(manifest.ConditionReconciling, manifest.ConditionTrue, ReasonDependencyNotReady, msg)
	return a.wait(manifest.PhasePending, msg, notReady, nil), true
}

// wait is the outcome of a resource that waits on others: no attempt was
// made, so nothing is recorded, and it is looked at again when they change
// or at the recheck interval.
func (a *attempt) wait(phase manifest.Phase, msg string, ready, gone []manifest.ObjectRef) outcome {
	cl := a.cl
	return outcome{Completion: store.Completion{
		Status: store.StatusUpdate{
			Phase: phase, Message: msg, Conditions: a.conds,
			ObservedGeneration: cl.ObservedGeneration, Outputs: cl.Outputs, RetryCount: cl.RetryCount,
			LastReconcileTime: cl.LastReconcileTime,
		},
		Waiting: true, WaitForReady: ready, WaitForGone: gone,
		Requeue: true, RequeueAfter: a.c.opts.DependencyRecheck,
	}}
}

// findCycle walks the dependency graph from the claimed resource's direct
// dependencies and returns a path back to it, or nil.
func (a *attempt) findCycle(ctx context.Context, direct map[manifest.ObjectRef]*store.Resource) []string {
	self := a.cl.Ref()
	parent := map[manifest.ObjectRef]manifest.ObjectRef{}
	seen := map[manifest.ObjectRef]bool{self: true}
	var frontier []*store.Resource
	for _, ref := range a.cl.DependsOn {
		if d, ok := direct[ref]; ok && !seen[ref] {
			seen[ref] = true
			parent[ref] = self
			frontier = append(frontier, d)
		}
	}
	for len(frontier) > 0 && len(seen) < maxDependencyWalk {
		var next []manifest.ObjectRef
		for _, r := range frontier {
			for _, dep := range r.DependsOn {
				if dep == self {
					path := []string{self.String()}
					for at := r.Ref(); at != self; at = parent[at] {
						path = append(path, at.String())
					}
					path = append(path, self.String())
					// The walk went backwards; show the path in dependency order.
					for i, j := 1, len(path)-2; i < j; i, j = i+1, j-1 {
						path[i], path[j] = path[j], path[i]
					}
					return path
				}
				if !seen[dep] {
					seen[dep] = true
					parent[dep] = r.Ref()
					next = append(next, dep)
				}
			}
		}
		if len(next) == 0 {
			break
		}
		rs, err := a.c.store.ListResources(ctx, store.ResourceFilter{Refs: next})
		if err != nil {
			return nil
		}
		frontier = rs
	}
	return nil
}

// destroy runs the destruction of a resource whose deletion was requested.
func (a *attempt) destroy(ctx context.Context, k *keeper, inst action.Instance, instErr error) outcome {
	cl := a.cl
	// Dependents go first: a database outlives the applications using it.
	dependents, err := a.c.store.ListResources(ctx, store.ResourceFilter{DependsOn: new(cl.Ref())})
	if err != nil {
		return a.destroyFailed(ReasonDestroyFailed, fmt.Errorf("reading dependents: %w", err))
	}
	var (
		first []manifest.ObjectRef
		names []string
	)
	for _, d := range dependents {
		if d.DeletionRequestedAt != nil {
			first = append(first, d.Ref())
			names = append(names, d.Ref().String())
		}
	}
	if len(first) > 0 {
		msg := "waiting for dependents to be destroyed first: " + strings.Join(names, ", ")
		a.set(manifest.ConditionReconciling, manifest.ConditionTrue, ReasonDependentsExist, msg)
		return a.wait(manifest.PhaseDeleting, msg, nil, first)
	}
	now := time.Now().UTC()
	if cl.PruneDisabled() {
		a.rec.Phase, a.rec.Success = stageCompleted, true
		a.log.get().Info("removed without destroy", "annotation", manifest.AnnotationPrune+": disabled")
		return outcome{Completion: store.Completion{Delete: true, Record: a.finish(now),
			Status: store.StatusUpdate{Phase: manifest.PhaseDeleting}}}
	}
	if instErr != nil {
		return a.destroyFailed(ReasonActionNotFound, instErr)
	}
	a.rec.Phase = stageDestroying
	a.progress(k, fmt.Sprintf("destroying with action %s", inst.Name))
	req := a.request(inst, action.OperationDestroy, k)
	a.acted = true
	res, err := a.call(ctx, inst, func(ctx context.Context) (*action.Result, error) { return inst.Action.Destroy(ctx, req) })
	if err != nil {
		if ctx.Err() != nil {
			return outcome{interrupted: true}
		}
		return a.destroyFailed(ReasonDestroyFailed, err)
	}
	now = time.Now().UTC()
	a.rec.Phase, a.rec.Success = stageCompleted, true
	a.countChanges(res, action.OperationDestroy)
	a.rec.Outputs = res.Outputs
	a.log.get().Info("destroyed", "action", inst.Name)
	return outcome{Completion: store.Completion{Delete: true, Record: a.finish(now),
		Status: store.StatusUpdate{Phase: manifest.PhaseDeleting}}}
}

// destroyFailed is a failed destroy: the resource stays, failed with its
// deletion still requested, and the destroy is retried after a backoff.
func (a *attempt) destroyFailed(reason string, err error) outcome {
	return a.failed(reason, fmt.Errorf("destroy: %w", err))
}
