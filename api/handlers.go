package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
	"github.com/no8s/no8s-agent/why"
)

// List limits: a list answers DefaultLimit items unless asked for up to MaxLimit.
const (
	DefaultLimit = 500
	MaxLimit     = 1000
)

// historyLimit caps history lists unless ?limit= asks for fewer or more.
const historyLimit = 100

func pathID(r *http.Request) (int64, error) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, errorf(http.StatusBadRequest, "id: %q is not a positive integer", raw)
	}
	return id, nil
}

// intParam reads an optional non-negative integer query parameter.
func intParam(q url.Values, name string, def, maxVal int) (int, error) {
	raw := q.Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		return 0, errorf(http.StatusBadRequest, "%s: %q is not a non-negative integer", name, raw)
	}
	if maxVal > 0 && n > maxVal {
		return 0, errorf(http.StatusBadRequest, "%s: at most %d", name, maxVal)
	}
	return n, nil
}

// listLimit reads ?limit=: def when absent or 0, at most MaxLimit.
func listLimit(r *http.Request, def int) (int, error) {
	n, err := intParam(r.URL.Query(), "limit", def, MaxLimit)
	if n == 0 {
		n = def
	}
	return n, err
}

// --- resource types ---

func (s *Server) listTypes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := store.TypeFilter{Name: q.Get("name"), Source: q.Get("source")}
	if err := mayType(r.Context(), VerbList, f.Name, f.Source); err != nil {
		return err
	}
	status := q.Get("status")
	if status != "" && status != TypeActive && status != TypeDeprecated {
		return errorf(http.StatusBadRequest, "status: %q is not active or deprecated", status)
	}
	limit, err := listLimit(r, MaxLimit)
	if err != nil {
		return err
	}
	var out []ResourceType
	err = s.view(r, func(m *readModel) error {
		rows := m.typesLocked(f)
		out = make([]ResourceType, 0, min(len(rows), limit))
		for _, t := range rows {
			if v := NewResourceType(t); (status == "" || v.Status == status) && len(out) < limit {
				out = append(out, v)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getType(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var t *store.ResourceType
	err = s.view(r, func(m *readModel) error {
		for _, c := range m.types {
			if c.ID == id {
				t = c
				return nil
			}
		}
		return errorf(http.StatusNotFound, "resource type %d not found", id)
	})
	if err != nil {
		return err
	}
	if err := mayType(r.Context(), VerbGet, t.Name, t.Source.Name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewResourceType(t))
	return nil
}

func (s *Server) getTypeByName(w http.ResponseWriter, r *http.Request) error {
	var t *store.ResourceType
	name, version := r.PathValue("name"), r.PathValue("version")
	err := s.view(r, func(m *readModel) error {
		for _, c := range m.typesLocked(store.TypeFilter{Name: name}) {
			if c.Version == version {
				t = c
				return nil
			}
		}
		return errorf(http.StatusNotFound, "resource type %s %s not found", name, version)
	})
	if err != nil {
		return err
	}
	if err := mayType(r.Context(), VerbGet, t.Name, t.Source.Name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewResourceType(t))
	return nil
}

func (s *Server) createType(w http.ResponseWriter, r *http.Request) error {
	var req ResourceTypeRequest
	if err := decodeBody(r, &req, readOnlyTypeFields); err != nil {
		return err
	}
	if err := mayType(r.Context(), VerbCreate, req.Name, store.APISource); err != nil {
		return err
	}
	if req.Version == "" {
		return &Error{Status: http.StatusBadRequest, Message: "version: required (e.g. v1)",
			Details: []Detail{{Field: "version", Pointer: "/version", Message: "required"}}}
	}
	return s.applyType(w, r, &req)
}

// applyType writes a type version the API declares.
func (s *Server) applyType(w http.ResponseWriter, r *http.Request, req *ResourceTypeRequest) error {
	written, err := s.syncer.ApplyDocument(r.Context(), func(ctx context.Context, tx store.Store) ([]byte, error) {
		// The document may be built more than once: fill in a copy.
		req := *req
		// A POST of a version that exists updates it.
		switch cur, err := tx.GetResourceTypeByName(ctx, req.Name, req.Version); {
		case err == nil:
			if err := mayType(ctx, VerbUpdate, cur.Name, cur.Source.Name); err != nil {
				return nil, err
			}
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		// A new version of a type the API declared before keeps what the
		// request leaves out, as one type shares group, description and action.
		versions, err := tx.ListResourceTypes(ctx, store.TypeFilter{Name: req.Name, Source: store.APISource})
		if err != nil {
			return nil, err
		}
		if len(versions) > 0 {
			v := versions[0]
			req.Group = cmp.Or(req.Group, v.Group)
			req.Description = cmp.Or(req.Description, v.Description)
			req.Action = cmp.Or(req.Action, v.Action)
			req.Scope = cmp.Or(req.Scope, string(v.Scope))
			if req.Metadata == nil {
				req.Metadata = v.Annotations
			}
			if req.DriftInterval == "" && v.DriftInterval > 0 {
				req.DriftInterval = v.DriftInterval.String()
			}
		}
		return typeDocument(&req)
	})
	var owned *store.OwnerConflictError
	switch {
	case errors.As(err, &owned):
		return &Error{Status: http.StatusConflict, Message: ownedMessage(owned.What, owned.Owner)}
	case err != nil:
		return &fieldError{err: err, fields: typeFields}
	}
	status := http.StatusOK
	if written.Outcome == store.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, NewResourceType(written.Type))
	return nil
}

// TypeUpdate is the body of PUT /api/v1/resource-types/{id}: the fields
// given replace the stored ones; name and version cannot change.
type TypeUpdate struct {
	Name *string `json:"name"`
	// Scope may change only while the type has no resources.
	Scope         *string         `json:"scope"`
	Version       *string         `json:"version"`
	Group         *string         `json:"group"`
	Description   *string         `json:"description"`
	Action        *string         `json:"action"`
	DriftInterval *string         `json:"drift_interval"`
	Schema        json.RawMessage `json:"schema"`
	Status        *string         `json:"status"`
	// Metadata replaces the type's annotations when given.
	Metadata *map[string]string `json:"metadata"`
}

// updateType replaces fields of a type version the API declared.
func (s *Server) updateType(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var up TypeUpdate
	if err := decodeBody(r, &up, readOnlyTypeFields); err != nil {
		return err
	}
	cur, err := s.store.GetResourceType(r.Context(), id)
	if err != nil {
		return err
	}
	if err := mayType(r.Context(), VerbUpdate, cur.Name, cur.Source.Name); err != nil {
		return err
	}
	if cur.Source.Name != store.APISource {
		return &Error{Status: http.StatusConflict, Message: ownedMessage("resource type "+cur.Name+"/"+cur.Version, cur.Source)}
	}
	for _, f := range []struct {
		name   string
		given  *string
		stored string
	}{{"name", up.Name, cur.Name}, {"version", up.Version, cur.Version}} {
		if f.given != nil && *f.given != f.stored {
			msg := fmt.Sprintf("%s: cannot change (%q); declare another version or type instead", f.name, f.stored)
			return &Error{Status: http.StatusBadRequest, Message: msg, Details: []Detail{{Field: f.name, Pointer: "/" + f.name, Message: msg}}}
		}
	}
	req := ResourceTypeRequest{Name: cur.Name, Version: cur.Version, Group: cur.Group, Description: cur.Description,
		Action: cur.Action, Schema: cur.Schema, Status: TypeActive, Metadata: cur.Annotations, Scope: string(cur.ScopeOf())}
	if up.Metadata != nil {
		req.Metadata = *up.Metadata
	}
	if cur.Deprecated {
		req.Status = TypeDeprecated
	}
	if cur.DriftInterval > 0 {
		req.DriftInterval = cur.DriftInterval.String()
	}
	for dst, src := range map[*string]*string{&req.Group: up.Group, &req.Description: up.Description, &req.Action: up.Action,
		&req.DriftInterval: up.DriftInterval, &req.Status: up.Status, &req.Scope: up.Scope} {
		if src != nil {
			*dst = *src
		}
	}
	if up.Schema != nil {
		req.Schema = up.Schema
	}
	return s.applyType(w, r, &req)
}

// deleteType removes a type version the API declared, unless resources use it.
func (s *Server) deleteType(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	cur, err := s.store.GetResourceType(r.Context(), id)
	if err != nil {
		return err
	}
	if err := mayType(r.Context(), VerbDelete, cur.Name, cur.Source.Name); err != nil {
		return err
	}
	_, err = s.syncer.DeleteType(r.Context(), id)
	var owned *store.OwnerConflictError
	switch {
	case errors.As(err, &owned):
		return &Error{Status: http.StatusConflict, Message: ownedMessage(owned.What, owned.Owner)}
	case errors.Is(err, store.ErrInUse):
		return errorf(http.StatusConflict, "resource type %s/%s is in use: delete its resources first", cur.Name, cur.Version)
	case err != nil:
		return err
	}
	// 204, as the predecessor answers: the type is gone, nothing to show.
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// --- resources ---

func (s *Server) listResources(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := store.ResourceFilter{Kind: q.Get("kind"), Source: q.Get("source"), Action: q.Get("action_plugin")}
	if f.Action != "" && s.opts.Actions != nil {
		// A resource is bound to an instance by its name or by its
		// plugin's: either finds it, and the plugin's finds all of its
		// instances' resources.
		f.Actions = matchingActions(s.opts.Actions, f.Action)
	}
	if st := q.Get("status"); st != "" {
		f.Phase = manifest.Phase(st)
		if !f.Phase.Valid() {
			return errorf(http.StatusBadRequest, "status: %q is not one of %v", st, manifest.Phases())
		}
	}
	var err error
	if f.Labels, err = parseLabels(q["label"]); err != nil {
		return err
	}
	if f.Limit, err = listLimit(r, DefaultLimit); err != nil {
		return err
	}
	after, err := intParam(q, "after", 0, 0)
	if err != nil {
		return err
	}
	f.After = int64(after)
	ns, err := namespaceParam(q)
	if err != nil {
		return err
	}
	if ns != "" {
		f.Namespaces = []string{ns}
	}
	if token := q.Get("continue"); token != "" {
		if q.Has("after") {
			return errorf(http.StatusBadRequest, "continue and after: give one, not both")
		}
		if f.After, err = decodeCursor(f, token); err != nil {
			return err
		}
	}
	// The cursors are the filters' the request names; what the token may
	// read narrows every page afresh, so a cursor is a position, never a
	// grant.
	asked := f
	if err := narrowNamespaces(r.Context(), VerbList, &f, ns); err != nil {
		return err
	}
	page, err := s.listPage(r, &f)
	if err != nil {
		return err
	}
	// The body stays a plain array, as the predecessor's; the next page is
	// announced in headers: X-Continue, an opaque cursor, and a Link with it.
	if page.rows == f.Limit && page.rows > 0 {
		last := page.last
		token := encodeCursor(asked, last)
		next := *r.URL
		nq := next.Query()
		nq.Del("after")
		nq.Set("continue", token)
		nq.Set("limit", strconv.Itoa(f.Limit))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", next.RequestURI()))
		w.Header().Set("X-Continue", token)
		w.Header().Set("X-Next-After", strconv.FormatInt(last, 10))
	}
	w.Header().Set(HeaderDefaultNamespace, s.defaultNamespace())
	w.Header().Set("Content-Length", strconv.Itoa(len(page.body)))
	writeEncoded(w, http.StatusOK, page.body)
	return nil
}

func (s *Server) getResource(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var (
		row  *modelResource
		expl *why.Why
	)
	err = s.view(r, func(m *readModel) error {
		if row = m.byID[id]; row == nil {
			return errorf(http.StatusNotFound, "resource %d not found", id)
		}
		if err := may(r.Context(), VerbGet, row.kind, row.source, row.namespace); err != nil {
			return err
		}
		expl = m.whyLocked(r.Context(), row, time.Now())
		return nil
	})
	if err != nil {
		return err
	}
	writeResourceWhy(w, http.StatusOK, row, expl)
	return nil
}

// getResourceByName reads a resource by kind, version and name, in the
// namespace ?namespace= names. Without one, the name is looked for in every
// namespace the token may read: found in one, that is the resource; in
// several, a 409 names them.
func (s *Server) getResourceByName(w http.ResponseWriter, r *http.Request) error {
	ref := manifest.ObjectRef{Kind: r.PathValue("kind"), Name: r.PathValue("name")}
	ns, err := namespaceParam(r.URL.Query())
	if err != nil {
		return err
	}
	if ns != "" {
		// Refused before it is looked for: whether it exists there is not
		// the token's to know.
		if err := mayNamespace(r.Context(), VerbGet, ns); err != nil {
			return err
		}
		ref.Namespace = ns
	}
	t := requestToken(r.Context())
	var row *modelResource
	err = s.view(r, func(m *readModel) error {
		if ns != "" {
			if row = m.byRefLocked(ref); row == nil {
				return errorf(http.StatusNotFound, "resource %s not found", ref)
			}
			return nil
		}
		found := m.namedLocked(ref.Kind, ref.Name)
		if len(found) == 0 {
			return errorf(http.StatusNotFound, "resource %s not found", ref)
		}
		var in []string
		for _, e := range found {
			if t == nil || t.allowsAction(VerbGet, e.kind, e.source, e.namespace, "") {
				in = append(in, e.namespace)
				row = e
			}
		}
		switch {
		case len(in) == 0:
			// Found only where the token may not read: the grant check
			// below refuses it, as a read by id would.
			row = found[0]
		case len(in) > 1:
			return errorf(http.StatusConflict, "resource %s is in several namespaces (%s): name one with ?namespace=",
				ref, strings.Join(in, ", "))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The grant first: the stored version is the resource's to tell.
	if err := may(r.Context(), VerbGet, row.kind, row.source, row.namespace); err != nil {
		return err
	}
	if row.version != r.PathValue("version") {
		return errorf(http.StatusNotFound, "%s is stored at version %s, not %s", row.ref(), row.version, r.PathValue("version"))
	}
	var expl *why.Why
	if row.facts != nil {
		// Paced already, by the read above.
		if err := s.viewAt(r, 0, func(m *readModel) error {
			expl = m.whyLocked(r.Context(), row, time.Now())
			return nil
		}); err != nil {
			return err
		}
	}
	writeResourceWhy(w, http.StatusOK, row, expl)
	return nil
}

// namespaceParam reads ?namespace=: "" when absent or empty, a 400 when
// it is not a namespace.
func namespaceParam(q url.Values) (string, error) {
	ns := q.Get("namespace")
	if ns != "" && !manifest.ValidNamespace(ns) {
		return "", errorf(http.StatusBadRequest, "namespace: %q is not a namespace: %s", ns, strings.Join(manifest.NamespaceProblems(ns), "; "))
	}
	return ns, nil
}

// narrowNamespaces limits f to what the request's token may do verb to:
// the namespace ns the request names, refused with a 403 when the token
// does not hold it; without one, the namespaces the token holds, all of
// them when its grants are not limited to some.
func narrowNamespaces(ctx context.Context, verb string, f *store.ResourceFilter, ns string) error {
	if ns != "" {
		return may(ctx, verb, f.Kind, f.Source, ns)
	}
	t := requestToken(ctx)
	if t == nil {
		return nil
	}
	all, nss := t.namespaces(verb, f.Kind, f.Source)
	switch {
	case all:
		return nil
	case len(nss) == 0:
		// No grant covers the kind and source at all: refused as before
		// namespaces, in the same words.
		return may(ctx, verb, f.Kind, f.Source, anyNamespace)
	}
	f.Namespaces = nss
	return nil
}

func (s *Server) createResource(w http.ResponseWriter, r *http.Request) error {
	var req ResourceRequest
	if err := decodeBody(r, &req, readOnlyResourceFields); err != nil {
		return err
	}
	var missing []Detail
	for _, f := range []struct {
		name string
		v    *string
	}{{"name", req.Name}, {"resource_type_name", req.ResourceTypeName}} {
		if f.v == nil || *f.v == "" {
			missing = append(missing, Detail{Field: f.name, Pointer: "/" + f.name, Message: f.name + ": required"})
		}
	}
	if len(missing) > 0 {
		return &Error{Status: http.StatusBadRequest, Message: missing[0].Message, Details: missing}
	}
	return s.writeResource(w, r, &req, 0)
}

func (s *Server) updateResource(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req ResourceRequest
	if err := decodeBody(r, &req, readOnlyResourceFields); err != nil {
		return err
	}
	return s.writeResource(w, r, &req, id)
}

// writeResource turns the request into a manifest and applies it through
// the sync code as the API's own source. With an id it updates that
// resource: the request's fields over the stored ones, read under the API
// source's lock so that concurrent updates each see the other's result.
func (s *Server) writeResource(w http.ResponseWriter, r *http.Request, req *ResourceRequest, id int64) error {
	if err := req.metadataAnnotations(); err != nil {
		return err
	}
	// Refused early what the token may not do whatever it finds; what it
	// finds is checked under the lock.
	if id == 0 {
		ns := anyNamespace
		if req.Namespace != nil && *req.Namespace != "" {
			ns = *req.Namespace
		}
		if err := mayAction(r.Context(), VerbCreate, *req.ResourceTypeName, store.APISource, ns, anyAction); err != nil {
			return err
		}
	} else if err := s.mayResource(r, VerbUpdate, id); err != nil {
		return err
	}
	if req.ActionPlugin != nil {
		if err := s.checkAction(*req.ActionPlugin); err != nil {
			return err
		}
	}
	written, err := s.syncer.ApplyDocument(r.Context(), func(ctx context.Context, tx store.Store) ([]byte, error) {
		var d resourceDraft
		var had []manifest.ObjectRef
		verb := VerbUpdate
		if id != 0 {
			cur, err := tx.GetResource(ctx, id)
			if err != nil {
				return nil, err
			}
			if err := s.mayOn(ctx, verb, cur); err != nil {
				return nil, err
			}
			if cur.Source.Name != store.APISource {
				return nil, ownedElsewhere(cur)
			}
			// A move to another namespace is a new identity, which no update
			// makes; one the token does not hold is its to be refused first.
			if req.Namespace != nil && *req.Namespace != cur.Namespace {
				if err := mayAction(ctx, verb, cur.Kind, store.APISource, *req.Namespace, anyAction); err != nil {
					return nil, err
				}
			}
			if err := immutable(req, cur); err != nil {
				return nil, err
			}
			d = resourceDraft{kind: cur.Kind, namespace: cur.Namespace, name: cur.Name, version: cur.Version, action: cur.Action, spec: cur.Spec,
				labels: cur.Labels, annotations: cur.Annotations, dependsOn: cur.DependsOn, pluginConfig: cur.PluginConfig}
			had = cur.DependsOn
		} else {
			d.kind, d.name = *req.ResourceTypeName, *req.Name
			t, err := resourceType(ctx, tx, d.kind, deref(req.ResourceTypeVersion))
			if err != nil {
				return nil, err
			}
			d.namespace = s.requestNamespace(req, t)
			// Refused before it is looked for: whether the resource exists
			// in a namespace the token does not hold is not its to know.
			if err := mayAction(ctx, VerbCreate, d.kind, store.APISource, d.namespace, anyAction); err != nil {
				return nil, err
			}
			// A POST of a resource that exists updates it.
			switch cur, err := tx.GetResourceByName(ctx, manifest.ObjectRef{Kind: d.kind, Namespace: d.namespace, Name: d.name}); {
			case errors.Is(err, store.ErrNotFound):
				verb = VerbCreate
			case err != nil:
				return nil, err
			default:
				if err := s.mayOn(ctx, verb, cur); err != nil {
					return nil, err
				}
				had = cur.DependsOn
			}
		}
		d.apply(req)
		t, err := resourceType(ctx, tx, d.kind, d.version)
		if err != nil {
			return nil, err
		}
		if err := s.checkPluginConfig(d, t); err != nil {
			return nil, err
		}
		if err := s.mayDependOn(ctx, tx, d, had); err != nil {
			return nil, err
		}
		// A resource naming no action runs its type version's default,
		// written into the document: the versions of a type the API declared
		// may default to different instances, and the instance checked must
		// be the one stored, whichever version the type's default is taken from.
		if d.action == "" {
			d.action = t.Action
		}
		// The resource as it will be: its action instance may be another.
		if err := mayAction(ctx, verb, d.kind, store.APISource, d.namespace, s.instance(ctx, d.action)); err != nil {
			return nil, err
		}
		return resourceDocument(t.Group, t.Version, d)
	})
	var owned *store.OwnerConflictError
	switch {
	case errors.As(err, &owned):
		return &Error{Status: http.StatusConflict, Message: ownedMessage(owned.What, owned.Owner)}
	case err != nil:
		return &fieldError{err: err, fields: resourceFields}
	}
	status := http.StatusOK
	if written.Outcome == store.Created {
		status = http.StatusCreated
		w.Header().Set("Location", fmt.Sprintf("/api/v1/resources/%d", written.Resource.ID))
	}
	for _, warning := range written.Warnings {
		// RFC 7234's miscellaneous persistent warning, as Kubernetes sends.
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", warning))
	}
	writeJSON(w, status, NewResource(written.Resource))
	return nil
}

// immutable refuses an update that would rename a resource or move it to
// another namespace, type or version.
func immutable(req *ResourceRequest, cur *store.Resource) error {
	for _, f := range []struct {
		name string
		v    *string
		have string
	}{{"name", req.Name, cur.Name}, {"namespace", req.Namespace, cur.Namespace}, {"resource_type_name", req.ResourceTypeName, cur.Kind},
		{"resource_type_version", req.ResourceTypeVersion, cur.Version}} {
		if f.v != nil && *f.v != f.have {
			return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("%s: cannot change from %q to %q; create a new resource instead", f.name, f.have, *f.v),
				Details: []Detail{{Field: f.name, Pointer: "/" + f.name, Message: "immutable"}}}
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// requestNamespace is the namespace a new resource of type t goes to: the
// one the request names, else the default one; none for a cluster-scoped
// kind, unless the request names one, which validation then refuses.
func (s *Server) requestNamespace(req *ResourceRequest, t *store.ResourceType) string {
	if ns := deref(req.Namespace); ns != "" || t.ScopeOf() == manifest.ScopeCluster {
		return ns
	}
	return s.defaultNamespace()
}

// mayDependOn refuses with 403 a dependency a write adds that its token
// may not read, when the token's grants are limited to namespaces. A
// dependent's status tells its dependencies' state (not ready, failed and
// why, missing): a dependency on a resource of another namespace would let
// the token read what its grants keep from it, and probe which names exist
// there; and a dependency holds up its target's destruction behind the
// dependent's. Dependencies the resource has already, which someone allowed
// to read them declared, stay.
func (s *Server) mayDependOn(ctx context.Context, st store.Store, d resourceDraft, had []manifest.ObjectRef) error {
	t := requestToken(ctx)
	if t == nil || !t.narrowsNamespaces() {
		return nil
	}
	for i, ref := range d.dependsOn {
		// Resolved as validation resolves it: in the dependent's namespace
		// (the default one for a cluster-scoped dependent), or in none
		// when the kind is cluster-scoped.
		if ref.Namespace == "" {
			ref.Namespace = cmp.Or(d.namespace, s.defaultNamespace())
			types, err := st.ListResourceTypes(ctx, store.TypeFilter{Name: ref.Kind})
			if err != nil {
				return err
			}
			if len(types) > 0 && types[0].ScopeOf() == manifest.ScopeCluster {
				ref.Namespace = ""
			}
		}
		if slices.Contains(had, ref) || t.reads(ref.Kind, ref.Namespace) {
			continue
		}
		what := "resources in namespace " + ref.Namespace
		if ref.Namespace == "" {
			what = "cluster-scoped resources"
		}
		msg := fmt.Sprintf("depends_on: token %q may not read %s, such as %s: a write may depend only on what its token may read, "+
			"since the dependent's status tells its dependencies' (its grants hold namespaces %s)", t.Name, what, ref, describeNamespaces(t))
		return &Error{Status: http.StatusForbidden, Message: msg,
			Details: []Detail{{Field: fmt.Sprintf("depends_on.%d", i), Pointer: fmt.Sprintf("/depends_on/%d", i), Message: msg}}}
	}
	return nil
}

// resourceType finds the type version a request names. Without a version,
// a type with exactly one version is meant.
func resourceType(ctx context.Context, st store.Store, kind, version string) (*store.ResourceType, error) {
	if version != "" {
		t, err := st.GetResourceTypeByName(ctx, kind, version)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("resource_type_version: resource type %s has no version %q; create it first (POST /api/v1/resource-types)", kind, version),
				Details: []Detail{{Field: "resource_type_version", Pointer: "/resource_type_version", Message: "unknown resource type version"}}}
		}
		return t, err
	}
	rows, err := st.ListResourceTypes(ctx, store.TypeFilter{Name: kind})
	if err != nil {
		return nil, err
	}
	switch len(rows) {
	case 0:
		return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("resource_type_name: no resource type %q; create it first (POST /api/v1/resource-types)", kind),
			Details: []Detail{{Field: "resource_type_name", Pointer: "/resource_type_name", Message: "unknown resource type"}}}
	case 1:
		return rows[0], nil
	}
	return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("resource_type_version: required, resource type %s has %d versions", kind, len(rows)),
		Details: []Detail{{Field: "resource_type_version", Pointer: "/resource_type_version", Message: "required"}}}
}

// ownedElsewhere is the answer to a write to a resource a source owns: the
// change belongs in that source.
func ownedElsewhere(r *store.Resource) error {
	return &Error{Status: http.StatusConflict, Message: ownedMessage(r.Ref().String(), r.Source)}
}

func ownedMessage(what string, owner store.SourceRef) string {
	msg := fmt.Sprintf("%s is owned by source %q", what, owner.Name)
	if owner.Path != "" {
		msg += fmt.Sprintf(", declared in %s", owner.Path)
	}
	if owner.Revision != "" {
		msg += fmt.Sprintf(" at revision %s", owner.Revision)
	}
	return msg + "; change it there, the API only writes what it created"
}

func (s *Server) deleteResource(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.mayResource(r, VerbDelete, id); err != nil {
		return err
	}
	row, err := s.syncer.DeleteResource(r.Context(), id)
	var owned *store.OwnerConflictError
	switch {
	case errors.As(err, &owned):
		return &Error{Status: http.StatusConflict, Message: ownedMessage(owned.What, owned.Owner)}
	case err != nil:
		return err
	case row == nil:
		// Annotated no8s.io/prune: disabled: forgotten, not destroyed.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusAccepted, ResourceAction{Message: "Resource deletion initiated", ResourceID: row.ID,
		Resource: NewResource(row)})
	return nil
}

func (s *Server) reconcileResource(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	cur, err := s.store.GetResource(r.Context(), id)
	if err != nil {
		return err
	}
	if err := s.mayOn(r.Context(), VerbReconcile, cur); err != nil {
		return err
	}
	if err := s.mayRun(r.Context(), cur); err != nil {
		return err
	}
	row, err := s.store.RequestReconcile(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, ResourceAction{Message: "Reconciliation triggered", ResourceID: row.ID,
		Resource: NewResource(row)})
	return nil
}

// mayRun refuses with 409 a reconcile request that no worker would act
// on, saying why and what to do: a suspended resource, one whose source is
// orphaned (no configuration lists it) or being pruned.
func (s *Server) mayRun(ctx context.Context, cur *store.Resource) error {
	if cur.Suspended() {
		return errorf(http.StatusConflict, "%s is suspended (by %s): resume it first", cur.Ref(), cur.SuspendedBy())
	}
	src, err := s.store.GetSource(ctx, cur.Source.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	switch src.Phase {
	case store.SourceOrphaned:
		return errorf(http.StatusConflict, "%s is not reconciled: its source %s is orphaned (no agent's configuration lists it); "+
			"add the source back to the configuration, or forget it (no8s-agent delete source %s --mode forget) or prune it (--mode prune)",
			cur.Ref(), src.Name, src.Name)
	case store.SourcePruning:
		return errorf(http.StatusConflict, "%s is not reconciled: its source %s is being pruned, and its resources destroyed", cur.Ref(), src.Name)
	}
	return nil
}

func (s *Server) resourceHistory(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.mayResource(r, VerbGet, id); err != nil {
		return err
	}
	limit, err := listLimit(r, historyLimit)
	if err != nil {
		return err
	}
	rows, err := s.store.ListReconcileRecords(r.Context(), id, limit)
	if err != nil {
		return err
	}
	// History outlives its resource, so that a destroyed resource's last
	// attempts can still be read; an id never seen is a 404.
	if len(rows) == 0 {
		if _, err := s.store.GetResource(r.Context(), id); err != nil {
			return err
		}
	}
	out := make([]ReconcileRecord, len(rows))
	for i, h := range rows {
		out[i] = NewReconcileRecord(h)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) resourceOutputs(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.mayResource(r, VerbGet, id); err != nil {
		return err
	}
	row, err := s.store.GetResource(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": row.ID, "generation": row.ObservedGeneration, "outputs": NewResource(row).Outputs})
	return nil
}

// --- sources ---

func (s *Server) listSources(w http.ResponseWriter, r *http.Request) error {
	if err := maySource(r.Context(), VerbList, ""); err != nil {
		return err
	}
	var out []Source
	err := s.view(r, func(m *readModel) error {
		out = make([]Source, len(m.sources))
		for i, src := range m.sources {
			out[i] = NewSource(src)
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listAgents lists the agents that record themselves, alive, stopped or gone.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	rows, err := s.store.ListAgents(r.Context())
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]Agent, len(rows))
	for i, a := range rows {
		out[i] = NewAgent(a, now)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSource(w http.ResponseWriter, r *http.Request) error {
	if err := maySource(r.Context(), VerbGet, r.PathValue("name")); err != nil {
		return err
	}
	var out Source
	err := s.view(r, func(m *readModel) error {
		src, ok := m.sourceLocked(r.PathValue("name"))
		if !ok {
			return errorf(http.StatusNotFound, "source %q not found", r.PathValue("name"))
		}
		out = NewSource(src)
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) sourceHistory(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := maySource(r.Context(), VerbGet, name); err != nil {
		return err
	}
	limit, err := listLimit(r, historyLimit)
	if err != nil {
		return err
	}
	if _, err := s.store.GetSource(r.Context(), name); err != nil {
		return err
	}
	rows, err := s.store.ListSyncRecords(r.Context(), name, limit)
	if err != nil {
		return err
	}
	out := make([]SyncRecord, len(rows))
	for i, h := range rows {
		out[i] = NewSyncRecord(h)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// syncable checks that name is a source this agent syncs.
func (s *Server) syncable(name string) error {
	if name == store.APISource {
		return errorf(http.StatusBadRequest, "source %q is the API itself: there is nothing to fetch", name)
	}
	if s.opts.Sources == nil {
		return errorf(http.StatusServiceUnavailable, "this agent runs no sources")
	}
	if !slices.Contains(s.opts.Sources.Sources(), name) {
		return errorf(http.StatusNotFound, "source %q is not configured on this agent", name)
	}
	return nil
}

// trigger asks the runner for a sync of a source this agent syncs.
func (s *Server) trigger(name string, force bool) error {
	if err := s.syncable(name); err != nil {
		return err
	}
	if !s.opts.Sources.Trigger(name, force) {
		return errorf(http.StatusNotFound, "source %q is not configured on this agent", name)
	}
	return nil
}

func (s *Server) syncSource(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := maySource(r.Context(), VerbSync, name); err != nil {
		return err
	}
	if err := s.syncable(name); err != nil {
		return err
	}
	if err := s.refuseSuspendedSource(r, name); err != nil {
		return err
	}
	if err := s.trigger(name, true); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"source": name, "sync": "requested"})
	return nil
}

// approveSource lets a revision past the prune guard, or a rollback the
// source refused, through: the revision given (?revision= or
// {"revision": ...}), or the one the source is stalled on.
// Any revision but the stalled one is refused with 409.
func (s *Server) approveSource(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := maySource(r.Context(), VerbApprove, name); err != nil {
		return err
	}
	// Checked first: an approval this agent cannot act on is not recorded.
	if err := s.syncable(name); err != nil {
		return err
	}
	rev := r.URL.Query().Get("revision")
	if rev == "" && r.ContentLength != 0 {
		var body struct {
			Revision string `json:"revision"`
		}
		if err := decodeBody(r, &body, nil); err != nil {
			return err
		}
		rev = body.Revision
	}
	if !wellFormedRevision(rev) {
		return errorf(http.StatusBadRequest, "revision: %q is not a revision: at most %d printable characters without spaces, such as main@sha1:<commit>",
			rev, maxRevisionLen)
	}
	src, err := s.store.GetSource(r.Context(), name)
	if err != nil {
		return err
	}
	if rev == "" {
		if src.Phase != store.SourceStalled {
			return errorf(http.StatusBadRequest, "revision: required; source %q is %s, not stalled on a revision", name, src.Phase)
		}
		rev = string(src.LastAttemptedRevision)
	}
	if err := s.syncer.Approve(r.Context(), name, manifest.Revision(rev)); err != nil {
		return err
	}
	if err := s.trigger(name, false); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"source": name, "approved_revision": rev})
	return nil
}

// deleteSource forgets (?mode=forget) or prunes (?mode=prune) a source no
// agent serves any more: an orphaned one. Pruning destroys its resources
// and needs &approve=true when there are any to destroy, as the prune guard
// needs an approval to empty a source. 200 when the source is gone, 202
// while its resources are being destroyed.
func (s *Server) deleteSource(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := maySource(r.Context(), VerbDelete, name); err != nil {
		return err
	}
	q := r.URL.Query()
	mode := sync.RemoveMode(q.Get("mode"))
	if mode != sync.ModeForget && mode != sync.ModePrune {
		return errorf(http.StatusBadRequest, "mode: %q is not a mode: use mode=forget (drop the source's rows, destroy nothing) or mode=prune (destroy its resources)", mode)
	}
	approve := false
	if v := q.Get("approve"); v != "" {
		var err error
		if approve, err = strconv.ParseBool(v); err != nil {
			return errorf(http.StatusBadRequest, "approve: %q is not true or false", v)
		}
	}
	if s.opts.Sources != nil && slices.Contains(s.opts.Sources.Sources(), name) {
		return errorf(http.StatusConflict, "source %q is configured on this agent: remove it from the configuration and restart the agent first", name)
	}
	removal, err := s.syncer.RemoveSource(r.Context(), name, mode, approve)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if !removal.Removed {
		status = http.StatusAccepted
	}
	writeJSON(w, status, removal)
	return nil
}

// maxRevisionLen is far above any revision a source makes (a branch name,
// a hash algorithm and a hash).
const maxRevisionLen = 512

// wellFormedRevision reports whether rev is empty (the stalled one) or
// could be a revision: printable, without spaces, not too long.
func wellFormedRevision(rev string) bool {
	if len(rev) > maxRevisionLen || !utf8.ValidString(rev) {
		return false
	}
	for _, c := range rev {
		if unicode.IsSpace(c) || !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}

// defaultNamespace is where resources of namespaced kinds declared without
// a namespace go: the syncer's, which reads need not have.
func (s *Server) defaultNamespace() string {
	if s.syncer == nil {
		return manifest.DefaultNamespace
	}
	return s.syncer.DefaultNamespace()
}
