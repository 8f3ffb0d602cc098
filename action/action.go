// Package action defines how no8s-agent changes the world: the Action and
// Planner interfaces that plugins implement, the requests and results they
// exchange with the reconciler, and the Registry that turns the agent
// configuration's action instances (name -> plugin + settings) into ready
// Actions.
//
// Plugins live in sub-packages (action/exec, action/http); the built-in
// instance "noop" always exists. Manifests only name an instance: commands,
// URLs and secrets stay with the operator, in the agent configuration, and
// secrets reach a plugin only through settings ending in Env that name an
// environment variable.
package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/no8s/no8s-agent/manifest"
)

// Operation is what a request asks an action to do.
type Operation string

// The operations of an action.
const (
	// OperationApply makes the world match the resource's spec. It must be
	// idempotent: the same request may be applied more than once.
	OperationApply Operation = "apply"
	// OperationDestroy removes what Apply made.
	OperationDestroy Operation = "destroy"
	// OperationPlan reports what Apply would change, changing nothing.
	OperationPlan Operation = "plan"
)

// Action applies and destroys resources. Implementations must be safe for
// concurrent use: the reconciler runs many requests at once, never two for
// the same resource.
type Action interface {
	// Apply makes the world match req.Resource.Spec.
	Apply(ctx context.Context, req *Request) (*Result, error)
	// Destroy removes what Apply made for req.Resource.
	Destroy(ctx context.Context, req *Request) (*Result, error)
}

// Planner is implemented by actions that can observe the world. The
// reconciler uses it for drift checks, and pull-request previews to show
// what a change would do. An action that is not a Planner is never re-run
// just because time passed.
type Planner interface {
	// Plan reports what Apply would change, without changing anything.
	Plan(ctx context.Context, req *Request) (*Plan, error)
}

// Timeouter is implemented by actions whose instance settings bound how
// long one operation may take. The reconciler cancels the operation's
// context when the timeout passes; without it, DefaultTimeout applies.
type Timeouter interface {
	Timeout() time.Duration
}

// DefaultTimeout bounds an operation of an action that sets no timeout.
const DefaultTimeout = 15 * time.Minute

// Request is one operation on one resource.
type Request struct {
	// Operation is what is asked; Apply, Destroy and Plan set it to their own.
	Operation Operation `json:"operation"`
	// Instance is the name of the action instance, as manifests name it.
	Instance string `json:"action"`
	// Resource is the resource to act on.
	Resource Resource `json:"resource"`
	// Trigger says why the operation runs: create, update, retry, drift,
	// manual or delete.
	Trigger string `json:"trigger"`
	// FencingToken is the lease token of the claim the operation runs
	// under. It grows with every claim of the resource, so a system that
	// remembers the highest token it has seen for a resource can refuse a
	// request with a lower one: one from an agent whose lease has passed to
	// another. Zero when no claim is held, as for the plans of previews.
	FencingToken int64 `json:"fencingToken"`
	// Reporter receives conditions and progress while the operation runs;
	// never nil when the reconciler calls. The reconciler's also implements
	// HandleRecorder.
	Reporter Reporter `json:"-"`
	// PriorHandle is the handle an earlier attempt of this action instance
	// on this resource recorded (see RecordHandle) and that was never
	// cleared: the agent running it died, lost its lease or stopped before
	// the work was over. That work may still be running. The operation must
	// follow it (same operation and generation) or cancel it and wait for
	// its end before starting anew, so that one resource never has two
	// runs at once. Nil when there is none.
	PriorHandle *Handle `json:"priorHandle,omitempty"`
}

// Handle identifies remote work an attempt started, such as a workflow run
// or a pipeline, in the action's own terms.
type Handle struct {
	// Value is what the action recorded, e.g. a run id.
	Value string `json:"value"`
	// Operation is the operation of the attempt that recorded it.
	Operation Operation `json:"operation"`
	// Generation is the resource generation that attempt was for.
	Generation int64 `json:"generation"`
}

// HandleRecorder is implemented by Reporters that can record an attempt's
// handle durably. The reconciler's Reporter writes it to the store before
// RecordHandle returns, under the resource's lease: an agent killed right
// after leaves it for the next attempt, as Request.PriorHandle. It is kept
// until the reconciler writes the attempt's outcome (and beyond, when the
// operation was interrupted or failed with ErrStillRunning), and a later
// call replaces it.
type HandleRecorder interface {
	// RecordHandle records handle for the current attempt. An error means
	// it is not recorded: the action must not go on with work nobody could
	// find again, but stop it and fail.
	RecordHandle(ctx context.Context, handle string) error
}

