package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/store"
)

// The verbs a token may be granted.
const (
	VerbGet       = "get"
	VerbList      = "list"
	VerbCreate    = "create"
	VerbUpdate    = "update"
	VerbDelete    = "delete"
	VerbReconcile = "reconcile"
	VerbSync      = "sync"
	VerbApprove   = "approve"
	VerbSuspend   = "suspend"
)

// Verbs lists every verb.
var Verbs = []string{VerbGet, VerbList, VerbCreate, VerbUpdate, VerbDelete, VerbReconcile, VerbSync, VerbApprove, VerbSuspend}

// Grant allows verbs on resources of some kinds in some sources and
// namespaces; an empty list of kinds, sources or namespaces means all of
// them.
type Grant struct {
	Verbs   []string
	Kinds   []string
	Sources []string
	// Namespaces, when set, narrows the grant to resources in these
	// namespaces, as a Kubernetes Role is bound in one: it covers no
	// cluster-scoped resource, no source and no write of a resource type,
	// which are about every namespace. Lists and event streams that name
	// no namespace show only these; a resource in another is a 403.
	Namespaces []string
	// Actions, when set, narrows the grant to writes to resources whose
	// action instance is one of these: the instance a resource names, its
	// type's default when it names none, else noop; a write is checked
	// against the resource as it is and as it will be. Such a grant covers
	// only the verbs of ActionVerbs, on resources: no read, list, type or
	// source.
	Actions []string
}

// Token is an API token with a name (written to the log and the sync
// history of the writes it makes) and what it may do.
type Token struct {
	Name string
	// Value is the secret a client sends. An entry without one is for
	// OpenID Connect ID tokens: its grants go to the ID tokens whose claim
	// names it, and to nothing else.
	Value  string
	Grants []Grant
	// idToken marks the token an ID token was given; its Name is then
	// IDTokenPrefix and the claim's value.
	idToken bool
	// session marks the token of a dashboard session, whose subject and
	// email the audit trail shows.
	session        bool
	subject, email string
}

// IDTokenPrefix starts the name the log and the sync history give a
// request made with an ID token, before the value of its claim, so that it
// is never taken for a token of the configuration.
const IDTokenPrefix = "oidc:"

// actor is the author of the token's writes in the sync history.
func (t *Token) actor() string {
	if t.idToken {
		return t.Name
	}
	return "token " + t.Name
}

// allowsVerb reports whether some grant has the verb, whatever its scope.
func (t *Token) allowsVerb(verb string) bool {
	for _, g := range t.Grants {
		if slices.Contains(g.Verbs, verb) {
			return true
		}
	}
	return false
}

// allows reports whether a grant has the verb for resources of kind in
// source, in no namespace. An empty kind or source stands for all of them,
// or for none (a source's own verbs are about no kind): only a grant
// without that restriction covers it, since a grant limited to some kinds
// is about resources of those kinds alone. Grants limited to action
// instances or to namespaces do not cover it either.
func (t *Token) allows(verb, kind, source string) bool {
	return t.allowsAction(verb, kind, source, "", "")
}

// anyAction stands, in a check made before the write's action instance is
// known, for whichever it will be: a grant limited to some instances covers
// it, and the write is checked again once the instance is known.
const anyAction = "*"

// anyNamespace stands, in a check made before a resource's namespace is
// known, for whichever it will be: a grant limited to some namespaces covers
// it, and the request is checked again once the namespace is known. Reads
// of resource types, which are schemas every namespace shares, are made
// with it too.
const anyNamespace = "*"

// allowsAction is allows for a resource in namespace ns ("" for a
// cluster-scoped one, or what is in no namespace) whose action instance is
// inst; inst "" is what is no one resource, which grants limited to
// instances do not cover.
func (t *Token) allowsAction(verb, kind, source, ns, inst string) bool {
	for _, g := range t.Grants {
		if !slices.Contains(g.Verbs, verb) {
			continue
		}
		if len(g.Kinds) > 0 && (kind == "" || !slices.Contains(g.Kinds, kind)) {
			continue
		}
		if len(g.Sources) > 0 && (source == "" || !slices.Contains(g.Sources, source)) {
			continue
		}
		if len(g.Namespaces) > 0 && ns != anyNamespace && (ns == "" || !slices.Contains(g.Namespaces, ns)) {
			continue
		}
		if len(g.Actions) > 0 && (!slices.Contains(ActionVerbs, verb) ||
			inst != anyAction && (inst == "" || !slices.Contains(g.Actions, inst))) {
			continue
		}
		return true
	}
	return false
}

