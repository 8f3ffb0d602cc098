// Package manifest holds no8s-agent's domain types (resource types, resources,
// conditions, revisions), the decoding of manifest files, and the validation,
// defaulting and hashing of resource specs against resource-type schemas.
//
// It imports nothing else of this module, so every other package can depend on it.
package manifest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// APIVersion is the apiVersion of the agent's own kinds (ResourceType).
const APIVersion = "no8s.io/v1"

// DefaultGroup is the group of a ResourceType that names none.
const DefaultGroup = "no8s.io"

// KindResourceType is the kind of documents that declare resource types.
const KindResourceType = "ResourceType"

// AnnotationPrune is the annotation that, set to "disabled", makes removal from
// Git forget a resource instead of destroying it.
const AnnotationPrune = "no8s.io/prune"

// AnnotationSuspend is the annotation that, set to "true", suspends a
// resource: it is not reconciled, checked for drift or destroyed while the
// annotation stays.
const AnnotationSuspend = "no8s.io/suspend"

// AnnotationSuspendReason is the annotation that says why no8s.io/suspend
// suspends a resource; the API and the dashboard show it.
const AnnotationSuspendReason = "no8s.io/suspend-reason"

var (
	// labelRE and subdomainRE are Kubernetes' DNS-1123 label and subdomain
	// patterns; their lengths are checked apart, as Kubernetes does.
	labelRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	subdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	kindNameRE  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)
	versionRE   = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
	groupRE     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)
)

// ValidName reports whether s is a valid resource name of some type: a
// DNS-1123 subdomain, the broadest rule a type may ask for (see
// NameFormat). A name that is valid cannot hold '/' or "..", nor begin with
// a dot, so it is a safe path component and URL segment.
func ValidName(s string) bool { return len(s) <= MaxSubdomainLength && subdomainRE.MatchString(s) }

// ValidLabelName reports whether s is a DNS-1123 label: a name of a type
// whose NameFormat is NameLabel.
func ValidLabelName(s string) bool { return len(s) <= MaxLabelLength && labelRE.MatchString(s) }

// Lengths of DNS-1123 names, as Kubernetes has them.
const (
	MaxLabelLength     = 63
	MaxSubdomainLength = 253
)

// NameFormat is the rule the names of a type's resources follow, as
// Kubernetes gives each kind one.
type NameFormat string

// The name formats.
const (
	// NameSubdomain is a DNS-1123 subdomain: lower-case letters, digits,
	// '-' and '.', starting and ending with a letter or digit, at most 253
	// characters. It is the default, and what an API server asks of the
	// names of custom resources.
	NameSubdomain NameFormat = "subdomain"
	// NameLabel is a DNS-1123 label: as a subdomain without dots, at most
	// 63 characters, for names that end up where a dot is not allowed.
	NameLabel NameFormat = "label"
)

// AnnotationNameFormat is the annotation that says a type's NameFormat:
// on a CRD, which has no place for it, and on every stored type, which
// keeps it there. A ResourceType says it in spec.nameFormat.
const AnnotationNameFormat = "no8s.io/name-format"

// NameFormatOf returns the name format a type's annotations record.
func NameFormatOf(annotations map[string]string) NameFormat {
	if NameFormat(annotations[AnnotationNameFormat]) == NameLabel {
		return NameLabel
	}
	return NameSubdomain
}

