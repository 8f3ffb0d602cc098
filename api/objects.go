// Package api is no8s-agent's HTTP interface. This file holds the JSON
// objects it serves; they keep the field names of the predecessor's API
// (resource_type_name, action_plugin, status_message, ...) so that its
// clients keep working, and the CLI prints the same objects.
package api

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

// SourceRef says which source owns an object and where it is declared.
type SourceRef struct {
	Name     string `json:"name"`
	Path     string `json:"path,omitempty"`
	Revision string `json:"revision,omitempty"`
}

func sourceRef(s store.SourceRef) SourceRef {
	return SourceRef{Name: s.Name, Path: s.Path, Revision: string(s.Revision)}
}

// Resource is a resource as the API shows it.
type Resource struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	// Namespace is part of the resource's identity (kind, namespace,
	// name); empty for a resource of a cluster-scoped kind.
	Namespace           string               `json:"namespace"`
	Kind                string               `json:"kind"`
	ResourceTypeName    string               `json:"resource_type_name"`
	ResourceTypeVersion string               `json:"resource_type_version"`
	APIVersion          string               `json:"api_version"`
	ActionPlugin        string               `json:"action_plugin"`
	Spec                json.RawMessage      `json:"spec"`
	SpecHash            string               `json:"spec_hash"`
	Status              manifest.Phase       `json:"status"`
	StatusMessage       string               `json:"status_message"`
	Generation          int64                `json:"generation"`
	ObservedGeneration  int64                `json:"observed_generation"`
	Conditions          []manifest.Condition `json:"conditions"`
	Outputs             json.RawMessage      `json:"outputs"`
	Source              SourceRef            `json:"source"`
	Labels              map[string]string    `json:"labels"`
	Annotations         map[string]string    `json:"annotations"`
	DependsOn           []manifest.ObjectRef `json:"depends_on"`
	RetryCount          int                  `json:"retry_count"`
	NextReconcileTime   *time.Time           `json:"next_reconcile_time"`
	DeletionRequestedAt *time.Time           `json:"deletion_requested_at"`
	CreatedAt           time.Time            `json:"created_at"`
	UpdatedAt           time.Time            `json:"updated_at"`
	LastReconcileTime   *time.Time           `json:"last_reconcile_time"`
	// Lease is the worker that holds the resource now; null when none does.
	Lease *Lease `json:"lease"`
	// Suspended is true while no worker may reconcile, check or destroy
	// the resource; SuspendedBy says what suspends it: "api" or
	// "annotation" (no8s.io/suspend: "true"), and SuspendedAt since when.
	Suspended   bool       `json:"suspended"`
	SuspendedBy string     `json:"suspended_by"`
	SuspendedAt *time.Time `json:"suspended_at"`
	// Orphaned is true while the resource's source is orphaned: no agent's
	// configuration lists it, and the resource is neither reconciled nor
	// destroyed until the source comes back, or is forgotten or pruned.
	// Status is then the last one it reached.
	Orphaned bool `json:"orphaned"`
	// Finalizers are what must happen before the resource is gone, as the
	// predecessor lists them: FinalizerDestroy while its removal runs the
	// action's Destroy (none when annotated no8s.io/prune: disabled, whose
	// removal forgets it).
	Finalizers []string `json:"finalizers"`
	// PluginConfig is the resource's own settings for its action; null
	// when none.
	PluginConfig json.RawMessage `json:"plugin_config"`
	// Metadata is the predecessor's name for free key-value pairs: the
	// annotations again.
	Metadata map[string]string `json:"metadata"`
	// Why explains why the resource is not ready, or is suspended; absent
	// when it is ready. Reads of one resource carry it (lists and the
	// answers to writes do not): GET /api/v1/resources/{id}/why.
	Why *why.Why `json:"why,omitempty"`
}

// Ref returns the resource's kind, namespace and name.
func (r *Resource) Ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// FinalizerDestroy is the finalizer of resources whose removal destroys them.
const FinalizerDestroy = "no8s.io/destroy"

// finalizers returns the finalizers of r.
func finalizers(r *store.Resource) []string {
	if r.PruneDisabled() {
		return []string{}
	}
	return []string{FinalizerDestroy}
}