// narrowsNamespaces reports whether a grant is limited to namespaces.
func (t *Token) narrowsNamespaces() bool {
	return slices.ContainsFunc(t.Grants, func(g Grant) bool { return len(g.Namespaces) > 0 })
}

// namespaces returns the namespaces in which the token may do verb to
// resources of kind in source (each "" for all of them, as allows has it):
// all is true when every namespace, and cluster-scoped resources, are
// covered; otherwise nss lists the namespaces, sorted, none when nothing
// is.
func (t *Token) namespaces(verb, kind, source string) (all bool, nss []string) {
	for _, g := range t.Grants {
		if !slices.Contains(g.Verbs, verb) || len(g.Actions) > 0 {
			continue
		}
		if len(g.Kinds) > 0 && (kind == "" || !slices.Contains(g.Kinds, kind)) {
			continue
		}
		if len(g.Sources) > 0 && (source == "" || !slices.Contains(g.Sources, source)) {
			continue
		}
		if len(g.Namespaces) == 0 {
			return true, nil
		}
		for _, ns := range g.Namespaces {
			if !slices.Contains(nss, ns) {
				nss = append(nss, ns)
			}
		}
	}
	slices.Sort(nss)
	return false, nss
}

// reads reports whether the token may read resources of kind in namespace
// ns ("" for cluster-scoped ones), from whichever source: what a write may
// name in dependsOn, whose state the dependent would tell.
func (t *Token) reads(kind, ns string) bool {
	for _, g := range t.Grants {
		if slices.Contains(g.Verbs, VerbGet) && len(g.Actions) == 0 &&
			(len(g.Kinds) == 0 || slices.Contains(g.Kinds, kind)) &&
			(len(g.Namespaces) == 0 || ns != "" && slices.Contains(g.Namespaces, ns)) {
			return true
		}
	}
	return false
}

// narrowsActions reports whether a grant is limited to action instances:
// only then does a check need a resource's instance.
func (t *Token) narrowsActions() bool {
	return slices.ContainsFunc(t.Grants, func(g Grant) bool { return len(g.Actions) > 0 })
}

// ActionVerbs are the verbs a grant limited to action instances covers:
// the writes to one resource, which run its action.
var ActionVerbs = []string{VerbCreate, VerbUpdate, VerbDelete, VerbReconcile, VerbSuspend}

// Names of the tokens that stand for ReadToken and WriteToken.
const (
	ReadTokenName  = "read"
	WriteTokenName = "write"
)

// IdentityProvider verifies bearer tokens that are ID tokens and returns
// the value of the claim that names the API token whose grants apply.
// Errors wrap oidc.ErrInvalid (401) or oidc.ErrUnavailable (503).
type IdentityProvider interface {
	Name(ctx context.Context, raw string) (string, error)
}

// tokenKey carries the request's token in its context.
type tokenKey struct{}

// requestToken returns the token the request was authorized with; nil when
// it needed none (reads while they are open).
func requestToken(ctx context.Context) *Token {
	t, _ := ctx.Value(tokenKey{}).(*Token)
	return t
}

// TokenName returns the name of the token a request was authorized with,
// or "" when it needed none.
func TokenName(ctx context.Context) string {
	if t := requestToken(ctx); t != nil {
		return t.Name
	}
	return ""
}

// may refuses with 403 what the request's token may not do to a resource
// of kind in source and namespace ns; kind "" is every kind, ns "" a
// cluster-scoped resource (see allowsAction).
func may(ctx context.Context, verb, kind, source, ns string) error {
	return mayAction(ctx, verb, kind, source, ns, "")
}

// mayAction is may for a resource whose action instance is inst (see
// allowsAction).
func mayAction(ctx context.Context, verb, kind, source, ns, inst string) error {
	t := requestToken(ctx)
	if t == nil || t.allowsAction(verb, kind, source, ns, inst) {
		return nil
	}
	what := "resources of every kind"
	if kind != "" {
		what = kind
	}
	// The namespace matters only to tokens whose grants are limited to
	// some: for the others, the message stays what it was.
	nsScope := ""
	if t.narrowsNamespaces() && ns != anyNamespace {
		if ns == "" {
			what += " (cluster-scoped)"
		} else {
			what += " in namespace " + ns
			nsScope = ns
		}
	}
	where := "every source"
	if source != "" {
		where = "source " + source
	}
	if inst == anyAction {
		inst = ""
	}
	with := ""
	if inst != "" {
		with = " with action " + inst
	}
	held := ""
	if t.narrowsNamespaces() {
		held = "; its grants hold namespaces " + describeNamespaces(t)
	}
	return errorf(http.StatusForbidden, "token %q may not %s %s in %s%s (missing permission %s on %s%s)",
		t.Name, verb, what, where, with, verb, describeScope(kind, source, nsScope, inst), held)
}

