package manifest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	gosync "sync"
	"time"
	"unique"
)

var (
	actionNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)
	labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	labelNameRE  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
)

// Top-level and nested fields each kind of document may have. Anything else
// is a mistake (often a typo, such as dependOn), reported like kubectl's
// strict validation does.
var (
	resourceFields = fieldSet("apiVersion", "kind", "metadata", "spec", "status", "action", "pluginConfig", "dependsOn")
	typeFields     = fieldSet("apiVersion", "kind", "metadata", "spec", "status")
	// metadataFields are name, namespace, labels and annotations, and the
	// fields generators write (kubectl get -o yaml, controller-gen), which
	// are accepted and ignored: see generatorFields.
	metadataFields = fieldSet(append([]string{"name", "namespace", "labels", "annotations"}, generatorFields...)...)
	typeSpecFields = fieldSet("group", "description", "action", "driftInterval", "nameFormat", "scope", "versions")
	versionFields  = fieldSet("name", "schema", "deprecated")
	refFields      = fieldSet("kind", "namespace", "name")
)

// generatorFields are the metadata fields a server sets and generators
// write out (kubectl get -o yaml, controller-gen): they mean nothing in a
// manifest, so they are accepted, ignored (never part of a resource's
// identity or spec) and warned of once per file.
var generatorFields = []string{"creationTimestamp", "uid", "resourceVersion", "generation", "managedFields"}

