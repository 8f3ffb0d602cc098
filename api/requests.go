package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
)

// ResourceRequest is the body of POST /api/v1/resources and PUT
// /api/v1/resources/{id}, in the predecessor's shape. On PUT, fields left
// out keep their values; name, kind and version cannot change.
type ResourceRequest struct {
	Name *string `json:"name"`
	// Namespace is where a new resource of a namespaced kind goes; left
	// out, the agent's default namespace. It cannot change on PUT. (The
	// predecessor's metadata are annotations, so the namespace is a field
	// of its own here, as metadata.namespace is in a manifest.)
	Namespace           *string               `json:"namespace"`
	ResourceTypeName    *string               `json:"resource_type_name"`
	ResourceTypeVersion *string               `json:"resource_type_version"`
	ActionPlugin        *string               `json:"action_plugin"`
	Spec                json.RawMessage       `json:"spec"`
	Labels              *map[string]string    `json:"labels"`
	Annotations         *map[string]string    `json:"annotations"`
	DependsOn           *[]manifest.ObjectRef `json:"depends_on"`
	// Metadata is the predecessor's name for annotations: an object of
	// strings. Given with annotations, the two must be equal, as in an
	// object read from the API and written back.
	Metadata *map[string]any `json:"metadata"`
	// PluginConfig is the resource's own settings for its action: an
	// object, or null to remove them. Not secret: the API shows it.
	PluginConfig json.RawMessage `json:"plugin_config"`
}

// metadataAnnotations checks the request's metadata and sets the
// annotations it stands for.
func (req *ResourceRequest) metadataAnnotations() error {
	if req.Metadata == nil {
		return nil
	}
	out := make(map[string]string, len(*req.Metadata))
	for _, k := range slices.Sorted(maps.Keys(*req.Metadata)) {
		v, ok := (*req.Metadata)[k].(string)
		if !ok {
			field := "metadata." + k
			msg := fmt.Sprintf("%s: must be a string, not %s (metadata are stored as annotations, whose values are strings)",
				field, jsonKind((*req.Metadata)[k]))
			return &Error{Status: http.StatusBadRequest, Message: msg,
				Details: []Detail{{Field: field, Pointer: pointerOf([]string{"metadata", k}), Message: msg}}}
		}
		out[k] = v
	}
	// An object read from the API carries both, alike; written back, it
	// is taken. Different, it says two things.
	if req.Annotations != nil && !maps.Equal(*req.Annotations, out) {
		return &Error{Status: http.StatusBadRequest, Message: "metadata and annotations are one thing under two names, and they differ here: give one of them",
			Details: []Detail{{Field: "metadata", Pointer: "/metadata", Message: "differs from annotations"}}}
	}
	req.Annotations = &out
	return nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// ResourceTypeRequest is the body of POST /api/v1/resource-types: one
// version of a type.
type ResourceTypeRequest struct {
	Name          string `json:"name"`
	Version       string `json:"version"`
	Group         string `json:"group"`
	Description   string `json:"description"`
	Action        string `json:"action"`
	DriftInterval string `json:"drift_interval"`
	// Scope is Namespaced (the default) or Cluster.
	Scope  string          `json:"scope"`
	Schema json.RawMessage `json:"schema"`
	// Status is active (the default) or deprecated.
	Status string `json:"status"`
	// Metadata are the type's annotations: an object of strings.
	Metadata map[string]string `json:"metadata"`
}

// readOnlyResourceFields are fields of the Resource object a client may send
// back (read, modify, write) and that a write ignores.
var readOnlyResourceFields = []string{"id", "kind", "api_version", "spec_hash", "status", "status_message",
	"generation", "observed_generation", "conditions", "outputs", "source", "retry_count",
	"next_reconcile_time", "deletion_requested_at", "created_at", "updated_at", "last_reconcile_time",
	"lease", "suspended", "suspended_by", "suspended_at", "orphaned", "finalizers", "why"}

var readOnlyTypeFields = []string{"id", "source", "created_at", "updated_at"}

// decodeBody decodes a JSON object into v, refusing unknown fields other
// than the read-only ones listed, trailing data, and non-objects.
func decodeBody(r *http.Request, v any, ignored []string) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return err
		}
		return errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return errorf(http.StatusBadRequest, "the request body must be a JSON object: %s", jsonProblem(data, err))
	}
	if err := duplicateKeys(data); err != nil {
		return err
	}
	for _, k := range ignored {
		delete(fields, k)
	}
	clean, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("%s: must be %s, not %s", typeErr.Field, describeType(typeErr.Type.String()), typeErr.Value),
				Details: []Detail{{Field: typeErr.Field, Pointer: "/" + strings.ReplaceAll(typeErr.Field, ".", "/"), Message: "wrong type"}}}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("%s: unknown field", name),
				Details: []Detail{{Field: name, Pointer: "/" + name, Message: "unknown field"}}}
		}
		return errorf(http.StatusBadRequest, "the request body is not valid: %v", err)
	}
	return nil
}