// describeNamespaces lists the namespaces a token's grants hold, for
// messages.
func describeNamespaces(t *Token) string {
	var nss []string
	for _, g := range t.Grants {
		for _, ns := range g.Namespaces {
			if !slices.Contains(nss, ns) {
				nss = append(nss, ns)
			}
		}
	}
	slices.Sort(nss)
	return "[" + strings.Join(nss, ", ") + "]"
}

// mayType refuses with 403 what the request's token may not do to the
// resource type name of source. Types are schemas every namespace shares:
// a grant limited to namespaces reads them, and writes none.
func mayType(ctx context.Context, verb, name, source string) error {
	if verb == VerbGet || verb == VerbList {
		return may(ctx, verb, name, source, anyNamespace)
	}
	err := may(ctx, verb, name, source, "")
	if t := requestToken(ctx); err != nil && t.narrowsNamespaces() && t.allowsAction(verb, name, source, anyNamespace, "") {
		return errorf(http.StatusForbidden, "token %q may not %s resource type %s: resource types are cluster-wide, and its grants "+
			"that allow %s hold only namespaces %s (a grant without namespaces is needed)", t.Name, verb, name, verb, describeNamespaces(t))
	}
	return err
}

// mayNamespace refuses with 403 a request about resources in namespace ns
// made with a token none of whose grants for verb holds it, before
// anything is looked up there.
func mayNamespace(ctx context.Context, verb, ns string) error {
	t := requestToken(ctx)
	if t == nil {
		return nil
	}
	for _, g := range t.Grants {
		if slices.Contains(g.Verbs, verb) && len(g.Actions) == 0 && (len(g.Namespaces) == 0 || slices.Contains(g.Namespaces, ns)) {
			return nil
		}
	}
	return errorf(http.StatusForbidden, "token %q may not %s resources in namespace %s (missing permission %s on namespaces [%s]; its grants hold namespaces %s)",
		t.Name, verb, ns, verb, ns, describeNamespaces(t))
}

// instance is the action instance a resource runs whose action (its own,
// else its type's, as a write fills it in) is the first name set, else
// noop; a plugin's name stands for its one instance. It is "" when the
// request's token has no grant limited to instances: nothing needs it then.
func (s *Server) instance(ctx context.Context, names ...string) string {
	if t := requestToken(ctx); t == nil || !t.narrowsActions() {
		return ""
	}
	name := cmp.Or(append(names, action.Noop)...)
	if s.opts.Actions != nil {
		if i, err := s.opts.Actions.Resolve(name); err == nil {
			return i.Name
		}
	}
	return name
}

// mayOn refuses with 403 what the request's token may not do to the
// stored resource r.
func (s *Server) mayOn(ctx context.Context, verb string, r *store.Resource) error {
	return mayAction(ctx, verb, r.Kind, r.Source.Name, r.Namespace, s.instance(ctx, r.Action))
}

// maySource refuses with 403 what the request's token may not do to a source.
func maySource(ctx context.Context, verb, source string) error {
	t := requestToken(ctx)
	if t == nil || t.allows(verb, "", source) {
		return nil
	}
	return errorf(http.StatusForbidden, "token %q may not %s source %s (missing permission %s on sources [%s])",
		t.Name, verb, source, verb, source)
}

func describeScope(kind, source, ns, inst string) string {
	var parts []string
	if kind != "" {
		parts = append(parts, "kinds ["+kind+"]")
	}
	if ns != "" {
		parts = append(parts, "namespaces ["+ns+"]")
	}
	if source != "" {
		parts = append(parts, "sources ["+source+"]")
	}
	if inst != "" {
		parts = append(parts, "actions ["+inst+"]")
	}
	if len(parts) == 0 {
		return "every kind and source"
	}
	return strings.Join(parts, ", ")
}