// generatorWarning returns the one warning of a file whose documents carry
// generator fields, at the first of them, or nil. A null says nothing
// (controller-gen writes creationTimestamp: null in every CRD) and is not
// warned of.
func generatorWarning(docs []*Document) []Problem {
	var (
		first  *Document
		at     string
		fields []string
		count  int
	)
	for _, d := range docs {
		meta, _ := d.Object["metadata"].(map[string]any)
		found := false
		for _, f := range generatorFields {
			if v, present := meta[f]; !present || v == nil {
				continue
			}
			found = true
			if first == nil {
				first, at = d, "/metadata/"+f
			}
			if !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
		if found {
			count++
		}
	}
	if first == nil {
		return nil
	}
	for i, f := range fields {
		fields[i] = "metadata." + f
	}
	in := ""
	if count > 1 {
		in = fmt.Sprintf(" (in %d documents)", count)
	}
	return []Problem{{File: first.File, Line: first.LineOf(at), Document: first.Index, Pointer: at,
		Message: fmt.Sprintf("%s ignored%s: a server sets them, and a manifest need not carry them", strings.Join(fields, ", "), in)}}
}

func fieldSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// header is what every document has: apiVersion, kind and metadata.
type header struct {
	apiVersion string
	kind       string
	name       string
	// namespace is metadata.namespace, empty when absent; hasNamespace
	// tells whether a valid one was written.
	namespace    string
	hasNamespace bool
	labels       map[string]string
	annotations  map[string]string
}

// readHeader reads apiVersion, kind and metadata; it reports missing or
// malformed fields and returns ok=false when the document cannot be placed.
func readHeader(d *Document, errs *problems) (h header, ok bool) {
	return readHeaderWith(d, errs, metadataFields)
}

// readHeaderWith is readHeader with the metadata fields a kind allows.
func readHeaderWith(d *Document, errs *problems, allowedMeta map[string]bool) (h header, ok bool) {
	ok = true
	var isStr bool
	if h.apiVersion, isStr = d.Object["apiVersion"].(string); !isStr || h.apiVersion == "" {
		errs.add(d.Problem("/apiVersion", "%s", missingOr(d.Object, "apiVersion", "a string such as infra.example.com/v1")))
		ok = false
	}
	if h.kind, isStr = d.Object["kind"].(string); !isStr || h.kind == "" {
		errs.add(d.Problem("/kind", "%s", missingOr(d.Object, "kind", "a string such as DatabaseCluster")))
		ok = false
	}
	meta, isMap := d.Object["metadata"].(map[string]any)
	if !isMap {
		errs.add(d.Problem("/metadata", "%s", missingOr(d.Object, "metadata", "an object with a name")))
		return h, false
	}
	unknownFields(d, "/metadata", meta, allowedMeta, errs)
	if h.name, isStr = meta["name"].(string); !isStr || h.name == "" {
		errs.add(d.Problem("/metadata/name", "%s", missingOr(meta, "name", "a string")))
		ok = false
	}
	switch raw, present := meta["namespace"]; {
	case !present || raw == nil:
	case !isString(raw):
		errs.add(d.Problem("/metadata/namespace", "must be a string, not %s", describe(raw)))
		ok = false
	case raw.(string) == "":
		// Empty is absent, as an API server reads it.
	default:
		h.namespace, h.hasNamespace = raw.(string), true
		for _, msg := range NamespaceProblems(h.namespace) {
			errs.add(d.Problem("/metadata/namespace", "%s", msg))
			ok = false
		}
	}
	h.labels = stringMap(d, "/metadata/labels", meta["labels"], errs, true)
	h.annotations = stringMap(d, "/metadata/annotations", meta["annotations"], errs, false)
	return h, ok
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// clusterScoped reports a namespace written on a document of a
// cluster-scoped kind, which takes none.
func clusterScoped(d *Document, h header, kind string, errs *problems) {
	if h.hasNamespace {
		errs.add(d.Problem("/metadata/namespace", "Invalid value: %s: %s is cluster-scoped and takes no namespace", strconv.Quote(h.namespace), kind))
	}
}

func missingOr(obj map[string]any, field, want string) string {
	v, present := obj[field]
	if !present {
		return "required field is missing"
	}
	if s, ok := v.(string); ok && s == "" {
		return "must not be empty"
	}
	return fmt.Sprintf("must be %s, not %s", want, describe(v))
}

func unknownFields(d *Document, at string, obj map[string]any, allowed map[string]bool, errs *problems) {
	var unknown []string
	for k := range obj {
		if !allowed[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		known := make([]string, 0, len(allowed))
		for a := range allowed {
			known = append(known, a)
		}
		sort.Strings(known)
		errs.add(d.Problem(at+"/"+escapePointer(k), "unknown field (known fields: %s)", strings.Join(known, ", ")))
	}
}

// stringMap reads labels or annotations: an object of strings. The map it
// returns may be shared with other resources (see mapInterner) and must not
// be changed.
func stringMap(d *Document, at string, v any, errs *problems, labels bool) map[string]string {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		errs.add(d.Problem(at, "must be an object of strings, not %s", describe(v)))
		return nil
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			errs.add(d.Problem(at+"/"+escapePointer(k), "must be a string, not %s (quote it)", describe(e)))
			continue
		}
		if labels {
			if !validLabelKey(k) {
				errs.add(d.Problem(at+"/"+escapePointer(k), "invalid label key %q: an optional DNS prefix and a name of letters, digits, '-', '_' and '.', at most 63 characters", k))
				continue
			}
			if len(s) > 63 || !labelValueRE.MatchString(s) {
				errs.add(d.Problem(at+"/"+escapePointer(k), "invalid label value %q: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", s))
				continue
			}
		}
		out[k] = s
	}
	return sharedMaps.share(out)
}

func validLabelKey(k string) bool {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name = k
	} else if len(prefix) > 253 || !groupRE.MatchString(prefix) {
		return false
	}
	return len(name) <= 63 && labelNameRE.MatchString(name)
}

