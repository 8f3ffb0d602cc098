// Package why explains why a resource or a source is not ready: the
// dependency chain down to its root cause, who suspended it and why, the
// prune guard or the check it is stalled on, the backoff it waits out, the
// agent that holds it. The explanation is computed from what a reader
// already holds (the API's read model): nothing here reads the store.
package why

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// Reasons of an explanation. A source that failed or stalled gives the
// reason its sync recorded (ValidationFailed, PruneLimitExceeded,
// AdmissionDenied, SignatureRejected, ...), whatever it is.
const (
	// Suspended: the API, an annotation or the configuration suspends it.
	Suspended = "Suspended"
	// SourceOrphaned: the resource's source is orphaned.
	SourceOrphaned = "SourceOrphaned"
	// DependencyNotReady: a dependency, or one of its own, is not ready.
	DependencyNotReady = "DependencyNotReady"
	// DependencyMissing: the chain of dependencies ends at one that does
	// not exist.
	DependencyMissing = "DependencyMissing"
	// DependencyCycle: the dependencies go round in a circle.
	DependencyCycle = "DependencyCycle"
	// Reconciling: an agent holds the resource's lease.
	Reconciling = "Reconciling"
	// BackingOff: the last attempt failed and the next waits for its time.
	BackingOff = "BackingOff"
	// Failed: the last attempt failed and the retry is due.
	Failed = "Failed"
	// Pending: a generation or a request waits for a free worker.
	Pending = "Pending"
	// Deleting: the resource's destruction waits for a worker or for its
	// dependents.
	Deleting = "Deleting"
	// Orphaned: no agent's configuration lists the source.
	Orphaned = "Orphaned"
	// Pruning: an orphaned source's resources are being destroyed.
	Pruning = "Pruning"
	// NotSynced: the source has not been synced yet.
	NotSynced = "NotSynced"
)

// maxChain bounds the dependency chain an explanation follows.
const maxChain = 64

// maxProblems is how many of a source's problems an explanation lists.
const maxProblems = 5

// Why is the explanation of a resource or a source that is not ready.
type Why struct {
	// Reason is one of the reasons above, or the reason a source's sync
	// recorded.
	Reason string `json:"reason"`
	// Message says it in a sentence.
	Message string `json:"message"`
	// Since is when the state began, where known; Until when it ends by
	// itself (a backoff's next try, a lease's end).
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// Chain is, for a resource waiting on its dependencies, the
	// dependencies it waits on, each waiting on the next, down to the
	// root cause, the last.
	Chain []Link `json:"chain,omitempty"`
	// Cause is the root cause's own explanation, when it has one.
	Cause *Why `json:"cause,omitempty"`
	// Suspension says who suspended it and why.
	Suspension *Suspension `json:"suspension,omitempty"`
	// Lease is the agent that holds the resource.
	Lease *Lease `json:"lease,omitempty"`
	// Attempt is how many attempts in a row failed, for a failed resource.
	Attempt int `json:"attempt,omitempty"`
	// Source is the resource's source, when it is not ready itself.
	Source *SourceState `json:"source,omitempty"`
	// Revision is the revision a source refused or is stalled on.
	Revision string `json:"revision,omitempty"`
	// Problems are a source's first problems, as file:line: message.
	Problems []string `json:"problems,omitempty"`
	// Actions are what someone can do about it.
	Actions []Action `json:"actions,omitempty"`
}

// Link is one resource of a dependency chain.
type Link struct {
	ID        int64  `json:"id,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Phase is the resource's status; empty when it does not exist.
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message,omitempty"`
	// Missing is true of a dependency that does not exist.
	Missing bool `json:"missing,omitempty"`
}

// Ref returns the link's kind, namespace and name.
func (l Link) Ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: l.Kind, Namespace: l.Namespace, Name: l.Name}
}

// Suspension is who suspended a resource or a source, and why.
type Suspension struct {
	// By is what suspends it: store.SuspendedByAPI, SuspendedByAnnotation
	// or SuspendedByConfig.
	By string `json:"by"`
	// Identity is the caller that suspended it through the API, as the
	// audit trail names it (an API token's name, oidc:<claim>).
	Identity string `json:"identity,omitempty"`
	// Reason is the reason given: the caller's, or the annotation
	// no8s.io/suspend-reason.
	Reason string `json:"reason,omitempty"`
	// Path is the file that declares the annotation.
	Path string `json:"path,omitempty"`
}

