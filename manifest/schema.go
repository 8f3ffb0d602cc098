package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// schemaURL is the name a version's schema is compiled under; nothing is
// ever fetched from it.
const schemaURL = "mem://no8s/schema.json"

// compiledSchema is a version's schema ready to default and validate specs.
type compiledSchema struct {
	// source is the schema as written; defaults are read from it.
	source map[string]any
	// validator is the compiled schema, with OpenAPI's nullable rewritten
	// into JSON Schema.
	validator *jsonschema.Schema
}

// schemaIssue is one problem with a schema or with a value against it; the
// pointer is relative to the schema (for schema problems) or to the value.
type schemaIssue struct {
	pointer string
	msg     string
}

// compileSchema compiles an OpenAPI v3 schema for a resource spec. OpenAPI
// v3.0 is JSON Schema draft 4 plus some keywords: nullable is honoured by
// rewriting it into a "null" type; x-kubernetes-* and other unknown keywords
// are accepted and ignored. Every default must itself be valid, as
// Kubernetes requires of structural schemas.
func compileSchema(raw any) (*compiledSchema, []schemaIssue) {
	src, ok := raw.(map[string]any)
	if !ok {
		return nil, []schemaIssue{{"", "schema must be an object, not " + describe(raw)}}
	}
	if t, _ := src["type"].(string); t != "object" {
		return nil, []schemaIssue{{"/type", `the schema of a spec must have type: object`}}
	}
	rewritten, err := CanonicalJSON(rewriteNullable(deepCopy(src)))
	if err != nil {
		return nil, []schemaIssue{{"", err.Error()}}
	}
	c := newCompiler()
	if err := c.AddResource(schemaURL, bytes.NewReader(rewritten)); err != nil {
		return nil, []schemaIssue{{"", err.Error()}}
	}
	validator, err := c.Compile(schemaURL)
	if err != nil {
		return nil, compileIssues(err)
	}
	var issues []schemaIssue
	for _, d := range collectDefaults(src, "") {
		sub, err := c.Compile(schemaURL + "#" + d.pointer)
		if err != nil {
			issues = append(issues, compileIssues(err)...)
			continue
		}
		if err := sub.Validate(deepCopy(d.value)); err != nil {
			for _, leaf := range validationIssues(err) {
				issues = append(issues, schemaIssue{d.pointer + "/default" + leaf.pointer, "default is invalid: " + leaf.msg})
			}
		}
	}
	if len(issues) > 0 {
		return nil, issues
	}
	return &compiledSchema{source: src, validator: validator}, nil
}

func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft4
	// Schemas come from Git; they must never make the agent fetch anything.
	c.LoadURL = func(url string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("schema references %q: only references within the schema (#/...) are allowed", url)
	}
	return c
}

// rewriteNullable turns OpenAPI's `nullable: true` into JSON Schema: null is
// added to the allowed types (and to enum, which would otherwise refuse it).
// It walks only the keywords that hold schemas, so a property that happens to
// be called "default" or "enum" is still treated as a schema.
func rewriteNullable(v any) any {
	s, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for _, kw := range []string{"properties", "patternProperties", "definitions"} {
		if m, ok := s[kw].(map[string]any); ok {
			for name, sub := range m {
				m[name] = rewriteNullable(sub)
			}
		}
	}
	for _, kw := range []string{"items", "additionalProperties", "additionalItems", "not"} {
		if sub, ok := s[kw]; ok {
			s[kw] = rewriteNullable(sub)
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf", "items"} {
		if list, ok := s[kw].([]any); ok {
			for i, sub := range list {
				list[i] = rewriteNullable(sub)
			}
		}
	}
	if n, _ := s["nullable"].(bool); n {
		if t, ok := s["type"].(string); ok {
			s["type"] = []any{t, "null"}
		}
		if e, ok := s["enum"].([]any); ok {
			s["enum"] = append(e, nil)
		}
	}
	delete(s, "nullable")
	return s
}

type defaultAt struct {
	pointer string
	value   any
}

// collectDefaults finds the defaults Kubernetes-style defaulting applies:
// under properties, items and additionalProperties.
func collectDefaults(s map[string]any, ptr string) []defaultAt {
	var out []defaultAt
	if d, ok := s["default"]; ok && ptr != "" {
		out = append(out, defaultAt{ptr, d})
	}
	if props, ok := s["properties"].(map[string]any); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if sub, ok := props[name].(map[string]any); ok {
				out = append(out, collectDefaults(sub, ptr+"/properties/"+escapePointer(name))...)
			}
		}
	}
	if sub, ok := s["items"].(map[string]any); ok {
		out = append(out, collectDefaults(sub, ptr+"/items")...)
	}
	if sub, ok := s["additionalProperties"].(map[string]any); ok {
		out = append(out, collectDefaults(sub, ptr+"/additionalProperties")...)
	}
	return out
}

