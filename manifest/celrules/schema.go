package celrules

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// rulesKey is the schema extension holding the rules.
const rulesKey = "x-kubernetes-validations"

// unsupportedKeywords are JSON Schema keywords that a Kubernetes structural
// schema cannot hold. They do not change how CEL sees a value, so a schema
// using them (validated elsewhere by a full JSON Schema validator) loses
// them here rather than all of its rules.
var unsupportedKeywords = []string{"id", "$id", "$schema", "definitions", "$defs", "patternProperties", "dependencies", "additionalItems"}

// scan walks a schema as decoded from JSON or YAML, counting its rules,
// refusing what Kubernetes refuses around them, and making the copy that is
// converted into Kubernetes' schema types.
type scan struct {
	rules    int
	problems []Problem
	// refs are the places of $ref keywords: Kubernetes schemas are written
	// inline, so a referenced schema has no type CEL could use.
	refs []string
}

// schema scans the schema v found at ptr and returns the copy to convert.
// outside names the keyword above ptr (allOf, not, patternProperties...)
// under which Kubernetes does not evaluate rules; empty where it does.
func (s *scan) schema(v any, ptr, outside string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		out[k] = val
	}
	if raw, ok := m[rulesKey]; ok {
		list, isList := raw.([]any)
		switch {
		case !isList:
			s.rules++
			s.problems = append(s.problems, Problem{ptr + "/" + rulesKey, "must be a list of rules"})
		case outside != "":
			s.rules += len(list)
			s.problems = append(s.problems, Problem{ptr + "/" + rulesKey, fmt.Sprintf(
				"rules are not evaluated inside %s; Kubernetes only evaluates them in the schemas of objects, properties, items and additionalProperties", outside)})
		default:
			s.rules += len(list)
		}
	}
	if _, ok := m["$ref"]; ok {
		s.refs = append(s.refs, ptr+"/$ref")
	}
	if t, ok := m["type"]; ok {
		if _, isString := t.(string); !isString {
			s.problems = append(s.problems, Problem{ptr + "/type", "must be a single type name; Kubernetes schemas say nullable: true rather than listing null"})
			delete(out, "type")
		}
	}
	for _, k := range unsupportedKeywords {
		delete(out, k)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		cp := make(map[string]any, len(props))
		for name, sub := range props {
			cp[name] = s.schema(sub, ptr+"/properties/"+escapePointer(name), outside)
		}
		out["properties"] = cp
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		out["additionalProperties"] = s.schema(ap, ptr+"/additionalProperties", outside)
	}
	switch items := m["items"].(type) {
	case map[string]any:
		out["items"] = s.schema(items, ptr+"/items", outside)
	case []any:
		for i, sub := range items {
			s.schema(sub, ptr+"/items/"+strconv.Itoa(i), firstOf(outside, "items given as a list"))
		}
		s.problems = append(s.problems, Problem{ptr + "/items", "must be a single schema, as Kubernetes requires"})
		delete(out, "items")
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if list, ok := m[k].([]any); ok {
			cp := make([]any, len(list))
			for i, sub := range list {
				cp[i] = s.schema(sub, ptr+"/"+k+"/"+strconv.Itoa(i), firstOf(outside, k))
			}
			out[k] = cp
		}
	}
	if not, ok := m["not"].(map[string]any); ok {
		out["not"] = s.schema(not, ptr+"/not", firstOf(outside, "not"))
	}
	// The dropped keywords are still scanned, so that rules there are
	// refused rather than silently ignored.
	for _, k := range []string{"definitions", "$defs", "patternProperties", "dependencies"} {
		if subs, ok := m[k].(map[string]any); ok {
			for name, sub := range subs {
				s.schema(sub, ptr+"/"+k+"/"+escapePointer(name), firstOf(outside, k))
			}
		}
	}
	if ai, ok := m["additionalItems"].(map[string]any); ok {
		s.schema(ai, ptr+"/additionalItems", firstOf(outside, "additionalItems"))
	}
	return out
}

// firstOf returns a unless it is empty.
func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// structural converts a scanned schema into Kubernetes' structural schema,
// the form its CEL libraries type values with. It goes through the
// published v1 types, as a CRD read from a cluster or a file would.
func structural(clean any) (*structuralschema.Structural, error) {
	data, err := json.Marshal(clean)
	if err != nil {
		return nil, fmt.Errorf("encoding schema: %w", err)
	}
	var v1 apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal(data, &v1); err != nil {
		return nil, fmt.Errorf("schema is not an OpenAPI v3 schema as Kubernetes reads one: %w", err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &internal, nil); err != nil {
		return nil, fmt.Errorf("converting schema: %w", err)
	}
	ss, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, fmt.Errorf("schema is not structural as Kubernetes requires: %w", err)
	}
	return ss, nil
}

// isResourceRoot tells whether a schema describes a whole Kubernetes
// resource rather than a part of one.
func isResourceRoot(ss *structuralschema.Structural) bool {
	for _, name := range []string{"apiVersion", "kind", "metadata"} {
		if _, ok := ss.Properties[name]; !ok {
			return false
		}
	}
	return true
}

// escapePointer escapes one reference token of a JSON pointer (RFC 6901).
func escapePointer(token string) string {
	if !strings.ContainsAny(token, "~/") {
		return token
	}
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// sortedKeys returns the keys of m in order, so that walks, problems and
// violations come out the same every time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