// Lease is the agent that holds a resource.
type Lease struct {
	Holder string `json:"holder"`
	// State is the holder's: alive, stopped or gone, or unknown when it
	// never recorded itself.
	State string    `json:"state"`
	Alive bool      `json:"alive"`
	Until time.Time `json:"until"`
}

// SourceState is a resource's source that is not ready.
type SourceState struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	// Suspended is true while the source is suspended: not fetched nor
	// synced, so the resource's declaration does not change.
	Suspended bool `json:"suspended,omitempty"`
}

// Action is something that can be done about it: the API call and the
// command line that do it.
type Action struct {
	Name string `json:"name"`
	API  string `json:"api,omitempty"`
	CLI  string `json:"cli,omitempty"`
}

// Resource is what an explanation needs to know of a resource.
type Resource struct {
	ID        int64
	Ref       manifest.ObjectRef
	Source    string
	Path      string
	Phase     manifest.Phase
	Message   string
	DependsOn []manifest.ObjectRef
	// Ready is true when the resource is what a dependent waits for: its
	// current generation reconciled and Ready, and not being deleted.
	Ready              bool
	Generation         int64
	RetryCount         int
	NextReconcileAt    *time.Time
	LastReconcileTime  *time.Time
	DeletionRequested  bool
	LeaseOwner         string
	LeaseExpiresAt     *time.Time
	SuspendedBy        string
	SuspendedAt        *time.Time
	SuspendedReason    string
	SuspendedIdentity  string
	Orphaned           bool
	ReconcileRequested bool
}

// Ready reports whether r is what a dependent waits for: its current
// generation reconciled and Ready, and not being deleted (as the
// reconciler judges dependencies).
func Ready(r *store.Resource) bool {
	c := manifest.FindCondition(r.Conditions, manifest.ConditionReady)
	return c != nil && c.Status == manifest.ConditionTrue && r.ObservedGeneration == r.Generation &&
		r.DeletionRequestedAt == nil
}

// Explained reports whether a resource has an explanation: it is not
// ready, or it is suspended.
func Explained(r *store.Resource) bool { return !Ready(r) || r.Suspended() }

// FromStore returns what an explanation needs of r.
func FromStore(r *store.Resource) *Resource {
	return &Resource{ID: r.ID, Ref: r.Ref(), Source: r.Source.Name, Path: r.Source.Path, Phase: r.Phase, Message: r.StatusMessage,
		DependsOn: r.DependsOn, Ready: Ready(r), Generation: r.Generation, RetryCount: r.RetryCount,
		NextReconcileAt: r.NextReconcileAt, LastReconcileTime: r.LastReconcileTime, DeletionRequested: r.DeletionRequestedAt != nil,
		LeaseOwner: r.LeaseOwner, LeaseExpiresAt: r.LeaseExpiresAt, SuspendedBy: r.SuspendedBy(), SuspendedAt: r.SuspendedAt,
		SuspendedReason: r.SuspendReason(), SuspendedIdentity: r.SuspendedIdentity, Orphaned: r.Orphaned,
		ReconcileRequested: r.ReconcileRequestedAt != nil}
}

// World is what an explanation looks things up in.
type World interface {
	// Resource returns the resource ref names, or nil when none exists.
	Resource(ref manifest.ObjectRef) *Resource
	// Source returns the named source, or nil.
	Source(name string) *store.Source
	// Agent returns the agent of that id, or nil when it never recorded
	// itself (or was forgotten).
	Agent(id string) *store.Agent
}

