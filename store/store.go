// Package store defines the persistence contract of no8s-agent: the records it
// keeps (resource types, resources with their status and queue state,
// reconcile history, sources and sync history), the Store interface every
// backend implements, and the domain errors callers classify with errors.Is
// and errors.As.
//
// Backends live in sub-packages (store/postgres); store/storetest is the
// conformance suite every backend must pass.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/manifest"
)

// Domain errors. Backends wrap them; callers test with errors.Is.
var (
	// ErrNotFound means the addressed record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the write collides with an existing record, such as a
	// (kind, namespace, name) that already exists or is owned by another
	// source.
	ErrConflict = errors.New("conflict")
	// ErrInUse means the record cannot be removed because others depend on it,
	// such as a resource type that live resources still use.
	ErrInUse = errors.New("in use")
	// ErrInvalid means the request itself is malformed (bad filter, bad value).
	ErrInvalid = errors.New("invalid")
	// ErrLeaseLost means a worker's lease on a resource is gone: it was
	// released, or it expired and another worker claimed the resource. The
	// worker must drop its result.
	ErrLeaseLost = errors.New("lease lost")
	// ErrUnavailable means the store cannot be reached (connections are
	// refused, dropped or the pool is closed): nothing was decided, and the
	// same call may succeed later.
	ErrUnavailable = errors.New("store unavailable")
)

// OwnerConflictError reports that a resource or type is owned by another
// source. It matches ErrConflict with errors.Is.
type OwnerConflictError struct {
	// What names the contested object, e.g. "DatabaseCluster/prod-pg".
	What string
	// Owner is the source that owns it now.
	Owner SourceRef
}