// duplicateKeys refuses a body in which an object has a key twice: JSON
// decoders keep one of them silently (Go's the last), so what the client
// meant is unknown. Manifest files are held to the same rule.
func duplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path []string) error
	walk = func(path []string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				p := append(path[:len(path):len(path)], key)
				if seen[key] {
					pointer := pointerOf(p)
					return &Error{Status: http.StatusBadRequest,
						Message: fmt.Sprintf("%s: duplicate key %q", manifest.FieldPath(pointer), key),
						Details: []Detail{{Field: manifest.FieldPath(pointer), Pointer: pointer, Message: fmt.Sprintf("duplicate key %q", key)}}}
				}
				seen[key] = true
				if err := walk(p); err != nil {
					return err
				}
			}
			_, err = dec.Token() // }
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(append(path[:len(path):len(path)], strconv.Itoa(i))); err != nil {
					return err
				}
			}
			_, err = dec.Token() // ]
			return err
		}
		return nil
	}
	err := walk(nil)
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return err
	}
	return nil // syntax errors are reported by the decoding proper
}

// pointerOf writes a JSON pointer (RFC 6901) of path.
func pointerOf(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

func describeType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "*map["):
		return "an object"
	case strings.Contains(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "string"):
		return "a string"
	}
	return goType
}

// jsonProblem says where a body stops being JSON.
func jsonProblem(data []byte, err error) string {
	var syn *json.SyntaxError
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return "the body is empty"
	case errors.As(err, &syn):
		line := bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n")) + 1
		return fmt.Sprintf("%v (line %d, byte %d)", syn, line, syn.Offset)
	case err != nil:
		return err.Error()
	}
	return "null is not an object"
}

// resourceDraft is a resource as a write will declare it.
type resourceDraft struct {
	kind, namespace, name, version, action string
	spec, pluginConfig                     json.RawMessage
	labels, annotations                    map[string]string
	dependsOn                              []manifest.ObjectRef
}

// apply sets the fields the request gives.
func (d *resourceDraft) apply(req *ResourceRequest) {
	if req.ResourceTypeVersion != nil {
		d.version = *req.ResourceTypeVersion
	}
	if req.ActionPlugin != nil {
		d.action = *req.ActionPlugin
	}
	if req.Spec != nil {
		d.spec = req.Spec
	}
	if req.Labels != nil {
		d.labels = *req.Labels
	}
	if req.Annotations != nil {
		d.annotations = *req.Annotations
	}
	if req.DependsOn != nil {
		d.dependsOn = *req.DependsOn
	}
	if req.PluginConfig != nil {
		d.pluginConfig = req.PluginConfig
		if string(bytes.TrimSpace(req.PluginConfig)) == "null" {
			d.pluginConfig = nil
		}
	}
}