// ForResource explains why r is not ready, or is suspended; nil when it
// is ready and not suspended. now is the reader's clock.
func ForResource(r *Resource, w World, now time.Time) *Why {
	if r == nil || (r.Ready && r.SuspendedBy == "") {
		return nil
	}
	out := own(r, w, now, true)
	if src := w.Source(r.Source); src != nil && r.Source != store.APISource && !r.Orphaned &&
		(src.Phase != store.SourceReady || src.SuspendedBy != "") {
		out.Source = &SourceState{Name: src.Name, Phase: string(src.Phase), Message: oneLine(src.Message, 300), Suspended: src.SuspendedBy != ""}
		what := string(src.Phase)
		if src.SuspendedBy != "" {
			what = "suspended"
		}
		out.Message += fmt.Sprintf(" (its source %q is %s)", src.Name, what)
	}
	return out
}

// own explains r by itself and, when deps is true, its dependencies.
func own(r *Resource, w World, now time.Time, deps bool) *Why {
	switch {
	case r.SuspendedBy != "":
		return suspended(r)
	case r.Orphaned:
		return &Why{Reason: SourceOrphaned,
			Message: fmt.Sprintf("its source %q is orphaned: no agent's configuration lists it, so the resource is neither reconciled nor destroyed until the source comes back, or is forgotten or pruned", r.Source),
			Actions: retiredSourceActions(r.Source)}
	}
	if deps && !r.DeletionRequested {
		if out := dependencies(r, w, now); out != nil {
			return out
		}
	}
	if r.LeaseOwner != "" && r.LeaseExpiresAt != nil {
		return leased(r, w, now)
	}
	msg := r.Message
	switch {
	case r.Phase == manifest.PhaseFailed && r.NextReconcileAt != nil && r.NextReconcileAt.After(now):
		return &Why{Reason: BackingOff, Attempt: r.RetryCount, Until: r.NextReconcileAt, Since: r.LastReconcileTime,
			Message: fmt.Sprintf("attempt %d failed: %s; next try at %s (in %s)", max(r.RetryCount, 1), orNone(msg),
				r.NextReconcileAt.UTC().Format(time.RFC3339), r.NextReconcileAt.Sub(now).Round(time.Second)),
			Actions: []Action{reconcileAction(r)}}
	case r.Phase == manifest.PhaseFailed:
		return &Why{Reason: Failed, Attempt: r.RetryCount, Since: r.LastReconcileTime,
			Message: fmt.Sprintf("attempt %d failed: %s; the next try is due now, for the next free worker", max(r.RetryCount, 1), orNone(msg))}
	case r.DeletionRequested:
		if msg == "" {
			msg = "its deletion waits for a free worker"
		}
		return &Why{Reason: Deleting, Message: msg}
	}
	if msg == "" || r.Phase == manifest.PhaseReady {
		msg = fmt.Sprintf("generation %d waits for a free worker", r.Generation)
	}
	out := &Why{Reason: Pending, Message: msg}
	if r.NextReconcileAt != nil && r.NextReconcileAt.After(now) {
		out.Until = r.NextReconcileAt
	}
	return out
}

func orNone(msg string) string {
	if msg == "" {
		return "no message"
	}
	return msg
}

// suspended explains a suspension.
func suspended(r *Resource) *Why {
	s := &Suspension{By: r.SuspendedBy, Identity: r.SuspendedIdentity, Reason: oneLine(r.SuspendedReason, store.MaxSuspendReason)}
	var msg string
	var actions []Action
	switch r.SuspendedBy {
	case store.SuspendedByAnnotation:
		s.Path = r.Path
		msg = fmt.Sprintf("suspended by its annotation %s: \"true\" in %s of source %q", manifest.AnnotationSuspend, orDecl(r.Path), r.Source)
	default:
		msg = "suspended through the API"
		if s.Identity != "" {
			msg += " by " + s.Identity
		}
		actions = []Action{{Name: "resume", API: fmt.Sprintf("POST /api/v1/resources/%d/resume", r.ID),
			CLI: "no8s-agent resume resource " + cliRef(r.Ref)}}
	}
	if s.Reason != "" {
		msg += ": " + s.Reason
	}
	return &Why{Reason: Suspended, Message: msg + "; it is not reconciled, checked for drift or destroyed until resumed",
		Since: r.SuspendedAt, Suspension: s, Actions: actions}
}

func orDecl(path string) string {
	if path == "" {
		return "its declaration"
	}
	return path
}

