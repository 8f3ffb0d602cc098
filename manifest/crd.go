package manifest

import (
	"fmt"
	"strings"
	"time"
)

// Kubernetes CustomResourceDefinitions are accepted as resource types, so
// that the CRDs projects publish serve as they are.
const (
	// CRDAPIVersion is the apiVersion of the CRDs accepted as types.
	CRDAPIVersion = "apiextensions.k8s.io/v1"
	// KindCRD is their kind.
	KindCRD = "CustomResourceDefinition"
)

// Annotations of a CRD that say what a ResourceType's spec would: a CRD has
// no place for them.
const (
	// AnnotationAction names the default action instance of its resources.
	AnnotationAction = "no8s.io/action"
	// AnnotationDriftInterval is how often drift is checked, e.g. "1h".
	AnnotationDriftInterval = "no8s.io/drift-interval"
)

var (
	// crdMetadataFields are the metadata fields a published CRD may carry
	// (controller-gen writes creationTimestamp: null), as any document's:
	// only name, labels and annotations mean anything here.
	crdMetadataFields = metadataFields
	crdFields         = fieldSet("apiVersion", "kind", "metadata", "spec", "status")
	crdSpecFields     = fieldSet("group", "names", "scope", "versions", "conversion", "preserveUnknownFields")
	crdVersionFields  = fieldSet("name", "served", "storage", "deprecated", "deprecationWarning", "schema",
		"subresources", "additionalPrinterColumns", "selectableFields")
)

// crdGroup is the API group of CustomResourceDefinitions.
const crdGroup = "apiextensions.k8s.io"

// IsTypeDocument reports whether a decoded document declares a resource
// type: a ResourceType, or a CustomResourceDefinition. A CRD of another
// version than CRDAPIVersion is one too, refused when parsed with a message
// that says so: read as a resource of an unknown kind, it would get
// several misleading ones.
func IsTypeDocument(obj map[string]any) bool {
	switch kind, _ := obj["kind"].(string); kind {
	case KindResourceType:
		return true
	case KindCRD:
		apiVersion, _ := obj["apiVersion"].(string)
		group, _, _ := strings.Cut(apiVersion, "/")
		return group == crdGroup
	}
	return false
}

// typeDocumentName is the name a type document declares: the kind its
// resources use.
func typeDocumentName(obj map[string]any) string {
	if kind, _ := obj["kind"].(string); kind == KindCRD {
		name, _ := nestedString(obj, "spec", "names", "kind")
		return name
	}
	name, _ := nestedString(obj, "metadata", "name")
	return name
}

// parseTypeDocument parses either kind of type document.
func parseTypeDocument(d *Document) (*ResourceType, []Problem) {
	if kind, _ := d.Object["kind"].(string); kind == KindCRD {
		return parseCRD(d)
	}
	return parseType(d)
}