// Error implements error.
func (e *OwnerConflictError) Error() string {
	msg := fmt.Sprintf("%s is owned by source %q", e.What, e.Owner.Name)
	if e.Owner.Path != "" {
		msg += fmt.Sprintf(" (file %s", e.Owner.Path)
		if e.Owner.Revision != "" {
			msg += fmt.Sprintf(" at %s", e.Owner.Revision)
		}
		msg += ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *OwnerConflictError) Is(target error) bool { return target == ErrConflict }

// APISource is the name of the pseudo-source that owns resources created through the HTTP API.
const APISource = "api"

// SourceRef says which source owns a record and where in it the record is declared.
type SourceRef struct {
	// Name is the source's configured name, or APISource.
	Name string `json:"name"`
	// Path is the file, relative to the source root, that declares the record.
	Path string `json:"path,omitempty"`
	// Revision is the source revision the record was last written from.
	Revision manifest.Revision `json:"revision,omitempty"`
}

// ResourceType is one stored (name, version) of a resource type.
type ResourceType struct {
	ID            int64
	Name          string
	Version       string
	Group         string
	Description   string
	Action        string
	DriftInterval time.Duration
	// Scope says whether the type's resources live in namespaces; every
	// version of a name has the same. Empty only on rows stored before
	// types had a scope, until their source writes them again: they are
	// namespaced, and their resources in the namespace the store was
	// migrated with (see PutResourceType).
	Scope manifest.Scope
	// Schema is the OpenAPI v3 schema of the version's spec.
	Schema json.RawMessage
	// Deprecated versions still validate, but their use is warned of.
	Deprecated bool
	// Annotations are free key-value pairs the agent does not read.
	Annotations map[string]string
	Source      SourceRef
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Resource is a stored resource: its desired state (the embedded
// manifest.Resource, whose Origin.File mirrors Source.Path), its generation,
// its observed status, and its place in the reconcile queue.
type Resource struct {
	ID int64
	manifest.Resource
	// Source is the owner of the resource.
	Source SourceRef
	// Generation starts at 1 and increases by one exactly when the spec hash or
	// the action binding changes.
	Generation int64
	// ObservedGeneration is the generation last reconciled successfully.
	ObservedGeneration int64
	Phase              manifest.Phase
	StatusMessage      string
	Conditions         []manifest.Condition
	// Outputs is the JSON the last successful action returned; nil when none.
	Outputs json.RawMessage
	// RetryCount is the number of consecutive failed attempts.
	RetryCount int
	// NextReconcileAt is when the resource is next due for a retry or drift check.
	NextReconcileAt *time.Time
	// DeletionRequestedAt is set when the resource is to be destroyed.
	DeletionRequestedAt *time.Time
	// ReconcileRequestedAt is set by a manual reconcile request until served.
	ReconcileRequestedAt *time.Time
	LastReconcileTime    *time.Time
	// LeaseOwner and LeaseExpiresAt describe the worker that holds the
	// resource; LeasedAt is when it claimed it (left as it was once the
	// lease is released: it means something only while LeaseOwner is set).
	LeaseOwner     string
	LeaseExpiresAt *time.Time
	LeasedAt       *time.Time
	// LeaseToken increases with every claim; see Lease.
	LeaseToken int64
	// SuspendedAt is when the resource was suspended: when its annotation
	// no8s.io/suspend: "true" was first written while that suspends it,
	// else when it was suspended through the API; nil when it is not
	// suspended (see Suspended and SuspendedBy).
	SuspendedAt *time.Time
	// SuspendedReason and SuspendedIdentity are what a suspension through
	// the API recorded (see Suspension); empty otherwise. The annotation
	// no8s.io/suspend-reason gives the reason of a suspension by the
	// annotation (see SuspendReason).
	SuspendedReason   string
	SuspendedIdentity string
	CreatedAt         time.Time
	UpdatedAt         time.Time
	// Orphaned is true while the resource's source is orphaned: no agent's
	// configuration lists it, and the resource is neither reconciled nor
	// destroyed until the source comes back, or is forgotten or pruned.
	// Stores read it with the row, from the source's phase.
	Orphaned bool
}

// Suspension reasons, as the API shows them.
const (
	// SuspendedByAPI: a call of the API suspended it.
	SuspendedByAPI = "api"
	// SuspendedByAnnotation: the resource's annotation no8s.io/suspend says so.
	SuspendedByAnnotation = "annotation"
	// SuspendedByConfig: a source's suspend: true in an agent's configuration.
	SuspendedByConfig = "config"
)

// MaxSuspendReason is the longest reason, in characters, a suspension
// records.
const MaxSuspendReason = 500

// Suspension is what a suspension through the API records beside its
// time: why, in the caller's words, and who asked.
type Suspension struct {
	// Reason is the reason the caller gave; empty when none.
	Reason string
	// Identity is who asked, as the audit trail names callers: the API
	// token's name, or oidc:<claim> for an OpenID Connect ID token; empty
	// when the request needed no token.
	Identity string
}

// Check refuses a reason or identity longer than MaxSuspendReason
// characters, not UTF-8, or holding control characters (a newline among
// them): they are shown on one line, in tables and pages. Backends call it
// first, so that both answer alike.
func (s Suspension) Check() error {
	for _, f := range [...]struct{ what, v string }{{"reason", s.Reason}, {"identity", s.Identity}} {
		what, v := f.what, f.v
		if !utf8.ValidString(v) {
			return fmt.Errorf("suspension %s: not UTF-8: %w", what, ErrInvalid)
		}
		if n := utf8.RuneCountInString(v); n > MaxSuspendReason {
			return fmt.Errorf("suspension %s: %d characters, more than %d: %w", what, n, MaxSuspendReason, ErrInvalid)
		}
		if strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return fmt.Errorf("suspension %s: holds a control character (a newline, a tab, ...): write it on one line: %w", what, ErrInvalid)
		}
	}
	return nil
}

// SuspendReason returns the reason of the resource's suspension: its
// annotation no8s.io/suspend-reason while the annotation suspends it,
// else the reason recorded with a suspension through the API.
func (r *Resource) SuspendReason() string {
	switch r.SuspendedBy() {
	case SuspendedByAnnotation:
		return r.Annotations[manifest.AnnotationSuspendReason]
	case SuspendedByAPI:
		return r.SuspendedReason
	}
	return ""
}

// CheckResume refuses to resume through the API a resource its annotation
// suspends while it is declared: the declaration would say otherwise.
// Once its deletion was requested (its declaration is gone) the resume
// may drop the stored annotation. Backends call it, so that both answer
// alike.
func (r *Resource) CheckResume() error {
	if r.SuspendAnnotated() && r.DeletionRequestedAt == nil {
		path := r.Source.Path
		if path == "" {
			path = "its declaration"
		}
		return fmt.Errorf("%s is suspended by its annotation %s in %s of source %q: remove it there: %w",
			r.Ref(), manifest.AnnotationSuspend, path, r.Source.Name, ErrConflict)
	}
	return nil
}

// SourceSuspension says whether SuspendSource changes a source that cur
// suspends (empty: nothing does) when by asks to suspend or resume it, or
// why it may not. Backends call it, so that both decide alike.
func SourceSuspension(name, cur, by string, suspend bool) (change bool, err error) {
	switch {
	case by != SuspendedByAPI && by != SuspendedByConfig:
		return false, fmt.Errorf("suspend source %q: unknown suspender %q: %w", name, by, ErrInvalid)
	case !suspend && by == SuspendedByAPI && cur == SuspendedByConfig:
		return false, fmt.Errorf("source %q is suspended by suspend: true in the agent's configuration: set it to false there: %w",
			name, ErrConflict)
	case suspend && (cur == by || cur == SuspendedByConfig),
		!suspend && cur == "",
		// The configuration lifts only its own suspension.
		!suspend && by == SuspendedByConfig && cur == SuspendedByAPI:
		return false, nil
	}
	return true, nil
}

// Suspended reports whether the resource is suspended: no worker claims
// it, for a reconcile, a drift check or a destroy, until it is resumed.
func (r *Resource) Suspended() bool { return r.SuspendedBy() != "" }

// SuspendedBy says what suspends the resource, the API or its annotation
// (the annotation wins when both do); empty when nothing does.
func (r *Resource) SuspendedBy() string {
	switch {
	case r.SuspendAnnotated():
		return SuspendedByAnnotation
	case r.SuspendedAt != nil:
		return SuspendedByAPI
	}
	return ""
}

// ApplyOutcome says what ApplyResource did.
type ApplyOutcome string

// The outcomes of ApplyResource.
const (
	// Created: the resource did not exist and now has generation 1.
	Created ApplyOutcome = "created"
	// Updated: the spec or action changed and the generation went up by one.
	Updated ApplyOutcome = "updated"
	// Unchanged: spec and action are the same; metadata may have been refreshed.
	Unchanged ApplyOutcome = "unchanged"
)

// Applied is what ApplyResources did to one resource.
type Applied struct {
	ID         int64
	Generation int64
	Outcome    ApplyOutcome
}

// ResourceDigest is what planning a sync needs to know of a stored
// resource: enough to tell whether it changed, without its spec or status.
type ResourceDigest struct {
	ID         int64
	Kind       string
	Namespace  string
	Name       string
	SpecHash   string
	Action     string
	MetaHash   string
	Generation int64
	// Deleting is true once deletion was requested.
	Deleting bool
	// PruneDisabled is true when the resource is annotated no8s.io/prune: disabled.
	PruneDisabled bool
	// Path is the file that declares it.
	Path string
}

// Ref returns the resource's kind, namespace and name.
func (d ResourceDigest) Ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
}

// Topics of Notify. Writes that make resources due (creations, new
// generations, deletion and reconcile requests, and waking waiters) notify
// TopicResources themselves, in their transaction.
const (
	// TopicResources announces that resources changed and may be due.
	TopicResources = "no8s_resources"
	// TopicSources announces that a source's state changed. The payload
	// is the source's name.
	TopicSources = "no8s_sources"
	// TopicStatus announces that a resource was created or removed, or that
	// its phase, message, conditions or generations changed. Backends send
	// it themselves for every such write, whoever makes it; the payload is
	// a StatusEvent in JSON.
	TopicStatus = "no8s_status"
	// TopicChanges announces every other change of a row that readers
	// keep a copy of, and the store versions fences issue. Backends send
	// it themselves; the payload is ChangeResource, ChangeSource or
	// ChangeType and the row's key, or ChangeVersion and a version.
	TopicChanges = "no8s_changes"
)

// Prefixes of TopicChanges payloads: "r:<id>" for a resource whose row
// changed other than in its status (which TopicStatus tells), "s:<name>"
// for a source, "t:<id>" for a resource type, and "v:<n>" for the store
// version a fence issued.
const (
	ChangeResource = "r:"
	ChangeSource   = "s:"
	ChangeType     = "t:"
	ChangeVersion  = "v:"
)

// StatusEvent is the payload of TopicStatus: enough of a resource to show
// or filter a change without reading the row.
type StatusEvent struct {
	ID                 int64          `json:"id"`
	Kind               string         `json:"kind"`
	Namespace          string         `json:"namespace"`
	Name               string         `json:"name"`
	Source             string         `json:"source"`
	Phase              manifest.Phase `json:"status"`
	Message            string         `json:"status_message"`
	Generation         int64          `json:"generation"`
	ObservedGeneration int64          `json:"observed_generation"`
	// Deleted is true when the row was removed.
	Deleted bool `json:"deleted"`
	// Suspended is true while the resource is suspended; a suspension
	// or a resume is announced too.
	Suspended bool `json:"suspended"`
}

// MaxStatusMessage is the longest status message a StatusEvent carries;
// longer ones are cut, because notification payloads are small.
const MaxStatusMessage = 1000

// StatusEventID reads the id of a TopicStatus payload, which is all that
// some of its readers need: the stores write the id first, and reading it
// there costs a small fraction of decoding the event. A payload written
// otherwise is decoded in full.
func StatusEventID(payload string) (int64, error) {
	if id, ok := leadingID(payload); ok {
		return id, nil
	}
	ev, err := ParseStatusEvent(payload)
	return ev.ID, err
}

// leadingID reads payload as `{"id"`, a colon, a positive integer and a
// comma, allowing spaces around the colon as PostgreSQL's JSON builder
// writes them.
func leadingID(payload string) (int64, bool) {
	rest, ok := strings.CutPrefix(payload, `{"id"`)
	if !ok {
		return 0, false
	}
	rest = strings.TrimLeft(rest, " ")
	if rest, ok = strings.CutPrefix(rest, ":"); !ok {
		return 0, false
	}
	rest = strings.TrimLeft(rest, " ")
	end := strings.IndexByte(rest, ',')
	if end <= 0 || end > 19 {
		return 0, false
	}
	for _, c := range []byte(rest[:end]) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(rest[:end], 10, 64)
	return id, err == nil && id > 0
}

// Stats counts resources for metrics and the dashboard.
type Stats struct {
	// ByPhase counts resources in each phase; every phase is present.
	ByPhase map[manifest.Phase]int
	// Due counts resources due for a reconcile now that no worker holds:
	// the queue's depth.
	Due int
	// Leased counts resources a worker holds now.
	Leased int
	// Waiting counts resources waiting on others (dependencies or dependents).
	Waiting int
	// Suspended counts suspended resources.
	Suspended int
}

// ResourceState is what metrics show of each resource: no spec, no status
// message, so that listing every resource stays cheap.
type ResourceState struct {
	Kind, Namespace, Name, Source, Action string
	Phase                                 manifest.Phase
	// Ready is true when the resource is ready at its current generation.
	Ready     bool
	Suspended bool
}

// ResourceFilter selects resources in ListResources. Zero fields match all.
type ResourceFilter struct {
	Kind string
	// Name selects resources of that name, in whatever namespace.
	Name string
	// Namespaces, when not nil, selects only resources in these
	// namespaces; "" among them selects cluster-scoped resources.
	Namespaces []string
	Phase      manifest.Phase
	// Action is the action the resources are bound to, as stored: the name
	// of an action instance or of a plugin that has one instance.
	Action string
	// Actions, when not nil, replaces Action: resources bound to any of
	// these names.
	Actions []string
	Source  string
	// Labels must all be present with equal values.
	Labels map[string]string
	// After is a keyset cursor: only IDs greater than After.
	After int64
	// IDs, when not nil, selects only these resources.
	IDs []int64
	// Refs, when not nil, selects only these kind/namespace/name refs.
	Refs []manifest.ObjectRef
	// DependsOn, when set, selects the resources that list it in dependsOn.
	DependsOn *manifest.ObjectRef
	// Limit caps the number of rows; zero means no limit.
	Limit int
}

// TypeFilter selects resource types in ListResourceTypes. Zero fields match all.
type TypeFilter struct {
	Name   string
	Source string
}

// StatusUpdate is the observed state written after (or during) a reconcile.
// Every field is written as given.
type StatusUpdate struct {
	Phase              manifest.Phase
	Message            string
	Conditions         []manifest.Condition
	ObservedGeneration int64
	Outputs            json.RawMessage
	RetryCount         int
	NextReconcileAt    *time.Time
	LastReconcileTime  *time.Time
}

// Lease is a worker's hold on a claimed resource. Token is the row's lease
// token after the claim: every write a worker makes carries it, and a write
// whose token is no longer current fails with ErrLeaseLost, so that a
// worker whose lease expired cannot overwrite the work of the worker that
// claimed the resource after it (fencing).
type Lease struct {
	Owner string
	Token int64
}

// ClaimParams says who claims due resources, how many, and for how long.
type ClaimParams struct {
	// Owner identifies the claiming agent (and is shown as the lease owner).
	Owner string
	// Limit is the most resources to claim; it must be positive.
	Limit int
	// Duration is how long the lease lasts unless extended; it must be positive.
	Duration time.Duration
}

// Claim is a due resource leased to a worker.
type Claim struct {
	// Resource is the row as claimed: its phase is reconciling, or deleting
	// when its deletion was requested.
	*Resource
	// Lease is the worker's lease.
	Lease Lease
	// PriorPhase is the phase the resource had before the claim.
	PriorPhase manifest.Phase
	// DriftInterval is the drift interval of the resource's type version:
	// zero when drift checks are off or the type version is gone.
	DriftInterval time.Duration
	// Handle is the handle an earlier attempt recorded with RecordHandle and
	// no completion cleared: remote work that may still be running, which
	// this attempt must follow or cancel before it starts anew. Nil when
	// there is none.
	Handle *Handle
}

// Handle identifies remote work an attempt started: a workflow run, a
// pipeline. The worker records it while it holds the lease, before it goes
// on, so that an agent killed while the work runs leaves it behind for the
// next claimant; CompleteReconcile clears it unless told to keep it.
type Handle struct {
	// Value is the action's own identifier of the work, opaque to the store.
	Value string `json:"value"`
	// Action is the action instance that started the work and can read Value.
	Action string `json:"action"`
	// Operation is the action operation the work does (apply, destroy).
	Operation string `json:"operation"`
	// Generation is the resource generation the work is for.
	Generation int64 `json:"generation"`
}

// Progress is what a worker reports while it holds a lease.
type Progress struct {
	Message    string
	Conditions []manifest.Condition
}

// Completion is the outcome of a claimed reconcile, written by
// CompleteReconcile.
type Completion struct {
	// Status is the observed state to write. Its NextReconcileAt is ignored:
	// Requeue schedules the next reconcile.
	Status StatusUpdate
	// Requeue schedules another reconcile RequeueAfter from now (measured by
	// the store's clock); without it none is scheduled, unless the resource
	// changed while it was claimed, in which case it is due at once.
	Requeue      bool
	RequeueAfter time.Duration
	// Waiting marks a resource that waits on other resources: WaitForReady
	// to be Ready (reconciled at their current generation), WaitForGone to
	// be destroyed; the worker lists those not there yet. When one of them
	// becomes Ready or is destroyed, the waiting resource is due at once,
	// also when that happened after the worker looked and before the
	// completion was written.
	Waiting      bool
	WaitForReady []manifest.ObjectRef
	WaitForGone  []manifest.ObjectRef
	// Delete removes the row: the destroy succeeded or was skipped. A
	// resource brought back while it was being destroyed is kept and due again.
	Delete bool
	// Record, when not nil, is appended to the history in the same transaction.
	Record *ReconcileRecord
	// KeepHandle keeps the claim's handle for the next attempt: the attempt
	// was handed back before its remote work was over. Otherwise the
	// completion clears it, since the attempt followed its work to the end.
	KeepHandle bool
}

// ClaimCompletion is one claim and its outcome, for CompleteReconciles.
type ClaimCompletion struct {
	Claim *Claim
	Done  Completion
	// ErrOnly says that the caller reads only the result's Err: the
	// backend may leave its Resource nil, which spares reading back rows
	// that nobody looks at.
	ErrOnly bool
}

// CompletionResult is what CompleteReconciles made of one completion: the
// row as written (nil when it was deleted, and possibly when the
// completion asked for ErrOnly), or why it was refused.
type CompletionResult struct {
	Resource *Resource
	Err      error
}

// Notification is a message received on a topic by Listen.
type Notification struct {
	Topic   string
	Payload string
	// Resync is set on a notification with no topic that is sent after the
	// listener reconnected: messages may have been lost meanwhile, so the
	// receiver should look at the state afresh.
	Resync bool
	// Interrupted is set on a notification with no topic that is sent as
	// soon as the listener's connection drops, before it reconnects: until
	// the Resync that follows, what is announced may not be heard.
	Interrupted bool
}

// LocalNotifications is a Store whose notifications are delivered within
// the process (the embedded store): they are lost only with a Resync, and
// cannot stall unnoticed the way a network connection can.
type LocalNotifications interface {
	NotificationsInProcess() bool
}

// Trigger says why a reconcile attempt ran.
type Trigger string

// The triggers of a reconcile attempt.
const (
	TriggerCreate Trigger = "create"
	TriggerUpdate Trigger = "update"
	TriggerRetry  Trigger = "retry"
	TriggerDrift  Trigger = "drift"
	TriggerManual Trigger = "manual"
	TriggerDelete Trigger = "delete"
)

// ReconcileRecord is one reconcile attempt. Records outlive their resource.
type ReconcileRecord struct {
	ID             int64
	ResourceID     int64
	Kind           string
	Namespace      string
	Name           string
	Generation     int64
	SourceRevision manifest.Revision
	Trigger        Trigger
	// Phase is the furthest phase reached: initializing, planning, applying, completed.
	Phase      string
	Success    bool
	Error      string
	Created    int
	Updated    int
	Deleted    int
	Outputs    json.RawMessage
	PlanOutput string
	Duration   time.Duration
	AgentID    string
	StartedAt  time.Time
	FinishedAt time.Time
	// NoDriftChecks is, for a drift check that found nothing to change,
	// how many such checks the record stands for; 0 for every other
	// attempt. A no-drift check written with 1 right after a record of the
	// same generation and plan output that is one too is folded into it:
	// the count goes up, LastCheckedAt, Duration and AgentID become the new
	// check's, and no record is added.
	NoDriftChecks int
	// LastCheckedAt is when the last folded check finished; nil until one
	// was folded in.
	LastCheckedAt *time.Time
}

// GenerationSpec is the desired state of one generation of a resource, as
// it was declared when the generation was stored. Backends record one,
// in the transaction that stores the generation, for every generation a
// resource gets, however it gets it; TrimHistory trims them as it trims
// the reconcile history, but never the current generation of a resource
// that exists. Like a resource's spec, it is kept as declared: whatever
// shows it masks it (see store/masked).
type GenerationSpec struct {
	ResourceID int64
	Kind       string
	Namespace  string
	Name       string
	Generation int64
	Spec       json.RawMessage
	// Action is the action the generation was bound to.
	Action string
	// SourceRevision is the source revision that declared it.
	SourceRevision manifest.Revision
	// CreatedAt is when the generation was stored.
	CreatedAt time.Time
}

const (
	// AgentBeat is how often a running agent records itself.
	AgentBeat = 5 * time.Second
	// AgentGoneAfter is how long after its last heartbeat an agent counts
	// as gone: several heartbeats missed.
	AgentGoneAfter = 4 * AgentBeat
)

// Agent is an agent that registered itself with RecordAgent.
type Agent struct {
	// ID is the agent's id, the lease owner of what it claims.
	ID string
	// Host is the host it runs on; Version its build.
	Host, Version string
	// StartedAt is when it started; LastSeenAt its last heartbeat, by the
	// store's clock.
	StartedAt, LastSeenAt time.Time
	// StoppedAt is when it stopped cleanly (StopAgent), by the store's
	// clock; nil while it runs, and for an agent that vanished.
	StoppedAt *time.Time
}

// AgentState is what a listed agent is doing.
type AgentState string

// The states of an agent.
const (
	// AgentAlive: it records heartbeats.
	AgentAlive AgentState = "alive"
	// AgentStopped: it shut down cleanly, its work handed back.
	AgentStopped AgentState = "stopped"
	// AgentGone: it stopped recording heartbeats without a clean shutdown
	// (killed, crashed, its host or network lost); what it held is taken
	// over once its leases expire.
	AgentGone AgentState = "gone"
)

// State tells whether the agent runs, stopped cleanly or vanished, as of
// now (the store's time or close to it).
func (a *Agent) State(now time.Time) AgentState {
	switch {
	case a.StoppedAt != nil:
		return AgentStopped
	case now.Sub(a.LastSeenAt) < AgentGoneAfter:
		return AgentAlive
	default:
		return AgentGone
	}
}

// HistoryLimits bound the history a store keeps.
type HistoryLimits struct {
	// MaxPerResource is how many reconcile attempts are kept per resource,
	// and how many sync attempts per source; zero keeps all.
	MaxPerResource int
	// MaxAge is how long an attempt is kept after it finished; zero keeps
	// attempts whatever their age.
	MaxAge time.Duration
}

// SourceKind is the kind of a source.
type SourceKind string

// The kinds of source.
const (
	SourceGit SourceKind = "git"
	SourceDir SourceKind = "dir"
	SourceAPI SourceKind = "api"
)

// SourcePhase is the state of a source's last sync.
type SourcePhase string

// The phases of a source.
const (
	SourcePending SourcePhase = "pending"
	SourceReady   SourcePhase = "ready"
	SourceFailed  SourcePhase = "failed"
	// SourceStalled means the sync is refused until someone acts, e.g. a prune limit.
	SourceStalled SourcePhase = "stalled"
	// SourceOrphaned means no agent's configuration lists the source any
	// more: its resources are kept, neither reconciled nor destroyed, until
	// it comes back, or is forgotten or pruned.
	SourceOrphaned SourcePhase = "orphaned"
	// SourcePruning means an orphaned source's resources are being
	// destroyed; the source goes once the last of them is gone.
	SourcePruning SourcePhase = "pruning"
)

// SourcePhases lists every source phase.
func SourcePhases() []SourcePhase {
	return []SourcePhase{SourcePending, SourceReady, SourceFailed, SourceStalled, SourceOrphaned, SourcePruning}
}

// Retired reports whether the phase is one of a source no agent serves:
// orphaned or pruning.
func (p SourcePhase) Retired() bool { return p == SourceOrphaned || p == SourcePruning }

// SQL shared by the backends, in a dialect both speak.
const (
	// OrphanedSourcesSQL selects the names of orphaned sources.
	OrphanedSourcesSQL = `SELECT name FROM sources WHERE phase = 'orphaned'`
	// PruningSourceSQL is true of a sources row that is being pruned.
	PruningSourceSQL = `phase = 'pruning'`
)

// ReasonProgressing is the reason of the Ready condition of a resource
// whose new generation waits to be reconciled.
const ReasonProgressing = "Progressing"

// PendingMessage is the status message of a resource whose generation gen
// waits to be reconciled.
func PendingMessage(gen int64) string {
	return fmt.Sprintf("generation %d is waiting to be reconciled", gen)
}

// PendingConditions returns conds with Ready set to Unknown for generation
// gen, as a new generation is stored: what was Ready is no longer known to
// be. Its transition time moves only when its status changes.
func PendingConditions(conds []manifest.Condition, gen int64, now time.Time) []manifest.Condition {
	return manifest.SetCondition(slices.Clone(conds), manifest.Condition{
		Type: manifest.ConditionReady, Status: manifest.ConditionUnknown, Reason: ReasonProgressing,
		Message: PendingMessage(gen), LastTransitionTime: now.UTC(),
	})
}

// KeepTransitionTimes returns next with the transition times that prev, as
// stored, says are right. A writer may hold an older copy of the
// conditions than the store (a worker holds them as claimed, older than
// what its heartbeats wrote since), so a time is never moved back: a
// condition whose status stays keeps the later of the two times (a later
// one given means the writer saw it change and change back), and one whose
// status changed takes the time given only if it is after the stored one,
// and now otherwise.
func KeepTransitionTimes(prev, next []manifest.Condition, now time.Time) []manifest.Condition {
	if len(next) == 0 {
		return next
	}
	out := slices.Clone(next)
	for i := range out {
		old := manifest.FindCondition(prev, out[i].Type)
		switch {
		case old == nil:
		case old.Status == out[i].Status:
			if old.LastTransitionTime.After(out[i].LastTransitionTime) {
				out[i].LastTransitionTime = old.LastTransitionTime
			}
		case !out[i].LastTransitionTime.After(old.LastTransitionTime):
			out[i].LastTransitionTime = now.UTC()
		}
	}
	return out
}

// Source is the stored state of one source.
type Source struct {
	Name string
	Kind SourceKind
	// URL is set for Git sources, Path for directories (and the path within a Git repository).
	URL                   string
	Path                  string
	Phase                 SourcePhase
	Message               string
	LastAppliedRevision   manifest.Revision
	LastAttemptedRevision manifest.Revision
	// LastCommit describes LastAttemptedRevision.
	LastCommit manifest.Commit
	// ApprovedRevision is a revision an operator approved past the prune guard.
	ApprovedRevision manifest.Revision
	LastSyncTime     *time.Time
	// LastAppliedTime is when LastAppliedRevision was applied.
	LastAppliedTime *time.Time
	// LastCheckTime is when the source was last fetched and judged (a
	// poll or a webhook), whether or not anything had changed; nil when
	// never. LastSyncTime moves only when a revision is applied or
	// refused. PutSource never clears it: nil keeps what is stored.
	LastCheckTime *time.Time
	// Errors are the problems of the last attempted revision.
	Errors []manifest.Problem
	// SuspendedAt is when the source was suspended, by SuspendedBy
	// (SuspendedByAPI or SuspendedByConfig); nil when it is not. PutSource
	// leaves both as they are: only SuspendSource writes them.
	SuspendedAt *time.Time
	SuspendedBy string
	// SuspendedReason and SuspendedIdentity are what a suspension through
	// the API recorded (see Suspension); empty otherwise.
	SuspendedReason   string
	SuspendedIdentity string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// SyncRecord is one sync attempt of a source.
type SyncRecord struct {
	ID         int64
	Source     string
	Revision   manifest.Revision
	Commit     manifest.Commit
	Success    bool
	Created    int
	Updated    int
	Deleted    int
	Unchanged  int
	Duration   time.Duration
	Errors     []manifest.Problem
	Message    string
	StartedAt  time.Time
	FinishedAt time.Time
}

// Store is the persistence contract. Every method is safe for concurrent use.
// Writes are atomic per call; InTx groups several calls into one transaction.
type Store interface {
	// PutResourceType creates or updates the (Name, Version) row. It fails
	// with an *OwnerConflictError when the row belongs to another source, and
	// with ErrConflict when another version of the name has a different group,
	// or a different scope while resources of the name exist (a change of
	// scope would change their identity). A scope written over rows stored
	// before types had one (empty) is theirs from now on, on every version
	// of the name; when it is ScopeCluster, the resources of the name, which
	// the migration placed in the namespace it recorded, lose their
	// namespace, and dependencies on them too: the type was cluster-scoped
	// all along. That fails with ErrConflict when some are in another
	// namespace.
	//
	// The scope written is t.Scope, ScopeNamespaced when empty.
	PutResourceType(ctx context.Context, t *ResourceType) (*ResourceType, error)
	GetResourceType(ctx context.Context, id int64) (*ResourceType, error)
	GetResourceTypeByName(ctx context.Context, name, version string) (*ResourceType, error)
	// ListResourceTypes returns types ordered by name, then version.
	ListResourceTypes(ctx context.Context, f TypeFilter) ([]*ResourceType, error)
	// DeleteResourceType fails with ErrInUse while resources of that name and
	// version exist.
	DeleteResourceType(ctx context.Context, name, version string) error

	// CreateResource inserts a new resource at generation 1, phase pending.
	// It fails with ErrConflict when (Kind, Namespace, Name) exists.
	CreateResource(ctx context.Context, r *manifest.Resource, src SourceRef) (*Resource, error)
	// ApplyResource creates the resource or updates the one with the same
	// (Kind, Namespace, Name) owned by src.Name. The generation goes up by one exactly when
	// SpecHash or Action differ from the stored ones; labels, annotations,
	// dependsOn and the source path and revision are refreshed either way. A
	// resource whose deletion was requested is brought back with a new
	// generation. A new generation clears the retry count and any scheduled
	// reconcile, so that it is due at once, and sets the status pending (unless
	// a worker holds the resource: it stays reconciling, and its completion
	// leaves it pending), with the message PendingMessage and the Ready
	// condition Unknown (PendingConditions). A resource owned by another
	// source fails with an *OwnerConflictError and is left untouched.
	ApplyResource(ctx context.Context, r *manifest.Resource, src SourceRef) (*Resource, ApplyOutcome, error)
	GetResource(ctx context.Context, id int64) (*Resource, error)
	// GetResourceByName returns the resource ref names, or ErrNotFound.
	GetResourceByName(ctx context.Context, ref manifest.ObjectRef) (*Resource, error)
	// ListResources returns resources ordered by ID.
	ListResources(ctx context.Context, f ResourceFilter) ([]*Resource, error)
	// SetResourceStatus writes the observed state of a resource.
	SetResourceStatus(ctx context.Context, id int64, u StatusUpdate) (*Resource, error)
	// RequestDeletion marks the resource for destruction (phase deleting).
	// A first request clears the retry count and schedule: it is due at once.
	RequestDeletion(ctx context.Context, id int64) (*Resource, error)
	// DeleteResource removes the row; its reconcile history stays.
	DeleteResource(ctx context.Context, id int64) error

	// ApplyResources is ApplyResource for many resources of one source at
	// once, with the same rules. It returns one Applied per input, in input
	// order. When any of them is owned by another source it fails with an
	// *OwnerConflictError and, inside InTx, the caller must roll back.
	ApplyResources(ctx context.Context, rs []*manifest.Resource, src SourceRef) ([]Applied, error)
	// RequestDeletions marks resources for destruction (phase deleting).
	// IDs that do not exist are ignored.
	RequestDeletions(ctx context.Context, ids []int64) error
	// DeleteResources removes rows without destruction; their reconcile
	// history stays. IDs that do not exist are ignored.
	DeleteResources(ctx context.Context, ids []int64) error
	// ListResourceDigests returns the digests of the resources a source owns,
	// ordered by ID.
	ListResourceDigests(ctx context.Context, source string) ([]ResourceDigest, error)
	// Owners returns the owner of each of refs that exists.
	Owners(ctx context.Context, refs []manifest.ObjectRef) (map[manifest.ObjectRef]SourceRef, error)

	// LockSource takes the named source's lock until the surrounding
	// transaction ends, so that one agent at a time syncs a source. It must
	// be called inside InTx.
	LockSource(ctx context.Context, name string) error
	// Notify announces a change on a topic to every agent sharing the store.
	// Inside InTx it is delivered when the transaction commits, and not at
	// all if it rolls back.
	Notify(ctx context.Context, topic, payload string) error

	// ClaimResources leases up to p.Limit due resources to p.Owner and returns
	// them. A resource is due when its lease is free or expired and: its
	// deletion or a manual reconcile was requested, or its generation is
	// ahead of its observed generation, unless a retry is scheduled later;
	// or its scheduled reconcile (retry, drift check) has come. Deletions,
	// new generations and manual requests are claimed before scheduled
	// ones. Resources locked by concurrent claims are skipped, never waited
	// for, and no resource is leased to two workers at once. Claims may
	// come back with an error: they are held all the same, and the caller
	// must complete or hand them back. Resources of an orphaned source are
	// never due. When a claim destroys the last resource of a source being
	// pruned, the completion removes the source and the resource types it
	// owns that no resource uses, in the same transaction.
	ClaimResources(ctx context.Context, p ClaimParams) ([]*Claim, error)
	// Heartbeat extends a lease to d from now and, when p is not nil, writes
	// the progress (message and conditions; transition times as
	// KeepTransitionTimes says). It fails with ErrLeaseLost when
	// the lease is no longer current, and ErrNotFound when the row is gone.
	Heartbeat(ctx context.Context, c *Claim, d time.Duration, p *Progress) error
	// RecordHandle stores h as the handle of the claim's current attempt,
	// replacing any earlier one, fenced by the lease like Heartbeat: it fails
	// with ErrLeaseLost when the lease is no longer current, ErrNotFound when
	// the row is gone, and ErrInvalid when h.Value is empty. The handle is
	// returned with the next claim of the resource until a completion
	// clears it (see Completion.KeepHandle); a crash or a lost lease keeps it.
	RecordHandle(ctx context.Context, c *Claim, h Handle) error
	// CompleteReconcile writes the outcome of a claim and frees the lease, in
	// one transaction with its history record, so that a result is recorded
	// exactly when it is applied. Condition transition times are written as
	// KeepTransitionTimes says. It fails with ErrLeaseLost, writing
	// nothing, when the lease is no longer current. It returns the row as
	// written, or nil when it was deleted. When the resource changed while it
	// was claimed (new generation, deletion or manual request) it stays due.
	CompleteReconcile(ctx context.Context, c *Claim, done Completion) (*Resource, error)
	// CompleteReconciles is CompleteReconcile for many claims at once,
	// written together where the backend can (one transaction, one round
	// trip, one TopicResources notification), with the same guarantees for
	// each. Each completion stands alone: one whose lease is lost, or that
	// is invalid, is refused with its own error and writes nothing, while
	// the others are written. It returns one result per completion, in order.
	CompleteReconciles(ctx context.Context, batch []ClaimCompletion) []CompletionResult
	// RequestReconcile asks for a reconcile of the resource as soon as a
	// worker is free, even when nothing changed, and notifies TopicResources.
	RequestReconcile(ctx context.Context, id int64) (*Resource, error)
	// SuspendResource suspends (suspend true) or resumes the resource
	// through the API and returns the row; doing what is done already is
	// no error. While a resource is suspended no worker claims it: a new
	// generation, a requested reconcile or deletion, a retry or a drift
	// check waits, and a lease held at the time runs out as usual. A
	// resume notifies TopicResources, so that what waited is claimed at
	// once. A resume fails with ErrConflict while the resource's
	// annotation suspends it, unless its deletion was requested (its
	// declaration is gone): then the stored annotation is dropped too.
	// A suspension records note, replacing what an earlier one recorded
	// (its time stays); a resume clears it and ignores note. A note that
	// fails its Check is ErrInvalid.
	SuspendResource(ctx context.Context, id int64, suspend bool, note Suspension) (*Resource, error)
	// NextDue returns how long until the earliest scheduled reconcile of a
	// resource no one holds, or the earliest lease expiry, measured by the
	// store's clock; zero when one is due already, false when none exists.
	// Resources of orphaned sources do not count. Reconcilers sleep until then unless notified earlier.
	NextDue(ctx context.Context) (time.Duration, bool, error)
	// Listen subscribes to topics and delivers their notifications, from
	// every agent sharing the store, until ctx is done; then the channel is
	// closed. A backend whose connection drops reconnects by itself and then
	// sends a Notification with Resync set. It must not be called inside InTx.
	Listen(ctx context.Context, topics ...string) (<-chan Notification, error)

	// AddReconcileRecord appends a reconcile attempt and returns its ID.
	AddReconcileRecord(ctx context.Context, h *ReconcileRecord) (int64, error)
	// ListReconcileRecords returns a resource's attempts, newest first.
	ListReconcileRecords(ctx context.Context, resourceID int64, limit int) ([]*ReconcileRecord, error)
	// ListReconcileRecordsByRef returns the attempts of the resources that
	// had ref (kind, namespace, name; "" for a cluster-scoped kind), newest
	// first: history outlives its resource, and a name used again is one
	// trail.
	ListReconcileRecordsByRef(ctx context.Context, ref manifest.ObjectRef, limit int) ([]*ReconcileRecord, error)
	// ListGenerationSpecs returns the kept specs of a resource's
	// generations, newest first, up to limit (zero means no limit). The
	// resource need not exist any more.
	ListGenerationSpecs(ctx context.Context, resourceID int64, limit int) ([]*GenerationSpec, error)
	// GetGenerationSpec returns the spec of one generation of a resource,
	// or ErrNotFound when it is not kept: trimmed with the history, or
	// stored before the store kept the specs of generations.
	GetGenerationSpec(ctx context.Context, resourceID, generation int64) (*GenerationSpec, error)

	// PutSource creates or replaces a source's state.
	PutSource(ctx context.Context, s *Source) (*Source, error)
	GetSource(ctx context.Context, name string) (*Source, error)
	// ListSources returns sources ordered by name.
	ListSources(ctx context.Context) ([]*Source, error)
	// SuspendSource suspends (suspend true) or resumes the named source for
	// by, SuspendedByAPI or SuspendedByConfig, and returns the row; it
	// fails with ErrNotFound when there is none. A suspension by the
	// configuration replaces one by the API; a resume by the configuration
	// clears only its own suspension, and a resume through the API fails
	// with ErrConflict while the configuration suspends the source. Every
	// change notifies TopicSources with the source's name. A suspension
	// records note as SuspendResource does (one by the configuration
	// records the note it is given, normally none); a resume clears it.
	SuspendSource(ctx context.Context, name, by string, suspend bool, note Suspension) (*Source, error)
	// MarkSourceChecked records that the named source was fetched and
	// judged at at, found as recorded; an earlier time than the one stored
	// changes nothing, nor does a source the store does not know. It
	// writes nothing else, the update time included.
	MarkSourceChecked(ctx context.Context, name string, at time.Time) error
	// DeleteSource removes a source's row; its sync history stays. It fails
	// with ErrNotFound when there is none, and with ErrInUse while resources
	// or resource types it owns remain.
	DeleteSource(ctx context.Context, name string) error
	// AddSyncRecord appends a sync attempt and returns its ID.
	AddSyncRecord(ctx context.Context, r *SyncRecord) (int64, error)
	// ListSyncRecords returns a source's attempts, newest first.
	ListSyncRecords(ctx context.Context, source string, limit int) ([]*SyncRecord, error)
	// RecordAgent records that agent a runs, at its start and then every
	// few seconds: its row is created or updated, with LastSeenAt set to the
	// store's clock.
	RecordAgent(ctx context.Context, a *Agent) error
	// ListAgents returns the agents that beat, ordered by id.
	ListAgents(ctx context.Context) ([]*Agent, error)
	// StopAgent records that agent id shut down cleanly: StoppedAt is set
	// to the store's clock, so that it is listed as stopped, not gone. An
	// unknown id is ErrNotFound. A later RecordAgent of the same id runs it
	// again.
	StopAgent(ctx context.Context, id string) error
	// ForgetAgents removes the agents not seen for longer than age,
	// stopped or gone, and returns how many.
	ForgetAgents(ctx context.Context, age time.Duration) (int, error)

	// TrimHistory deletes, in one short transaction, up to batch reconcile
	// and sync records and generation specs beyond limits, oldest first,
	// and returns how many it deleted: callers repeat while it returns
	// batch, so that a large trim never holds up other writers for long.
	// A generation spec counts per resource like its reconcile records,
	// and the current generation of an existing resource is kept.
	TrimHistory(ctx context.Context, limits HistoryLimits, batch int) (int, error)

	Notifier

	// InTx runs fn in one transaction: everything fn does through tx commits
	// together or not at all. fn must not use the outer Store.
	InTx(ctx context.Context, fn func(ctx context.Context, tx Store) error) error
	// Stats counts resources by phase and the queue's state.
	Stats(ctx context.Context) (*Stats, error)
	// CountResources counts the resources, whatever their state: a
	// cheaper question than Stats.
	CountResources(ctx context.Context) (int, error)
	// ResourceStates returns the state of up to limit resources (a
	// positive number): those not ready first, then by ID.
	ResourceStates(ctx context.Context, limit int) ([]ResourceState, error)
	// Fence issues the next store version, greater than every version
	// issued before, and announces it on TopicChanges as ChangeVersion and
	// the number. Notifications arrive in commit order, so a listener that
	// has heard version n has heard every change committed before the fence
	// that issued n began: a write followed by a fence is seen by whoever
	// has heard the fence's version. Outside InTx only.
	Fence(ctx context.Context) (int64, error)
	// DefaultNamespace returns the default namespace the store records: the
	// one the resources declared without a namespace were placed in.
	DefaultNamespace(ctx context.Context) (string, error)
	// SetDefaultNamespace records ns as the default namespace. When it
	// differs from the one recorded while resources are in the recorded one
	// it fails, changing nothing, with a *DefaultNamespaceError (which
	// matches ErrConflict): those resources, declared without a namespace,
	// would be destroyed and created again in ns.
	SetDefaultNamespace(ctx context.Context, ns string) error
	// Ping reports whether the backend is reachable and its schema current.
	Ping(ctx context.Context) error
	// Close releases the backend's resources.
	Close()
}

// DefaultNamespaceError refuses a change of the default namespace while
// resources are in the one recorded. It matches ErrConflict.
type DefaultNamespaceError struct {
	// Recorded is the default namespace the store records, Configured the
	// one asked for, and Resources how many resources are in Recorded.
	Recorded, Configured string
	Resources            int
}

// Error implements error.
func (e *DefaultNamespaceError) Error() string {
	return fmt.Sprintf("the default namespace is %q in the configuration but %q in the store, which holds %d resource(s) there: "+
		"changing it would destroy every resource declared without a namespace and create it again in %q. "+
		"Declare metadata.namespace: %s explicitly in those manifests (they then stay where they are), or keep defaultNamespace: %s",
		e.Configured, e.Recorded, e.Resources, e.Configured, e.Recorded, e.Recorded)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *DefaultNamespaceError) Is(target error) bool { return target == ErrConflict }

// CheckDefaultNamespace says whether the default namespace may change from
// recorded to configured while n resources are in recorded: nil when
// it may (or does not change). Backends call it, so that both answer alike.
func CheckDefaultNamespace(recorded, configured string, n int) error {
	if !manifest.ValidNamespace(configured) {
		return fmt.Errorf("default namespace %q: must be a DNS-1123 label: %w", configured, ErrInvalid)
	}
	if recorded == configured || n == 0 {
		return nil
	}
	return &DefaultNamespaceError{Recorded: recorded, Configured: configured, Resources: n}
}

// ScopeOf returns the scope of a stored type: ScopeNamespaced for a row
// stored before types had one.
func (t *ResourceType) ScopeOf() manifest.Scope {
	if t.Scope == manifest.ScopeCluster {
		return manifest.ScopeCluster
	}
	return manifest.ScopeNamespaced
}

// ScopeChangeError refuses a change of a type's scope while resources of
// it exist. It matches ErrConflict.
type ScopeChangeError struct {
	Type     string
	From, To manifest.Scope
	// Resources counts the resources of the type.
	Resources int
}

// Error implements error.
func (e *ScopeChangeError) Error() string {
	return fmt.Sprintf("resource type %s cannot change its scope from %s to %s while %d resource(s) of it exist: "+
		"it would change their identity (kind, namespace, name); remove them first, or keep the scope",
		e.Type, e.From, e.To, e.Resources)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ScopeChangeError) Is(target error) bool { return target == ErrConflict }

// Check refuses a filter no backend can serve: a negative limit or cursor,
// or an unknown phase. Backends call it first, so that both answer alike.
func (f ResourceFilter) Check() error {
	if f.Limit < 0 || f.After < 0 {
		return fmt.Errorf("list resources: negative limit or cursor: %w", ErrInvalid)
	}
	if f.Phase != "" && !f.Phase.Valid() {
		return fmt.Errorf("list resources: unknown phase %q: %w", f.Phase, ErrInvalid)
	}
	return nil
}

// Check refuses a handle no backend stores: one without a value. Backends
// call it first, so that both answer alike.
func (h Handle) Check() error {
	if h.Value == "" {
		return fmt.Errorf("record handle: empty value: %w", ErrInvalid)
	}
	if h.Generation < 1 {
		return fmt.Errorf("record handle %q: generation %d is not positive: %w", h.Value, h.Generation, ErrInvalid)
	}
	return nil
}