// cliRef is how the command line names a resource: KIND/NAME, or
// KIND/NAMESPACE/NAME.
func cliRef(ref manifest.ObjectRef) string {
	if ref.Namespace == "" {
		return ref.Kind + "/" + ref.Name
	}
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

func reconcileAction(r *Resource) Action {
	return Action{Name: "reconcile now", API: fmt.Sprintf("POST /api/v1/resources/%d/reconcile", r.ID),
		CLI: "no8s-agent reconcile resource " + cliRef(r.Ref)}
}

func retiredSourceActions(name string) []Action {
	return []Action{
		{Name: "forget", API: fmt.Sprintf("DELETE /api/v1/sources/%s?mode=forget", name), CLI: "no8s-agent delete source " + name + " --mode forget"},
		{Name: "prune", API: fmt.Sprintf("DELETE /api/v1/sources/%s?mode=prune", name), CLI: "no8s-agent delete source " + name + " --mode prune"},
	}
}

// leased explains a resource an agent holds.
func leased(r *Resource, w World, now time.Time) *Why {
	until := *r.LeaseExpiresAt
	l := &Lease{Holder: r.LeaseOwner, Until: until, State: "unknown"}
	if a := w.Agent(r.LeaseOwner); a != nil {
		st := a.State(now)
		l.State, l.Alive = string(st), st == store.AgentAlive
	}
	var msg string
	switch {
	case !until.After(now):
		msg = fmt.Sprintf("the lease of agent %s ended at %s: the next free worker takes the resource over", l.Holder, until.UTC().Format(time.RFC3339))
	case l.Alive:
		msg = fmt.Sprintf("agent %s is reconciling it (lease until %s)", l.Holder, until.UTC().Format(time.RFC3339))
	default:
		msg = fmt.Sprintf("agent %s holds it but is %s: another agent takes it over when the lease ends at %s",
			l.Holder, l.State, until.UTC().Format(time.RFC3339))
	}
	if r.Message != "" && l.Alive && until.After(now) {
		msg += ": " + r.Message
	}
	return &Why{Reason: Reconciling, Message: msg, Lease: l, Until: &until}
}

// dependencies follows r's first dependency that is not ready, then that
// one's, down to the root cause; nil when every dependency is ready.
func dependencies(r *Resource, w World, now time.Time) *Why {
	var (
		chain  []Link
		reason = DependencyNotReady
		others int
		root   *Resource
	)
	seen := map[manifest.ObjectRef]bool{r.Ref: true}
	cur := r
	for len(chain) < maxChain {
		var next *Resource
		var ref manifest.ObjectRef
		found := false
		for _, d := range cur.DependsOn {
			dr := w.Resource(d)
			if dr != nil && dr.Ready {
				continue
			}
			if found {
				if cur == r {
					others++
				}
				continue
			}
			found, ref, next = true, d, dr
		}
		if !found {
			break
		}
		if seen[ref] {
			reason = DependencyCycle
			chain = append(chain, link(ref, next))
			break
		}
		seen[ref] = true
		chain = append(chain, link(ref, next))
		if next == nil {
			reason = DependencyMissing
			break
		}
		root, cur = next, next
	}
	if len(chain) == 0 {
		return nil
	}
	names := make([]string, len(chain))
	for i, l := range chain {
		names[i] = l.Ref().String()
	}
	last := chain[len(chain)-1]
	out := &Why{Reason: reason, Chain: chain}
	switch reason {
	case DependencyCycle:
		out.Message = fmt.Sprintf("dependency cycle: %s -> %s", r.Ref, strings.Join(names, " -> "))
	case DependencyMissing:
		out.Message = fmt.Sprintf("waits on %s: %s does not exist", strings.Join(names, ", which waits on "), last.Ref())
	default:
		out.Cause = own(root, w, now, false)
		out.Message = fmt.Sprintf("waits on %s: %s is %s", strings.Join(names, ", which waits on "), last.Ref(), last.Phase)
		if out.Cause != nil && out.Cause.Message != "" {
			out.Message += ": " + out.Cause.Message
		}
	}
	if others > 0 {
		out.Message += fmt.Sprintf(" (and %d more dependencies are not ready)", others)
	}
	return out
}

func link(ref manifest.ObjectRef, r *Resource) Link {
	l := Link{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
	if r == nil {
		l.Missing, l.Message = true, "does not exist"
		return l
	}
	l.ID, l.Phase, l.Message = r.ID, string(r.Phase), r.Message
	return l
}

// ForSource explains why s is not ready, or is suspended; nil when it is
// ready and not suspended.
func ForSource(s *store.Source) *Why {
	if s == nil {
		return nil
	}
	if s.SuspendedBy != "" {
		sp := &Suspension{By: s.SuspendedBy, Identity: s.SuspendedIdentity, Reason: oneLine(s.SuspendedReason, store.MaxSuspendReason)}
		msg := "suspended through the API"
		var actions []Action
		if s.SuspendedBy == store.SuspendedByConfig {
			msg = "suspended by suspend: true in an agent's configuration"
		} else {
			if sp.Identity != "" {
				msg += " by " + sp.Identity
			}
			actions = []Action{{Name: "resume", API: "POST /api/v1/sources/" + s.Name + "/resume", CLI: "no8s-agent resume source " + s.Name}}
		}
		if sp.Reason != "" {
			msg += ": " + sp.Reason
		}
		return &Why{Reason: Suspended, Message: msg + "; it is neither fetched nor synced until resumed", Since: s.SuspendedAt,
			Suspension: sp, Actions: actions}
	}
	switch s.Phase {
	case store.SourceReady:
		return nil
	case store.SourceOrphaned:
		return &Why{Reason: Orphaned,
			Message: "no agent's configuration lists it: its resources are neither reconciled nor destroyed until it comes back, or is forgotten or pruned",
			Actions: retiredSourceActions(s.Name)}
	case store.SourcePruning:
		return &Why{Reason: Pruning, Message: "its resources are being destroyed; it goes once the last of them is gone"}
	case store.SourcePending:
		msg := "not synced yet"
		if s.Message != "" {
			msg += ": " + s.Message
		}
		return &Why{Reason: NotSynced, Message: msg}
	}
	// Failed or stalled: the sync recorded "Reason: message".
	reason, msg := splitReason(s.Message)
	if reason == "" {
		reason = string(s.Phase)
	}
	out := &Why{Reason: reason, Message: msg, Since: s.LastSyncTime, Revision: string(s.LastAttemptedRevision),
		Problems: problemLines(s.Errors)}
	if s.Phase == store.SourceStalled && s.LastAttemptedRevision != "" {
		rev := string(s.LastAttemptedRevision)
		out.Actions = []Action{{Name: "approve",
			API: "POST /api/v1/sources/" + s.Name + "/approve?revision=" + rev,
			CLI: "no8s-agent approve source " + s.Name + " --revision " + rev}}
	}
	return out
}

// splitReason splits a source's message into the reason its sync
// recorded (a CamelCase word before a colon) and the rest.
func splitReason(msg string) (string, string) {
	head, rest, ok := strings.Cut(msg, ": ")
	if !ok || head == "" || len(head) > 64 || !unicode.IsUpper(rune(head[0])) {
		return "", msg
	}
	for _, c := range head {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return "", msg
		}
	}
	return head, rest
}

// problemLines returns the first problems as file:line: message.
func problemLines(ps []manifest.Problem) []string {
	var out []string
	for i, p := range ps {
		if i == maxProblems {
			out = append(out, fmt.Sprintf("and %d more", len(ps)-maxProblems))
			break
		}
		where := p.File
		if where == "" {
			where = "-"
		}
		if p.Line > 0 {
			where += fmt.Sprintf(":%d", p.Line)
		}
		out = append(out, where+": "+oneLine(p.Message, 500))
	}
	return out
}

// oneLine returns s on one line, control characters replaced by spaces,
// cut to at most n characters: text from a manifest (an annotation) is not
// bounded as a reason given through the API is. A cut ends at a space: the
// word it would go through is left out whole. Secret values are masked in
// the answers as whole values only, and the start of one the cut left
// would be recognised by none.
func oneLine(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > n {
		cut := string([]rune(s)[:n+1])
		s = strings.TrimRightFunc(cut[:max(strings.LastIndexFunc(cut, unicode.IsSpace), 0)], unicode.IsSpace) + "…"
	}
	return s
}