// tokens returns every token the server knows: the scoped ones, and the
// read and write tokens as tokens of their own.
func tokens(opts Options) []*Token {
	var out []*Token
	if opts.WriteToken != "" {
		out = append(out, &Token{Name: WriteTokenName, Value: opts.WriteToken, Grants: []Grant{{Verbs: Verbs}}})
	}
	if opts.ReadToken != "" {
		out = append(out, &Token{Name: ReadTokenName, Value: opts.ReadToken, Grants: []Grant{{Verbs: []string{VerbGet, VerbList}}}})
	}
	for i := range opts.Tokens {
		out = append(out, &opts.Tokens[i])
	}
	return out
}

// routeVerb is the verb a route needs before it looks at what it serves.
func routeVerb(pattern string, need access) string {
	if v, ok := routeVerbs[pattern]; ok {
		return v
	}
	if need == write {
		return VerbUpdate
	}
	return VerbGet
}

// routeVerbs are the verbs of the routes; reads not listed are get.
var routeVerbs = map[string]string{
	"GET /api/v1/resource-types":            VerbList,
	"POST /api/v1/resource-types":           VerbCreate,
	"PUT /api/v1/resource-types/{id}":       VerbUpdate,
	"DELETE /api/v1/resource-types/{id}":    VerbDelete,
	"GET /api/v1/resources":                 VerbList,
	"POST /api/v1/resources":                VerbCreate,
	"PUT /api/v1/resources/{id}":            VerbUpdate,
	"DELETE /api/v1/resources/{id}":         VerbDelete,
	"POST /api/v1/resources/{id}/reconcile": VerbReconcile,
	"POST /api/v1/resources/{id}/suspend":   VerbSuspend,
	"POST /api/v1/resources/{id}/resume":    VerbSuspend,
	"GET /api/v1/sources":                   VerbList,
	"POST /api/v1/sources/{name}/sync":      VerbSync,
	"POST /api/v1/sources/{name}/approve":   VerbApprove,
	"POST /api/v1/sources/{name}/suspend":   VerbSuspend,
	"POST /api/v1/sources/{name}/resume":    VerbSuspend,
	"DELETE /api/v1/sources/{name}":         VerbDelete,
	"GET /api/v1/agents":                    VerbList,
	"GET /api/v1/plugins/actions":           VerbList,
	"GET " + eventsPath:                     VerbList,
	resourceEventsPattern:                   VerbGet,
	"GET /metrics":                          VerbList,
	"GET /":                                 VerbList,
}

// describeGrants lists what a token may do, for messages.
func describeGrants(t *Token) string {
	var out []string
	for _, g := range t.Grants {
		s := strings.Join(g.Verbs, ",")
		if len(g.Kinds) > 0 {
			s += " on " + strings.Join(g.Kinds, ",")
		}
		if len(g.Sources) > 0 {
			s += " in " + strings.Join(g.Sources, ",")
		}
		if len(g.Namespaces) > 0 {
			s += " in namespaces " + strings.Join(g.Namespaces, ",")
		}
		if len(g.Actions) > 0 {
			s += " with " + strings.Join(g.Actions, ",")
		}
		out = append(out, s)
	}
	return fmt.Sprintf("[%s]", strings.Join(out, "; "))
}

// Allows reports whether the caller of r, a request the server authorized
// (the dashboard's pages), may do verb to source when kind is empty, else to
// a resource of kind in source and namespace ns whose action instance is
// action: what the endpoint of that write would check of the same caller.
// It is false for a request that carried no token (reads open to anyone),
// since writes need one. A caller signed in some other way is a token in
// the request's context like any other.
func (s *Server) Allows(r *http.Request, verb, kind, ns, source, action string) bool {
	ctx := r.Context()
	t := requestToken(ctx)
	switch {
	case t == nil:
		return false
	case kind == "":
		return t.allows(verb, "", source)
	}
	return t.allowsAction(verb, kind, source, ns, s.instance(ctx, action))
}

// mayResource refuses with 403 what the request's token may not do to the
// resource with id. A token whose grant covers every kind and source is not
// made to wait for the resource's row; for the others, a resource that does
// not exist is a 404.
func (s *Server) mayResource(r *http.Request, verb string, id int64) error {
	t := requestToken(r.Context())
	if t == nil || t.allows(verb, "", "") {
		return nil
	}
	cur, err := s.store.GetResource(r.Context(), id)
	if err != nil {
		return err
	}
	return s.mayOn(r.Context(), verb, cur)
}