// ResourceAction answers a request that starts work on a resource (a
// reconcile, a deletion): the predecessor's {"message", "resource_id"},
// and the resource as it stands, whose fields it carries alongside.
type ResourceAction struct {
	Message    string `json:"message"`
	ResourceID int64  `json:"resource_id"`
	Resource
}

// Lease is who holds a resource and until when. A holder that is not alive
// in GET /api/v1/agents stopped; its lease ends at ExpiresAt, and another
// agent takes the resource over then.
type Lease struct {
	Holder string `json:"holder"`
	// Since is when the holder claimed the resource.
	Since     *time.Time `json:"since"`
	ExpiresAt time.Time  `json:"expires_at"`
}

// Agent is an agent in GET /api/v1/agents.
type Agent struct {
	ID         string    `json:"id"`
	Host       string    `json:"host"`
	Version    string    `json:"version"`
	StartedAt  time.Time `json:"started_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	// Alive is false once the agent stopped or missed several heartbeats.
	Alive bool `json:"alive"`
	// State is alive, stopped (a clean shutdown, its work handed back) or
	// gone (it stopped recording heartbeats without one; its leases end
	// when they expire).
	State store.AgentState `json:"state"`
	// StoppedAt is when it stopped cleanly.
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
}

// NewAgent converts a stored agent; now is the store's time or close to it.
func NewAgent(a *store.Agent, now time.Time) Agent {
	st := a.State(now)
	return Agent{ID: a.ID, Host: a.Host, Version: a.Version, StartedAt: a.StartedAt, LastSeenAt: a.LastSeenAt,
		Alive: st == store.AgentAlive, State: st, StoppedAt: a.StoppedAt}
}

// NewResource converts a stored resource.
func NewResource(r *store.Resource) Resource {
	out := Resource{
		ID: r.ID, Name: r.Name, Namespace: r.Namespace, Kind: r.Kind, ResourceTypeName: r.Kind, ResourceTypeVersion: r.Version,
		APIVersion: r.APIVersion(), ActionPlugin: r.Action, Spec: r.Spec, SpecHash: r.SpecHash,
		Status: r.Phase, StatusMessage: r.StatusMessage, Generation: r.Generation,
		ObservedGeneration: r.ObservedGeneration, Conditions: r.Conditions, Outputs: r.Outputs,
		Source: sourceRef(r.Source), Labels: r.Labels, Annotations: r.Annotations, DependsOn: r.DependsOn,
		RetryCount: r.RetryCount, NextReconcileTime: r.NextReconcileAt, DeletionRequestedAt: r.DeletionRequestedAt,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LastReconcileTime: r.LastReconcileTime,
		Suspended: r.Suspended(), SuspendedBy: r.SuspendedBy(), SuspendedAt: r.SuspendedAt, Orphaned: r.Orphaned, Finalizers: finalizers(r),
	}
	if r.LeaseOwner != "" && r.LeaseExpiresAt != nil {
		out.Lease = &Lease{Holder: r.LeaseOwner, Since: r.LeasedAt, ExpiresAt: *r.LeaseExpiresAt}
	}
	// Empty collections are [] and {}, never null, so clients can iterate.
	if out.Conditions == nil {
		out.Conditions = []manifest.Condition{}
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Metadata = out.Annotations
	out.PluginConfig = r.PluginConfig
	if len(out.PluginConfig) == 0 {
		out.PluginConfig = json.RawMessage("null")
	}
	if out.DependsOn == nil {
		out.DependsOn = []manifest.ObjectRef{}
	}
	if len(out.Spec) == 0 {
		out.Spec = json.RawMessage("{}")
	}
	if len(out.Outputs) == 0 {
		out.Outputs = json.RawMessage("null")
	}
	return out
}

// ResourceType is one version of a resource type as the API shows it.
type ResourceType struct {
	ID            int64  `json:"id"`
	Name          string `json:"name"`
	Version       string `json:"version"`
	Group         string `json:"group"`
	Description   string `json:"description"`
	Action        string `json:"action"`
	DriftInterval string `json:"drift_interval,omitempty"`
	// Scope is Namespaced (its resources live in namespaces) or Cluster.
	Scope  string          `json:"scope"`
	Schema json.RawMessage `json:"schema"`
	// Status is active or deprecated: a deprecated version still
	// validates, and its use is warned of.
	Status string `json:"status"`
	// Metadata are the type's annotations: free key-value pairs.
	Metadata  map[string]string `json:"metadata"`
	Source    SourceRef         `json:"source"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// Type statuses.
const (
	TypeActive     = "active"
	TypeDeprecated = "deprecated"
)

// NewResourceType converts a stored resource type.
func NewResourceType(t *store.ResourceType) ResourceType {
	out := ResourceType{ID: t.ID, Name: t.Name, Version: t.Version, Group: t.Group, Description: t.Description,
		Action: t.Action, Schema: t.Schema, Source: sourceRef(t.Source), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Status: TypeActive, Metadata: t.Annotations, Scope: string(t.ScopeOf())}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if t.Deprecated {
		out.Status = TypeDeprecated
	}
	if t.DriftInterval > 0 {
		out.DriftInterval = t.DriftInterval.String()
	}
	if len(out.Schema) == 0 {
		out.Schema = json.RawMessage("{}")
	}
	return out
}

// Problem is one error of a source's last attempted revision.
type Problem struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Document int    `json:"document"`
	Pointer  string `json:"pointer"`
	Message  string `json:"message"`
}