// applyDefaults sets missing fields to their schema defaults, as Kubernetes
// does for structural schemas: under properties, items and
// additionalProperties, nested objects included. A null in a field that is
// not nullable is dropped first, so that its default applies.
func applyDefaults(s map[string]any, v any) any {
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			sub, ok := p.(map[string]any)
			if !ok {
				continue
			}
			val, present := x[name]
			if present && val == nil {
				if nullable, _ := sub["nullable"].(bool); !nullable {
					delete(x, name)
					present = false
				}
			}
			if !present {
				d, ok := sub["default"]
				if !ok {
					continue
				}
				val = deepCopy(d)
			}
			x[name] = applyDefaults(sub, val)
		}
		if sub, ok := s["additionalProperties"].(map[string]any); ok {
			for name, val := range x {
				if _, declared := props[name]; !declared {
					x[name] = applyDefaults(sub, val)
				}
			}
		}
		return x
	case []any:
		if sub, ok := s["items"].(map[string]any); ok {
			for i, e := range x {
				x[i] = applyDefaults(sub, e)
			}
		}
	}
	return v
}

// validate checks a defaulted spec against the schema and returns every
// violation, with pointers relative to the spec.
func (c *compiledSchema) validate(spec any) []schemaIssue {
	if c == nil || c.validator == nil {
		return []schemaIssue{{"", "the type version has no valid schema"}}
	}
	err := c.validator.Validate(spec)
	if err == nil {
		return nil
	}
	return validationIssues(err)
}

// validationIssues flattens a jsonschema error into its leaf causes: those
// name the failing field and say what is wrong with it.
func validationIssues(err error) []schemaIssue {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []schemaIssue{{"", err.Error()}}
	}
	var out []schemaIssue
	seen := map[schemaIssue]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			// jsonschema prints a null in an enum the Go way.
			is := schemaIssue{e.InstanceLocation, strings.ReplaceAll(e.Message, "<nil>", "null")}
			if !seen[is] {
				seen[is] = true
				out = append(out, is)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool { return out[i].pointer < out[j].pointer })
	return out
}

// compileIssues turns a compile error into issues with pointers into the schema.
func compileIssues(err error) []schemaIssue {
	var se *jsonschema.SchemaError
	if errors.As(err, &se) && se.Err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			// The meta-schema reports every branch of its anyOf for one bad
			// keyword; the first says enough.
			var issues []schemaIssue
			seen := map[string]bool{}
			for _, is := range validationIssues(ve) {
				if !seen[is.pointer] {
					seen[is.pointer] = true
					issues = append(issues, schemaIssue{is.pointer, "invalid schema: " + is.msg})
				}
			}
			return issues
		}
		return []schemaIssue{{"", "invalid schema: " + trimSchemaURL(se.Err.Error())}}
	}
	return []schemaIssue{{"", "invalid schema: " + trimSchemaURL(err.Error())}}
}

func trimSchemaURL(s string) string {
	return strings.ReplaceAll(s, schemaURL, "schema")
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