// resourceDocument is the manifest a draft stands for.
func resourceDocument(group, version string, d resourceDraft) ([]byte, error) {
	meta := map[string]any{"name": d.name}
	if d.namespace != "" {
		meta["namespace"] = d.namespace
	}
	if len(d.labels) > 0 {
		meta["labels"] = d.labels
	}
	if len(d.annotations) > 0 {
		meta["annotations"] = d.annotations
	}
	doc := map[string]any{"apiVersion": group + "/" + version, "kind": d.kind, "metadata": meta}
	if len(d.spec) > 0 {
		doc["spec"] = d.spec
	}
	if d.action != "" {
		doc["action"] = d.action
	}
	if len(d.dependsOn) > 0 {
		doc["dependsOn"] = d.dependsOn
	}
	if len(d.pluginConfig) > 0 {
		doc["pluginConfig"] = d.pluginConfig
	}
	return json.Marshal(doc)
}

// resourceFields maps the pointers of a resource manifest to the request's fields.
func resourceFields(pointer string) string {
	return mapPointer(pointer, []pointerRule{
		{"/metadata/name", "/name"},
		{"/metadata/namespace", "/namespace"},
		{"/metadata/labels", "/labels"},
		{"/metadata/annotations", "/annotations"},
		{"/pluginConfig", "/plugin_config"},
		{"/apiVersion", "/resource_type_version"},
		{"/kind", "/resource_type_name"},
		{"/action", "/action_plugin"},
		{"/dependsOn", "/depends_on"},
	})
}

// typeDocument is the manifest of one type version.
func typeDocument(req *ResourceTypeRequest) ([]byte, error) {
	version := map[string]any{"name": req.Version, "schema": req.Schema}
	switch req.Status {
	case "", TypeActive:
	case TypeDeprecated:
		version["deprecated"] = true
	default:
		msg := fmt.Sprintf("status: %q is not active or deprecated", req.Status)
		return nil, &Error{Status: http.StatusBadRequest, Message: msg, Details: []Detail{{Field: "status", Pointer: "/status", Message: msg}}}
	}
	spec := map[string]any{"versions": []any{version}}
	if req.Group != "" {
		spec["group"] = req.Group
	}
	if req.Description != "" {
		spec["description"] = req.Description
	}
	if req.Action != "" {
		spec["action"] = req.Action
	}
	if req.DriftInterval != "" {
		spec["driftInterval"] = req.DriftInterval
	}
	if req.Scope != "" {
		spec["scope"] = req.Scope
	}
	if len(req.Schema) == 0 {
		delete(version, "schema")
	}
	meta := map[string]any{"name": req.Name}
	if len(req.Metadata) > 0 {
		meta["annotations"] = req.Metadata
	}
	return json.Marshal(map[string]any{"apiVersion": manifest.APIVersion, "kind": "ResourceType",
		"metadata": meta, "spec": spec})
}

// typeFields maps the pointers of a type manifest to the request's fields.
func typeFields(pointer string) string {
	return mapPointer(pointer, []pointerRule{
		{"/metadata/name", "/name"},
		{"/metadata/annotations", "/metadata"},
		{"/spec/versions/0/schema", "/schema"},
		{"/spec/versions/0/name", "/version"},
		{"/spec/versions", "/version"},
		{"/spec/group", "/group"},
		{"/spec/description", "/description"},
		{"/spec/action", "/action"},
		{"/spec/driftInterval", "/drift_interval"},
		{"/spec/scope", "/scope"},
	})
}

type pointerRule struct{ from, to string }

// mapPointer rewrites the first rule whose prefix matches a whole segment.
func mapPointer(pointer string, rules []pointerRule) string {
	for _, r := range rules {
		if pointer == r.from || strings.HasPrefix(pointer, r.from+"/") {
			return r.to + strings.TrimPrefix(pointer, r.from)
		}
	}
	return pointer
}

var labelSelectorRE = regexp.MustCompile(`^([^=,]+)=([^=,]*)$`)

// parseLabels reads label=k=v query values (repeatable, or comma-separated).
func parseLabels(values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			m := labelSelectorRE.FindStringSubmatch(strings.TrimSpace(part))
			if m == nil {
				return nil, errorf(http.StatusBadRequest, "label: %q is not key=value", part)
			}
			if have, seen := out[m[1]]; seen && have != m[2] {
				return nil, errorf(http.StatusBadRequest, "label: %s=%s and %s=%s cannot both hold", m[1], have, m[1], m[2])
			}
			out[m[1]] = m[2]
		}
	}
	return out, nil
}