func problems(ps []manifest.Problem) []Problem {
	out := make([]Problem, len(ps))
	for i, p := range ps {
		out[i] = Problem{File: p.File, Line: p.Line, Document: p.Document, Pointer: p.Pointer, Message: p.Message}
	}
	return out
}

// Commit describes the commit of a revision.
type Commit struct {
	Author  string     `json:"author"`
	Message string     `json:"message"`
	Time    *time.Time `json:"time"`
}

func commit(c manifest.Commit) *Commit {
	if c == (manifest.Commit{}) {
		return nil
	}
	out := &Commit{Author: c.Author, Message: c.Message}
	if !c.Time.IsZero() {
		t := c.Time
		out.Time = &t
	}
	return out
}

// Source is a source as the API shows it.
type Source struct {
	Name                  string     `json:"name"`
	Kind                  string     `json:"kind"`
	URL                   string     `json:"url,omitempty"`
	Path                  string     `json:"path,omitempty"`
	Phase                 string     `json:"phase"`
	Message               string     `json:"message"`
	LastAppliedRevision   string     `json:"last_applied_revision"`
	LastAttemptedRevision string     `json:"last_attempted_revision"`
	ApprovedRevision      string     `json:"approved_revision,omitempty"`
	LastCommit            *Commit    `json:"last_commit"`
	LastSyncTime          *time.Time `json:"last_sync_time"`
	LastAppliedTime       *time.Time `json:"last_applied_time"`
	// LastCheckTime is when the source was last fetched and judged (a
	// poll or a webhook), whether or not anything had changed;
	// LastSyncTime moves only when a revision is applied or refused.
	LastCheckTime *time.Time `json:"last_check_time"`
	Errors        []Problem  `json:"errors"`
	// Suspended is true while the source is neither fetched nor synced;
	// SuspendedBy says by what: "api" or "config" (suspend: true in an
	// agent's configuration, which only the configuration lifts).
	Suspended   bool       `json:"suspended"`
	SuspendedBy string     `json:"suspended_by"`
	SuspendedAt *time.Time `json:"suspended_at"`
	// SuspendedReason and SuspendedIdentity are the reason given and the
	// caller's identity, for a suspension through the API.
	SuspendedReason   string `json:"suspended_reason,omitempty"`
	SuspendedIdentity string `json:"suspended_identity,omitempty"`
	// Why explains why the source is not ready, or is suspended; absent
	// when it is ready. It needs nothing but the source.
	Why *why.Why `json:"why,omitempty"`
}

// NewSource converts a stored source.
func NewSource(s *store.Source) Source {
	return Source{Name: s.Name, Kind: string(s.Kind), URL: redactURL(s.URL), Path: s.Path, Phase: string(s.Phase), Message: s.Message,
		LastAppliedRevision: string(s.LastAppliedRevision), LastAttemptedRevision: string(s.LastAttemptedRevision),
		ApprovedRevision: string(s.ApprovedRevision), LastCommit: commit(s.LastCommit), LastSyncTime: s.LastSyncTime,
		LastAppliedTime: s.LastAppliedTime, LastCheckTime: s.LastCheckTime,
		Errors:    problems(s.Errors),
		Suspended: s.SuspendedBy != "", SuspendedBy: s.SuspendedBy, SuspendedAt: s.SuspendedAt,
		SuspendedReason: s.SuspendedReason, SuspendedIdentity: s.SuspendedIdentity, Why: why.ForSource(s)}
}