// parseType reads and compiles a ResourceType document.
func parseType(d *Document) (*ResourceType, []Problem) {
	var errs problems
	h, ok := readHeader(d, &errs)
	unknownFields(d, "", d.Object, typeFields, &errs)
	if !ok {
		return nil, errs
	}
	clusterScoped(d, h, KindResourceType, &errs)
	if h.apiVersion != APIVersion {
		errs.add(d.Problem("/apiVersion", "a ResourceType must have apiVersion %s, not %q", APIVersion, h.apiVersion))
	}
	if !ValidKindName(h.name) || h.name == KindResourceType {
		errs.add(d.Problem("/metadata/name", "invalid resource type name %q: it is the kind its resources use, so it starts with an upper-case letter followed by at most 62 letters and digits (e.g. DatabaseCluster), and is not ResourceType", h.name))
	}
	t := &ResourceType{Name: h.name, Group: DefaultGroup, Annotations: h.annotations, Origin: d.Origin()}
	spec, isMap := d.Object["spec"].(map[string]any)
	if !isMap {
		errs.add(d.Problem("/spec", "%s", missingOr(d.Object, "spec", "an object with versions")))
		return nil, errs
	}
	unknownFields(d, "/spec", spec, typeSpecFields, &errs)
	t.NameFormat, t.Annotations = readNameFormat(d, spec, h.annotations, &errs)
	t.Scope = readScope(d, spec, &errs)
	if g, present := spec["group"]; present {
		s, _ := g.(string)
		if s == "" || len(s) > 253 || !groupRE.MatchString(s) {
			errs.add(d.Problem("/spec/group", "invalid group %v: a DNS subdomain such as infra.example.com", g))
		}
		t.Group = s
	}
	t.Description = optionalString(d, "/spec/description", spec["description"], &errs)
	t.Action = optionalString(d, "/spec/action", spec["action"], &errs)
	if t.Action != "" && !actionNameRE.MatchString(t.Action) {
		errs.add(d.Problem("/spec/action", "invalid action instance name %q: lower-case letters, digits, '-' and '_'", t.Action))
	}
	if s := optionalString(d, "/spec/driftInterval", spec["driftInterval"], &errs); s != "" {
		iv, err := time.ParseDuration(s)
		switch {
		case err != nil:
			errs.add(d.Problem("/spec/driftInterval", "invalid duration %q (use e.g. 30m or 6h)", s))
		case iv < 0:
			errs.add(d.Problem("/spec/driftInterval", "must not be negative"))
		default:
			t.DriftInterval = iv
		}
	}
	versions, isList := spec["versions"].([]any)
	if !isList || len(versions) == 0 {
		if _, present := spec["versions"]; !present {
			errs.add(d.Problem("/spec/versions", "required field is missing: list at least one version with a schema"))
		} else {
			errs.add(d.Problem("/spec/versions", "must be a non-empty list of versions"))
		}
		return nil, errs
	}
	seen := map[string]int{}
	for i, raw := range versions {
		at := fmt.Sprintf("/spec/versions/%d", i)
		v, name, ok := readVersion(d, at, i, raw, "name and schema", versionFields, seen, &errs)
		if !ok {
			continue
		}
		rawSchema, present := v["schema"]
		if !present {
			errs.add(d.Problem(at+"/schema", "required field is missing: the OpenAPI v3 schema of the spec"))
			continue
		}
		compiled, issues := compileSchema(rawSchema)
		for _, is := range issues {
			errs.add(d.Problem(at+"/schema"+is.pointer, "%s", is.msg))
		}
		if compiled == nil {
			continue
		}
		canonical, err := CanonicalJSON(rawSchema)
		if err != nil {
			errs.add(d.Problem(at+"/schema", "%v", err))
			continue
		}
		deprecated := false
		if raw, present := v["deprecated"]; present {
			b, isBool := raw.(bool)
			if !isBool {
				errs.add(d.Problem(at+"/deprecated", "must be true or false, not %s", describe(raw)))
				continue
			}
			deprecated = b
		}
		t.Versions = append(t.Versions, TypeVersion{Name: name, Schema: canonical, Deprecated: deprecated, compiled: compiled})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// nameProblems reports what is wrong with a resource's name under format f.
func nameProblems(d *Document, f NameFormat, name string, errs *problems) {
	for _, msg := range NameProblems(f, name) {
		errs.add(d.Problem("/metadata/name", "%s", msg))
	}
}

// readNameFormat reads the name format a type document asks for: the
// annotation no8s.io/name-format, or for a ResourceType (spec not nil) its
// spec.nameFormat, which must agree with the annotation when both are
// written. It returns the format and the type's annotations, which record
// a label format, so that the store keeps it with the type; the annotations
// given are not changed (they may be shared).
func readNameFormat(d *Document, spec map[string]any, annotations map[string]string, errs *problems) (NameFormat, map[string]string) {
	valid := func(s string) bool { return s == string(NameLabel) || s == string(NameSubdomain) }
	format := NameSubdomain
	annotated, hasAnnotation := annotations[AnnotationNameFormat]
	if hasAnnotation {
		if !valid(annotated) {
			errs.add(d.Problem("/metadata/annotations/"+escapePointer(AnnotationNameFormat), "must be %q or %q, not %q", NameLabel, NameSubdomain, annotated))
			return format, annotations
		}
		format = NameFormat(annotated)
	}
	if raw, present := spec["nameFormat"]; present {
		s, _ := raw.(string)
		switch {
		case !valid(s):
			errs.add(d.Problem("/spec/nameFormat", "must be %q (DNS-1123 label: no dots, at most 63 characters) or %q (DNS-1123 subdomain, the default), not %s",
				NameLabel, NameSubdomain, describeValue(raw)))
			return format, annotations
		case hasAnnotation && s != annotated:
			errs.add(d.Problem("/spec/nameFormat", "%q, but the annotation %s says %q: write one of them", s, AnnotationNameFormat, annotated))
			return format, annotations
		}
		format = NameFormat(s)
	}
	if format == NameLabel && !hasAnnotation {
		own := make(map[string]string, len(annotations)+1)
		maps.Copy(own, annotations)
		own[AnnotationNameFormat] = string(NameLabel)
		annotations = sharedMaps.share(own)
	}
	return format, annotations
}

// readScope reads spec.scope of a type document: Namespaced (the
// default) or Cluster, as a CRD writes it.
func readScope(d *Document, spec map[string]any, errs *problems) Scope {
	raw, present := spec["scope"]
	if !present || raw == nil {
		return ScopeNamespaced
	}
	switch s, _ := raw.(string); Scope(s) {
	case ScopeNamespaced, ScopeCluster:
		return Scope(s)
	}
	errs.add(d.Problem("/spec/scope", "must be %q (the default) or %q, not %s", ScopeNamespaced, ScopeCluster, describeValue(raw)))
	return ScopeNamespaced
}

// describeValue shows a value in a message: a string quoted, anything else
// by its type.
func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return describe(v)
}

func optionalString(d *Document, at string, v any, errs *problems) string {
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		errs.add(d.Problem(at, "must be a string, not %s", describe(v)))
	}
	return s
}