// ErrStillRunning marks an operation's error after which the remote work
// its handle names may still be running: a cancel was asked for but not
// seen through, or the work could not be looked up. The reconciler then
// keeps the handle for the next attempt, which must see to the work before
// it starts anew; after any other error the handle is cleared. Wrap it:
// fmt.Errorf("...: %w", action.ErrStillRunning).
var ErrStillRunning = errors.New("the remote work may still be running")

// RecordHandle records handle through req's Reporter when it is a
// HandleRecorder, and does nothing otherwise (a caller such as a preview
// that keeps no attempts).
func RecordHandle(ctx context.Context, req *Request, handle string) error {
	if hr, ok := req.Reporter.(HandleRecorder); ok {
		return hr.RecordHandle(ctx, handle)
	}
	return nil
}

// Resource is what an action is told about a resource.
type Resource struct {
	ID         int64  `json:"id"`
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Namespace is the resource's namespace; empty for a resource of a
	// cluster-scoped kind.
	Namespace   string            `json:"namespace,omitempty"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Spec is the spec with defaults applied, as canonical JSON.
	Spec json.RawMessage `json:"spec"`
	// PluginConfig is the resource's own settings for its action (a JSON
	// object, not secret), as its manifest's pluginConfig or the API's
	// plugin_config gives them; nil when none. A plugin that reads it
	// implements PluginConfigTaker.
	PluginConfig json.RawMessage `json:"pluginConfig,omitempty"`
	// Generation is the generation being reconciled.
	Generation int64 `json:"generation"`
	// Outputs are the outputs of the last successful operation; nil when none.
	Outputs json.RawMessage `json:"outputs,omitempty"`
	// Source names the source that owns the resource.
	Source string `json:"source"`
	// Revision is the source revision the spec was read from.
	Revision string `json:"revision,omitempty"`
}

// Ref returns the resource's kind, namespace and name.
func (r Resource) Ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// PluginConfigTaker is implemented by actions that read
// Resource.PluginConfig. A resource that gives plugin configuration to an
// action that would ignore it is refused before it is stored.
type PluginConfigTaker interface {
	// TakesPluginConfig says how the action uses it, in one line for
	// people.
	TakesPluginConfig() string
}

// CheckPluginConfig refuses plugin configuration for an instance whose
// action would ignore it: a setting that silently does nothing is a
// mistake nobody would see.
func CheckPluginConfig(inst Instance, pluginConfig json.RawMessage) error {
	if len(pluginConfig) == 0 {
		return nil
	}
	if _, ok := inst.Action.(PluginConfigTaker); !ok {
		return fmt.Errorf("action %s (plugin %s) takes no plugin configuration: remove it, or use an action whose plugin reads it (exec, http, github_actions, gitlab_pipelines)",
			inst.Name, inst.Plugin)
	}
	return nil
}

// Reporter lets a running operation publish its progress. Calls are cheap
// and may be frequent: the reconciler keeps the latest values and writes
// them out at its own pace.
type Reporter interface {
	// SetCondition sets a condition of the plugin's own type, such as
	// "WorkflowRun"; the reconciler owns Ready, Reconciling and Degraded and
	// ignores attempts to set them.
	SetCondition(c manifest.Condition)
	// Progress says, in one line, what the operation is doing now.
	Progress(message string)
}

// Result is what a successful Apply or Destroy returns.
type Result struct {
	// Outputs become the resource's outputs; nil keeps none. Must be JSON.
	Outputs json.RawMessage
	// Message is a one-line summary for the resource's status.
	Message string
	// Created, Updated and Deleted count what the operation changed, when the
	// action knows.
	Created, Updated, Deleted int
	// Conditions are the plugin's own conditions to set on the resource.
	Conditions []manifest.Condition
	// RequeueAfter, when positive, asks for another reconcile after that
	// long, even without a drift interval.
	RequeueAfter time.Duration
}

// Plan is what a Planner returns.
type Plan struct {
	// Changes is true when Apply would change something.
	Changes bool
	// Summary is a one-line description, e.g. "2 to change".
	Summary string
	// Output is the full human-readable plan.
	Output string
}

// NoopReporter is a Reporter that discards everything, for callers that
// have nowhere to report to.
type NoopReporter struct{}

// SetCondition implements Reporter.
func (NoopReporter) SetCondition(manifest.Condition) {}

// Progress implements Reporter.
func (NoopReporter) Progress(string) {}