// redactURL hides a password or token written into a URL's user info.
// Credentials belong in environment variables, but a URL that holds one
// anyway must not leak through the API.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		return u.Redacted()
	}
	// Over HTTP a token alone is often given as the user name
	// (https://TOKEN@host/); over SSH the user name is just "git".
	if u.Scheme != "http" && u.Scheme != "https" {
		return raw
	}
	return strings.Replace(u.String(), u.User.Username()+"@", "xxxxx@", 1)
}

// SyncRecord is one sync attempt of a source.
type SyncRecord struct {
	ID         int64     `json:"id"`
	Source     string    `json:"source"`
	Revision   string    `json:"revision"`
	Commit     *Commit   `json:"commit"`
	Success    bool      `json:"success"`
	Created    int       `json:"created"`
	Updated    int       `json:"updated"`
	Deleted    int       `json:"deleted"`
	Unchanged  int       `json:"unchanged"`
	DurationMS int64     `json:"duration_ms"`
	Message    string    `json:"message"`
	Errors     []Problem `json:"errors"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// NewSyncRecord converts a stored sync attempt.
func NewSyncRecord(r *store.SyncRecord) SyncRecord {
	return SyncRecord{ID: r.ID, Source: r.Source, Revision: string(r.Revision), Commit: commit(r.Commit), Success: r.Success,
		Created: r.Created, Updated: r.Updated, Deleted: r.Deleted, Unchanged: r.Unchanged, DurationMS: r.Duration.Milliseconds(),
		Message: r.Message, Errors: problems(r.Errors), StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
}

// ReconcileRecord is one reconcile attempt, in the predecessor's shape.
type ReconcileRecord struct {
	ID               int64           `json:"id"`
	ResourceID       int64           `json:"resource_id"`
	Kind             string          `json:"kind"`
	Namespace        string          `json:"namespace"`
	Name             string          `json:"name"`
	Generation       int64           `json:"generation"`
	SourceRevision   string          `json:"source_revision"`
	Trigger          string          `json:"trigger"`
	Success          bool            `json:"success"`
	Phase            string          `json:"phase"`
	ErrorMessage     *string         `json:"error_message"`
	ResourcesCreated int             `json:"resources_created"`
	ResourcesUpdated int             `json:"resources_updated"`
	ResourcesDeleted int             `json:"resources_deleted"`
	Outputs          json.RawMessage `json:"outputs"`
	PlanOutput       string          `json:"plan_output,omitempty"`
	DurationMS       int64           `json:"duration_ms"`
	AgentID          string          `json:"agent_id"`
	StartedAt        time.Time       `json:"started_at"`
	ReconcileTime    time.Time       `json:"reconcile_time"`
	// NoDriftChecks is, for drift checks that found nothing to change, how
	// many identical ones in a row the record stands for; LastCheckedAt is
	// when the last of them finished. Both are left out of other records.
	NoDriftChecks int        `json:"no_drift_checks,omitempty"`
	LastCheckedAt *time.Time `json:"last_checked_at,omitempty"`
}

// NewReconcileRecord converts a stored reconcile attempt.
func NewReconcileRecord(h *store.ReconcileRecord) ReconcileRecord {
	out := ReconcileRecord{ID: h.ID, ResourceID: h.ResourceID, Kind: h.Kind, Namespace: h.Namespace, Name: h.Name, Generation: h.Generation,
		SourceRevision: string(h.SourceRevision), Trigger: string(h.Trigger), Success: h.Success, Phase: h.Phase,
		ResourcesCreated: h.Created, ResourcesUpdated: h.Updated, ResourcesDeleted: h.Deleted, Outputs: h.Outputs,
		PlanOutput: h.PlanOutput, DurationMS: h.Duration.Milliseconds(), AgentID: h.AgentID, StartedAt: h.StartedAt,
		ReconcileTime: h.FinishedAt, NoDriftChecks: h.NoDriftChecks, LastCheckedAt: h.LastCheckedAt}
	if h.Error != "" {
		msg := h.Error
		out.ErrorMessage = &msg
	}
	if len(out.Outputs) == 0 {
		out.Outputs = json.RawMessage("null")
	}
	return out
}