// parseCRD reads a CustomResourceDefinition as a resource type: the kind
// is spec.names.kind, the group spec.group, and each served version's
// schema is the spec property of its openAPIV3Schema, where the resource's
// spec is. Unserved versions are left out, as Kubernetes serves no
// resources of them. spec.scope says whether its resources take a
// namespace. Conversion, printer columns and subresources mean nothing
// without a cluster and are ignored.
func parseCRD(d *Document) (*ResourceType, []Problem) {
	var errs problems
	if apiVersion, _ := d.Object["apiVersion"].(string); apiVersion != CRDAPIVersion {
		// v1beta1 was removed from Kubernetes in 1.22; projects publish v1.
		return nil, []Problem{d.Problem("/apiVersion", "%s is not supported: only %s CustomResourceDefinitions are (use the v1 CRD the project publishes)", apiVersion, CRDAPIVersion)}
	}
	h, ok := readHeaderWith(d, &errs, crdMetadataFields)
	unknownFields(d, "", d.Object, crdFields, &errs)
	if !ok {
		return nil, errs
	}
	clusterScoped(d, h, KindCRD, &errs)
	spec, isMap := d.Object["spec"].(map[string]any)
	if !isMap {
		errs.add(d.Problem("/spec", "%s", missingOr(d.Object, "spec", "an object with group, names and versions")))
		return nil, errs
	}
	unknownFields(d, "/spec", spec, crdSpecFields, &errs)
	group, _ := spec["group"].(string)
	if group == "" || len(group) > 253 || !groupRE.MatchString(group) || !strings.Contains(group, ".") {
		errs.add(d.Problem("/spec/group", "invalid group %v: a DNS subdomain with at least one dot, such as cert-manager.io", spec["group"]))
	}
	kind, _ := nestedString(spec, "names", "kind")
	plural, _ := nestedString(spec, "names", "plural")
	switch {
	case kind == "":
		errs.add(d.Problem("/spec/names/kind", "required field is missing: the kind its resources use"))
	case !ValidKindName(kind) || kind == KindResourceType || kind == KindCRD:
		errs.add(d.Problem("/spec/names/kind", "invalid kind %q: an upper-case letter followed by at most 62 letters and digits", kind))
	}
	if plural == "" {
		errs.add(d.Problem("/spec/names/plural", "required field is missing"))
	} else if want := plural + "." + group; h.name != want {
		errs.add(d.Problem("/metadata/name", "must be %q: <spec.names.plural>.<spec.group>, as Kubernetes requires", want))
	}
	t := &ResourceType{Name: kind, Group: group, Annotations: h.annotations, Origin: d.Origin(), Scope: readScope(d, spec, &errs)}
	// An API server asks subdomains of custom resources' names; a CRD has
	// no field to ask otherwise, so the annotation does.
	t.NameFormat, t.Annotations = readNameFormat(d, nil, h.annotations, &errs)
	if a := h.annotations[AnnotationAction]; a != "" {
		if !actionNameRE.MatchString(a) {
			errs.add(d.Problem("/metadata/annotations/"+escapePointer(AnnotationAction), "invalid action instance name %q: lower-case letters, digits, '-' and '_'", a))
		}
		t.Action = a
	}
	if s := h.annotations[AnnotationDriftInterval]; s != "" {
		iv, err := time.ParseDuration(s)
		if err != nil || iv < 0 {
			errs.add(d.Problem("/metadata/annotations/"+escapePointer(AnnotationDriftInterval), "invalid duration %q (use e.g. 30m or 6h)", s))
		}
		t.DriftInterval = iv
	}

	versions, isList := spec["versions"].([]any)
	if !isList || len(versions) == 0 {
		errs.add(d.Problem("/spec/versions", "must be a non-empty list of versions"))
		return nil, errs
	}
	storage := 0
	seen := map[string]int{}
	for i, raw := range versions {
		at := fmt.Sprintf("/spec/versions/%d", i)
		v, name, ok := readVersion(d, at, i, raw, "name, served, storage and schema", crdVersionFields, seen, &errs)
		if !ok {
			continue
		}
		flags := map[string]bool{}
		for _, f := range []string{"served", "storage", "deprecated"} {
			if raw, present := v[f]; present {
				b, isBool := raw.(bool)
				if !isBool {
					errs.add(d.Problem(at+"/"+f, "must be true or false, not %s", describe(raw)))
				}
				flags[f] = b
			}
		}
		if flags["storage"] {
			storage++
		}
		if !flags["served"] {
			continue
		}
		root, isMap := nestedMap(v, "schema", "openAPIV3Schema")
		if !isMap {
			errs.add(d.Problem(at+"/schema/openAPIV3Schema", "required: the version's OpenAPI v3 schema"))
			continue
		}
		specSchema, hasSpec := nestedMap(root, "properties", "spec")
		schemaAt := at + "/schema/openAPIV3Schema/properties/spec"
		if !hasSpec {
			// Resources of a CRD without a spec property keep whatever
			// spec they declare.
			specSchema = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		}
		compiled, issues := compileSchema(specSchema)
		for _, is := range issues {
			errs.add(d.Problem(schemaAt+is.pointer, "%s", is.msg))
		}
		if compiled == nil {
			continue
		}
		canonical, err := CanonicalJSON(specSchema)
		if err != nil {
			errs.add(d.Problem(schemaAt, "%v", err))
			continue
		}
		if t.Description == "" {
			desc, _ := root["description"].(string)
			t.Description, _, _ = strings.Cut(desc, "\n")
		}
		t.Versions = append(t.Versions, TypeVersion{Name: name, Schema: canonical, Deprecated: flags["deprecated"], compiled: compiled})
	}
	if storage != 1 {
		errs.add(d.Problem("/spec/versions", "exactly one version must have storage: true, not %d", storage))
	}
	if len(t.Versions) == 0 && len(errs) == 0 {
		errs.add(d.Problem("/spec/versions", "no version is served: resources of it could not be declared"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// nestedMap returns the object at keys below obj.
func nestedMap(obj map[string]any, keys ...string) (map[string]any, bool) {
	cur := obj
	for _, k := range keys {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}
