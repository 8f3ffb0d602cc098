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
	"time"

	"github.com/no8s/no8s-agent/manifest"
)

// Domain errors. Backends wrap them; callers test with errors.Is.
var (
	// ErrNotFound means the addressed record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the write collides with an existing record, such as a
	// (kind, name) that already exists or is owned by another source.
	ErrConflict = errors.New("conflict")
	// ErrInUse means the record cannot be removed because others depend on it,
	// such as a resource type that live resources still use.
	ErrInUse = errors.New("in use")
	// ErrInvalid means the request itself is malformed (bad filter, bad value).
	ErrInvalid = errors.New("invalid")
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
	// Schema is the OpenAPI v3 schema of the version's spec.
	Schema    json.RawMessage
	Source    SourceRef
	CreatedAt time.Time
	UpdatedAt time.Time
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
	// LeaseOwner and LeaseExpiresAt describe the worker that holds the resource.
	LeaseOwner     string
	LeaseExpiresAt *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
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

// Ref returns the resource's kind and name.
func (d ResourceDigest) Ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: d.Kind, Name: d.Name}
}

// Topics of Notify.
const (
	// TopicResources announces that resources changed and may be due.
	TopicResources = "no8s_resources"
	// TopicSources announces that a source's state changed.
	TopicSources = "no8s_sources"
)

// ResourceFilter selects resources in ListResources. Zero fields match all.
type ResourceFilter struct {
	Kind   string
	Phase  manifest.Phase
	Source string
	// Labels must all be present with equal values.
	Labels map[string]string
	// After is a keyset cursor: only IDs greater than After.
	After int64
	// IDs, when not nil, selects only these resources.
	IDs []int64
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
)

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
	// Errors are the problems of the last attempted revision.
	Errors    []manifest.Problem
	CreatedAt time.Time
	UpdatedAt time.Time
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
	// with ErrConflict when another version of the name has a different group.
	PutResourceType(ctx context.Context, t *ResourceType) (*ResourceType, error)
	GetResourceType(ctx context.Context, id int64) (*ResourceType, error)
	GetResourceTypeByName(ctx context.Context, name, version string) (*ResourceType, error)
	// ListResourceTypes returns types ordered by name, then version.
	ListResourceTypes(ctx context.Context, f TypeFilter) ([]*ResourceType, error)
	// DeleteResourceType fails with ErrInUse while resources of that name and
	// version exist.
	DeleteResourceType(ctx context.Context, name, version string) error

	// CreateResource inserts a new resource at generation 1, phase pending.
	// It fails with ErrConflict when (Kind, Name) exists.
	CreateResource(ctx context.Context, r *manifest.Resource, src SourceRef) (*Resource, error)
	// ApplyResource creates the resource or updates the one with the same
	// (Kind, Name) owned by src.Name. The generation goes up by one exactly when
	// SpecHash or Action differ from the stored ones; labels, annotations,
	// dependsOn and the source path and revision are refreshed either way. A
	// resource whose deletion was requested is brought back with a new
	// generation. A resource owned by another source fails with an
	// *OwnerConflictError and is left untouched.
	ApplyResource(ctx context.Context, r *manifest.Resource, src SourceRef) (*Resource, ApplyOutcome, error)
	GetResource(ctx context.Context, id int64) (*Resource, error)
	GetResourceByName(ctx context.Context, kind, name string) (*Resource, error)
	// ListResources returns resources ordered by ID.
	ListResources(ctx context.Context, f ResourceFilter) ([]*Resource, error)
	// SetResourceStatus writes the observed state of a resource.
	SetResourceStatus(ctx context.Context, id int64, u StatusUpdate) (*Resource, error)
	// RequestDeletion marks the resource for destruction (phase deleting).
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

	// AddReconcileRecord appends a reconcile attempt and returns its ID.
	AddReconcileRecord(ctx context.Context, h *ReconcileRecord) (int64, error)
	// ListReconcileRecords returns a resource's attempts, newest first.
	ListReconcileRecords(ctx context.Context, resourceID int64, limit int) ([]*ReconcileRecord, error)

	// PutSource creates or replaces a source's state.
	PutSource(ctx context.Context, s *Source) (*Source, error)
	GetSource(ctx context.Context, name string) (*Source, error)
	// ListSources returns sources ordered by name.
	ListSources(ctx context.Context) ([]*Source, error)
	// AddSyncRecord appends a sync attempt and returns its ID.
	AddSyncRecord(ctx context.Context, r *SyncRecord) (int64, error)
	// ListSyncRecords returns a source's attempts, newest first.
	ListSyncRecords(ctx context.Context, source string, limit int) ([]*SyncRecord, error)

	// InTx runs fn in one transaction: everything fn does through tx commits
	// together or not at all. fn must not use the outer Store.
	InTx(ctx context.Context, fn func(ctx context.Context, tx Store) error) error
	// Ping reports whether the backend is reachable and its schema current.
	Ping(ctx context.Context) error
	// Close releases the backend's resources.
	Close()
}