// parseResource reads a resource document and validates its spec against its
// type, applying defaults. lookup resolves kinds; unknown says what to do
// with fields the spec's schema does not declare. The warnings are about
// what was accepted anyway: the unknown fields kept or dropped. A resource
// of a namespaced kind that names no namespace, and a dependency on one
// that names none, are placed in defaultNamespace (DefaultNamespace when
// empty).
func parseResource(d *Document, lookup func(kind string) (*ResourceType, error), unknown UnknownFields, defaultNamespace string) (*Resource, []Problem, []Problem) {
	if defaultNamespace == "" {
		defaultNamespace = DefaultNamespace
	}
	var errs problems
	h, ok := readHeader(d, &errs)
	unknownFields(d, "", d.Object, resourceFields, &errs)
	if !ok {
		return nil, errs, nil
	}
	// The broadest rule first, which every type's names follow; a type
	// that asks for labels narrows it once the kind is known.
	nameProblems(d, NameSubdomain, h.name, &errs)
	r := &Resource{Kind: h.kind, Name: h.name, Labels: h.labels, Annotations: h.annotations, Origin: d.Origin()}
	r.Action = optionalString(d, "/action", d.Object["action"], &errs)
	if r.Action != "" && !actionNameRE.MatchString(r.Action) {
		errs.add(d.Problem("/action", "invalid action instance name %q: lower-case letters, digits, '-' and '_'", r.Action))
	}
	pluginConfig, hasPluginConfig := d.Object["pluginConfig"].(map[string]any)
	if v, present := d.Object["pluginConfig"]; present && v != nil && !hasPluginConfig {
		errs.add(d.Problem("/pluginConfig", "must be an object of the action's per-resource settings, not %s", describe(v)))
	}

	t, err := lookup(h.kind)
	if err != nil {
		errs.add(d.Problem("/kind", "%v", err))
		return nil, errs, nil
	}
	if t.NameFormat == NameLabel && ValidName(h.name) {
		nameProblems(d, NameLabel, h.name, &errs)
	}
	switch {
	case !t.Namespaced():
		clusterScoped(d, h, t.Name, &errs)
	case h.hasNamespace:
		r.Namespace = h.namespace
	default:
		r.Namespace = defaultNamespace
	}
	r.DependsOn = parseDependsOn(d, r, lookup, defaultNamespace, &errs)
	group, version, _ := strings.Cut(h.apiVersion, "/")
	if group != t.Group || version == "" {
		errs.add(d.Problem("/apiVersion", "%q does not match the group of ResourceType %s: use %s/<version>", h.apiVersion, t.Name, t.Group))
		return nil, errs, nil
	}
	tv := t.Version(version)
	if tv == nil {
		known := make([]string, len(t.Versions))
		for i, v := range t.Versions {
			known[i] = v.Name
		}
		errs.add(d.Problem("/apiVersion", "ResourceType %s has no version %q (known: %s)", t.Name, version, strings.Join(known, ", ")))
		return nil, errs, nil
	}
	r.Group, r.Version = t.Group, tv.Name // the type's strings, shared by its resources
	if r.Action == "" {
		r.Action = t.Action
	}

	rawSpec, present := d.Object["spec"]
	if !present || rawSpec == nil {
		rawSpec = map[string]any{}
	}
	spec, isMap := rawSpec.(map[string]any)
	if !isMap {
		errs.add(d.Problem("/spec", "must be an object, not %s", describe(rawSpec)))
		return nil, errs, nil
	}
	spec = applyDefaults(tv.compiled.sourceOrEmpty(), deepCopy(spec)).(map[string]any)
	undeclared := tv.compiled.undeclaredFields(spec, unknown)
	if unknown.orStrict() == UnknownFieldsStrict {
		for _, u := range undeclared {
			errs.add(u.problem(d, "", " (unknownFields: strict refuses it; warn keeps it, prune drops it)"))
		}
	}
	for _, is := range tv.compiled.validate(spec) {
		errs.add(d.Problem("/spec"+is.pointer, "%s", is.msg))
	}
	for _, is := range tv.compiled.listDuplicates(spec) {
		errs.add(d.Problem("/spec"+is.pointer, "%s", is.msg))
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	// CEL rules run on a spec the schema accepts, as Kubernetes runs them.
	for _, is := range tv.compiled.checkRules(spec, nil) {
		errs.add(d.Problem("/spec"+is.pointer, "%s", is.msg))
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	canonical, err := CanonicalJSON(spec)
	if err != nil {
		errs.add(d.Problem("/spec", "%v", err))
		return nil, errs, nil
	}
	r.Spec = canonical
	r.SpecHash = HashJSON(canonical)
	if len(pluginConfig) > 0 {
		if r.PluginConfig, err = CanonicalJSON(pluginConfig); err != nil {
			errs.add(d.Problem("/pluginConfig", "%v", err))
			return nil, errs, nil
		}
		// The action acts on both, so a change of either is a new generation.
		r.SpecHash = HashJSON(slices.Concat(canonical, []byte{0}, r.PluginConfig))
	}
	// Decoded strings may share memory with their whole file (see
	// fastDecode), which a kept resource must not pin; kinds and actions,
	// repeated across thousands of resources, are held once.
	r.Kind, r.Name, r.Action = unique.Make(r.Kind).Value(), strings.Clone(r.Name), unique.Make(r.Action).Value()
	r.Namespace = internNamespace(r.Namespace)
	for i, ref := range r.DependsOn {
		r.DependsOn[i] = ObjectRef{Kind: unique.Make(ref.Kind).Value(), Namespace: internNamespace(ref.Namespace), Name: strings.Clone(ref.Name)}
	}
	var warnings []Problem
	if len(undeclared) > 0 {
		done := "kept"
		if unknown == UnknownFieldsPrune {
			done = "dropped"
		}
		for _, u := range undeclared {
			warnings = append(warnings, u.problem(d, done, ""))
		}
	}
	return r, nil, warnings
}

func (c *compiledSchema) sourceOrEmpty() map[string]any {
	if c == nil {
		return map[string]any{}
	}
	return c.source
}

// parseDependsOn reads the dependencies of r, whose kind and namespace are
// known. A dependency that names no namespace is in r's (or, when r is
// cluster-scoped, in defaultNamespace), unless its kind is cluster-scoped:
// then it has none, and naming one is refused. A kind lookup does not know
// is taken as namespaced.
func parseDependsOn(d *Document, r *Resource, lookup func(kind string) (*ResourceType, error), defaultNamespace string, errs *problems) []ObjectRef {
	raw, present := d.Object["dependsOn"]
	if !present || raw == nil {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		errs.add(d.Problem("/dependsOn", "must be a list of {kind, name}, not %s", describe(raw)))
		return nil
	}
	self := r.Ref()
	var refs []ObjectRef
	seen := map[ObjectRef]bool{}
	for i, e := range list {
		at := fmt.Sprintf("/dependsOn/%d", i)
		m, ok := e.(map[string]any)
		if !ok {
			errs.add(d.Problem(at, "must be an object with kind and name, not %s", describe(e)))
			continue
		}
		unknownFields(d, at, m, refFields, errs)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		if !ValidKindName(kind) {
			errs.add(d.Problem(at+"/kind", "invalid kind %v", m["kind"]))
			continue
		}
		if name == "" {
			errs.add(d.Problem(at+"/name", "%s", missingOr(m, "name", "a string")))
			continue
		}
		if msgs := NameProblems(NameSubdomain, name); len(msgs) > 0 {
			for _, msg := range msgs {
				errs.add(d.Problem(at+"/name", "%s", msg))
			}
			continue
		}
		ns, hasNS := "", false
		if v, present := m["namespace"]; present && v != nil {
			s, isStr := v.(string)
			if !isStr {
				errs.add(d.Problem(at+"/namespace", "must be a string, not %s", describe(v)))
				continue
			}
			if msgs := NamespaceProblems(s); s != "" && len(msgs) > 0 {
				for _, msg := range msgs {
					errs.add(d.Problem(at+"/namespace", "%s", msg))
				}
				continue
			}
			ns, hasNS = s, s != ""
		}
		namespaced := true
		if t, err := lookup(kind); err == nil && t != nil {
			namespaced = t.Namespaced()
		}
		switch {
		case !namespaced && hasNS:
			errs.add(d.Problem(at+"/namespace", "Invalid value: %s: %s is cluster-scoped and takes no namespace", strconv.Quote(ns), kind))
			continue
		case !namespaced:
		case hasNS:
		case r.Namespace != "":
			ns = r.Namespace
		default:
			ns = defaultNamespace
		}
		ref := ObjectRef{Kind: kind, Namespace: ns, Name: name}
		switch {
		case ref == self:
			errs.add(d.Problem(at, "a resource cannot depend on itself"))
		case seen[ref]:
			errs.add(d.Problem(at, "duplicate dependency %s", ref))
		default:
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	return refs
}

// namespaces holds one copy of each namespace met, up to a bound: a
// repository has a few, shared by many resources, and a decoded string
// may share memory with its whole file.
var namespaces = struct {
	gosync.Mutex
	m map[string]string
}{m: map[string]string{DefaultNamespace: DefaultNamespace}}

// internNamespace returns the held copy of ns, or a copy of its own.
func internNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	namespaces.Lock()
	defer namespaces.Unlock()
	if held, ok := namespaces.m[ns]; ok {
		return held
	}
	own := strings.Clone(ns)
	if len(namespaces.m) < 4096 {
		namespaces.m[own] = own
	}
	return own
}

// sharedMaps holds the label and annotation maps that parsed resources
// share. Most resources of a repository carry one of a few label sets; a
// map and its strings per resource made them the largest part of an idle
// agent's heap.
var sharedMaps = newMapInterner(4096, 1<<20)

// mapInterner hands out one map per distinct content, for up to maxMaps
// distinct contents of maxBytes in all; past that, maps are copied and not
// held. Maps it holds are never changed, by it or by anyone: callers treat
// Labels and Annotations as read-only.
type mapInterner struct {
	mu                gosync.Mutex
	maxMaps, maxBytes int
	bytes             int
	maps              map[string]map[string]string
	key               []byte
}

func newMapInterner(maxMaps, maxBytes int) *mapInterner {
	return &mapInterner{maxMaps: maxMaps, maxBytes: maxBytes, maps: make(map[string]map[string]string)}
}

// share returns the held map equal to m, or a copy of m that it holds from
// now on, or, when full, a copy of m. Copies own their strings: decoded
// strings may share memory with their whole file, which a resource must
// not keep alive.
func (in *mapInterner) share(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	keys := slices.Sorted(maps.Keys(m))
	in.key = in.key[:0]
	for _, k := range keys {
		// Length prefixes keep "a"+"bc" and "ab"+"c" apart.
		in.key = strconv.AppendInt(in.key, int64(len(k)), 10)
		in.key = append(in.key, ':')
		in.key = append(in.key, k...)
		in.key = strconv.AppendInt(in.key, int64(len(m[k])), 10)
		in.key = append(in.key, ':')
		in.key = append(in.key, m[k]...)
	}
	if held, ok := in.maps[string(in.key)]; ok {
		return held
	}
	own := make(map[string]string, len(m))
	for k, v := range m {
		own[strings.Clone(k)] = strings.Clone(v)
	}
	if len(in.maps) < in.maxMaps && in.bytes+len(in.key) <= in.maxBytes {
		in.maps[string(in.key)] = own
		in.bytes += len(in.key)
	}
	return own
}

// readVersion reads the i-th entry of a type's versions list at pointer at:
// an object with the allowed fields and a valid version name not seen
// before (seen maps names to their index).
func readVersion(d *Document, at string, i int, raw any, holds string, allowed map[string]bool, seen map[string]int, errs *problems) (map[string]any, string, bool) {
	v, isMap := raw.(map[string]any)
	if !isMap {
		errs.add(d.Problem(at, "must be an object with %s, not %s", holds, describe(raw)))
		return nil, "", false
	}
	unknownFields(d, at, v, allowed, errs)
	name, _ := v["name"].(string)
	if !ValidVersion(name) {
		errs.add(d.Problem(at+"/name", "invalid version name %v: use v1, v2beta1, v1alpha1 ...", v["name"]))
		return nil, "", false
	}
	if first, dup := seen[name]; dup {
		errs.add(d.Problem(at+"/name", "duplicate version %q (also at versions[%d])", name, first))
		return nil, "", false
	}
	seen[name] = i
	return v, name, true
}