// Messages of invalid names, worded as an API server words them.
const (
	labelMessage     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	subdomainMessage = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

// NameProblems says what is wrong with name under format f, one message per
// rule broken, each "Invalid value: "<name>": <rule>" as an API server
// reports metadata.name; none when the name is valid.
func NameProblems(f NameFormat, name string) []string {
	var rules []string
	if f == NameLabel {
		if len(name) > MaxLabelLength {
			rules = append(rules, fmt.Sprintf("must be no more than %d characters", MaxLabelLength))
		}
		if !labelRE.MatchString(name) {
			rules = append(rules, labelMessage)
		}
	} else {
		if len(name) > MaxSubdomainLength {
			rules = append(rules, fmt.Sprintf("must be no more than %d characters", MaxSubdomainLength))
		}
		if !subdomainRE.MatchString(name) {
			rules = append(rules, subdomainMessage)
		}
	}
	for i, r := range rules {
		rules[i] = fmt.Sprintf("Invalid value: %s: %s", strconv.Quote(name), r)
	}
	return rules
}

// ValidKindName reports whether s is a valid resource type name (Kind style).
func ValidKindName(s string) bool { return kindNameRE.MatchString(s) }

// ValidVersion reports whether s is a valid type version such as v1 or v2beta1.
func ValidVersion(s string) bool { return versionRE.MatchString(s) }

// Revision identifies one state of a source: "main@sha1:<hex>" for Git,
// "sha256:<hex>" for a directory. The empty revision means "never synced".
type Revision string

// String returns the revision as written.
func (r Revision) String() string { return string(r) }

// Commit is the metadata of the commit a revision points at. Directory
// sources have none.
type Commit struct {
	Author  string    `json:"author,omitempty"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time"`
}

// Origin says where a declared object came from, so that errors and the API
// can point at the file to change.
type Origin struct {
	// File is the path of the file relative to the source root, with forward slashes.
	File string `json:"file,omitempty"`
	// Document is the zero-based index of the document within the file.
	Document int `json:"document"`
	// Line is the one-based line on which the document starts.
	Line int `json:"line,omitempty"`
}

// DefaultNamespace is the namespace a resource of a namespaced kind
// declared without one is placed in, unless the agent's configuration
// names another: the one kubectl would place it in.
const DefaultNamespace = "default"

// ValidNamespace reports whether s is a valid namespace: a DNS-1123 label,
// as Kubernetes has them.
func ValidNamespace(s string) bool { return ValidLabelName(s) }

// NamespaceProblems says what is wrong with a namespace, one message per
// rule broken, as NameProblems does for names; none when it is valid.
func NamespaceProblems(ns string) []string { return NameProblems(NameLabel, ns) }

// Scope says whether the resources of a kind live in namespaces.
type Scope string

// The scopes of a kind.
const (
	// ScopeNamespaced: each resource has a namespace, part of its
	// identity; the default.
	ScopeNamespaced Scope = "Namespaced"
	// ScopeCluster: resources take no namespace.
	ScopeCluster Scope = "Cluster"
)

// ObjectRef names a resource by kind, namespace and name. Namespace is
// empty for resources of cluster-scoped kinds.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String returns "Kind/name" when the namespace is empty or the default
// one, and "Kind/namespace/name" otherwise, as Flux writes references: so
// that what is written of resources in the default namespace reads as it
// did before namespaces.
func (r ObjectRef) String() string {
	if r.Namespace == "" || r.Namespace == DefaultNamespace {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// ParseObjectRef reads "Kind/name" or "Kind/namespace/name". A reference
// without a namespace has an empty Namespace, for the caller to resolve.
func ParseObjectRef(s string) (ObjectRef, error) {
	parts := strings.Split(s, "/")
	var ref ObjectRef
	switch len(parts) {
	case 2:
		ref = ObjectRef{Kind: parts[0], Name: parts[1]}
	case 3:
		ref = ObjectRef{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
		if !ValidNamespace(ref.Namespace) {
			return ObjectRef{}, fmt.Errorf("invalid reference %q: namespace %q is not a DNS-1123 label", s, ref.Namespace)
		}
	default:
		return ObjectRef{}, fmt.Errorf("invalid reference %q: write Kind/name or Kind/namespace/name", s)
	}
	if !ValidKindName(ref.Kind) {
		return ObjectRef{}, fmt.Errorf("invalid reference %q: kind %q", s, ref.Kind)
	}
	if !ValidName(ref.Name) {
		return ObjectRef{}, fmt.Errorf("invalid reference %q: name %q", s, ref.Name)
	}
	return ref, nil
}

// Compare orders references by kind, then namespace, then name: the order
// of every sorted list of resources.
func (r ObjectRef) Compare(o ObjectRef) int {
	if c := strings.Compare(r.Kind, o.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(r.Namespace, o.Namespace); c != 0 {
		return c
	}
	return strings.Compare(r.Name, o.Name)
}

// ResourceType declares a kind of resource, like a Kubernetes
// CustomResourceDefinition. One ResourceType document holds several versions;
// the store keeps one row per (name, version).
type ResourceType struct {
	// Name is the kind its resources use, e.g. DatabaseCluster.
	Name string
	// Group is the API group; resources use apiVersion <group>/<version>.
	Group string
	// Description is free text for people.
	Description string
	// Annotations are free key-value pairs for people and tools; the agent
	// does not read them.
	Annotations map[string]string
	// Action is the default action instance of its resources.
	Action string
	// DriftInterval is how often drift is checked for its resources; zero is off.
	DriftInterval time.Duration
	// Scope says whether its resources live in namespaces; empty is
	// ScopeNamespaced.
	Scope Scope
	// NameFormat is the rule its resources' names follow; empty is
	// NameSubdomain. Annotations record it too when it is NameLabel, so
	// that it is stored with the type.
	NameFormat NameFormat
	// Versions are the served versions, each with its own schema.
	Versions []TypeVersion
	// Origin is where the type was declared.
	Origin Origin

	// fingerprint caches Fingerprint.
	fingerprint string
}

// Namespaced reports whether the type's resources live in namespaces.
func (t *ResourceType) Namespaced() bool { return t.Scope != ScopeCluster }

// Version returns the named version, or nil.
func (t *ResourceType) Version(name string) *TypeVersion {
	for i := range t.Versions {
		if t.Versions[i].Name == name {
			return &t.Versions[i]
		}
	}
	return nil
}

// APIVersionFor returns the apiVersion resources of version v use.
func (t *ResourceType) APIVersionFor(v string) string { return t.Group + "/" + v }

// TypeVersion is one version of a ResourceType with the OpenAPI v3 schema of
// its resources' spec.
type TypeVersion struct {
	// Name is the version, e.g. v1.
	Name string
	// Schema is the OpenAPI v3 schema as canonical JSON.
	Schema json.RawMessage
	// Deprecated versions still validate, but their use is warned of.
	Deprecated bool
	// compiled is set by CompileType; a nil compiled schema accepts nothing.
	compiled *compiledSchema
}

// ConditionStatus is the status of a Condition.
type ConditionStatus string

// The statuses a condition can have.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// The standard condition types every resource carries.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionDegraded    = "Degraded"
)

// Condition is one named aspect of a resource's state, as in Kubernetes.
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason,omitempty"`
	Message            string          `json:"message,omitempty"`
	LastTransitionTime time.Time       `json:"lastTransitionTime"`
	ObservedGeneration int64           `json:"observedGeneration,omitempty"`
}

// SetCondition sets c in conds, keeping LastTransitionTime unchanged unless
// the status changes, and returns the updated slice.
func SetCondition(conds []Condition, c Condition) []Condition {
	for i := range conds {
		if conds[i].Type != c.Type {
			continue
		}
		if conds[i].Status == c.Status {
			c.LastTransitionTime = conds[i].LastTransitionTime
		}
		conds[i] = c
		return conds
	}
	return append(conds, c)
}

// FindCondition returns the condition of the given type, or nil.
func FindCondition(conds []Condition, typ string) *Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// Phase is the coarse state of a resource.
type Phase string

// The phases of a resource.
const (
	PhasePending     Phase = "pending"
	PhaseReconciling Phase = "reconciling"
	PhaseReady       Phase = "ready"
	PhaseFailed      Phase = "failed"
	PhaseDeleting    Phase = "deleting"
)

// Phases returns every phase, in lifecycle order.
func Phases() []Phase {
	return []Phase{PhasePending, PhaseReconciling, PhaseReady, PhaseFailed, PhaseDeleting}
}

// Valid reports whether p is one of the known phases.
func (p Phase) Valid() bool {
	return slices.Contains(Phases(), p)
}

// Resource is one declared resource: its desired state as decoded and
// validated from a manifest (or the API). Spec holds the spec with defaults
// applied, as canonical JSON, and SpecHash its SHA-256.
type Resource struct {
	// Kind is the resource type name.
	Kind string
	// Group is the resource type's group.
	Group string
	// Version is the resource type version the spec was validated against.
	Version string
	// Namespace is the resource's namespace: never empty for a namespaced
	// kind once validated, always empty for a cluster-scoped one.
	Namespace string
	// Name is unique per Kind and Namespace across all sources.
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// Spec is the spec with schema defaults applied, as canonical JSON.
	Spec json.RawMessage
	// SpecHash is "sha256:<hex>" of Spec, followed by a zero byte and
	// PluginConfig when there is one: of what the action is given to act
	// on, so that a change of either is a new generation.
	SpecHash string
	// Action is the action instance that reconciles the resource: the
	// manifest's choice, else its type's default (empty when neither names
	// one). Changing it is a new generation.
	Action string
	// PluginConfig is the resource's own settings for its action, as
	// canonical JSON (an object); nil when none. Actions that take it say
	// what they do with it. It is not secret: the API shows it.
	PluginConfig json.RawMessage
	// DependsOn lists resources that must be Ready before this one is reconciled.
	DependsOn []ObjectRef
	// Origin is where the resource was declared.
	Origin Origin

	// metaHash caches MetaHash.
	metaHash string
}

// MetaHash fingerprints everything the resource declares besides its spec
// and action: group, version, labels, annotations, dependencies and where it
// is declared. Comparing it tells whether stored metadata needs refreshing
// without reading the metadata back. It is computed once; do not change the
// resource after calling it.
func (r *Resource) MetaHash() string {
	if r.metaHash != "" {
		return r.metaHash
	}
	b, err := json.Marshal(struct {
		Group, Version string
		Labels         map[string]string
		Annotations    map[string]string
		DependsOn      []ObjectRef
		Origin         Origin
	}{r.Group, r.Version, nonNil(r.Labels), nonNil(r.Annotations), r.DependsOn, r.Origin})
	if err != nil {
		// Strings, maps of strings and integers always marshal.
		panic(err)
	}
	r.metaHash = HashJSON(b)
	return r.metaHash
}

// nonNil makes empty and nil maps hash alike.
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Ref returns the resource's kind, namespace and name.
func (r *Resource) Ref() ObjectRef {
	return ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// APIVersion returns <group>/<version>.
func (r *Resource) APIVersion() string { return r.Group + "/" + r.Version }

// PruneDisabled reports whether removing the resource from its source should
// forget it rather than destroy it.
func (r *Resource) PruneDisabled() bool { return r.Annotations[AnnotationPrune] == "disabled" }

// SuspendAnnotated reports whether the resource's annotations suspend it.
func (r *Resource) SuspendAnnotated() bool { return r.Annotations[AnnotationSuspend] == "true" }
