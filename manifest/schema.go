package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/no8s/no8s-agent/manifest/celrules"
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
	// rules are the schema's x-kubernetes-validations, compiled; nil when
	// it has none.
	rules *celrules.Rules
	// fields are the fields the schema declares, and its list types;
	// lists is true when any list is a list-type map or set.
	fields *fieldNode
	lists  bool
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
	rules, err := celrules.Compile(src)
	var cerr *celrules.CompileError
	switch {
	case errors.As(err, &cerr):
		for _, p := range cerr.Problems {
			issues = append(issues, schemaIssue{p.Pointer, p.Message})
		}
	case err != nil:
		issues = append(issues, schemaIssue{"", err.Error()})
	}
	if len(issues) > 0 {
		return nil, issues
	}
	if rules.Len() == 0 {
		rules = nil
	}
	fields, lists := compileFields(src)
	return &compiledSchema{source: src, validator: validator, rules: rules, fields: fields, lists: lists}, nil
}

// checkRules evaluates the schema's CEL rules on spec, and with old (the
// spec last accepted) also its transition rules; nil old is a creation,
// where Kubernetes leaves transition rules out. Pointers are relative to
// the spec.
func (c *compiledSchema) checkRules(spec, old any) []schemaIssue {
	if c == nil || c.rules == nil {
		return nil
	}
	var issues []schemaIssue
	for _, v := range c.rules.Validate(context.Background(), spec, old) {
		issues = append(issues, schemaIssue{v.Path, v.Message})
	}
	return issues
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
	if quickCheck(c.validator, spec) == quickValid {
		return nil
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
			is := schemaIssue{e.InstanceLocation, quotePatternOnce(strings.ReplaceAll(e.Message, "<nil>", "null"))}
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

// patternPrefix starts jsonschema's message for a string that does not
// match its pattern.
const patternPrefix = "does not match pattern "

// quotePatternOnce rewrites jsonschema's message for a pattern mismatch so
// that the pattern reads as written in the schema, in single quotes, as an
// API server shows it: jsonschema escapes it as a Go string first, which
// doubles every backslash ('^(\\*\\.)?' for ^(\*\.)?).
func quotePatternOnce(msg string) string {
	quoted, ok := strings.CutPrefix(msg, patternPrefix)
	if !ok {
		return msg
	}
	pattern, ok := unquoteJSONSchema(quoted)
	if !ok {
		return msg
	}
	return patternPrefix + "'" + pattern + "'"
}

// unquoteJSONSchema undoes jsonschema's quote: the text of a Go string
// literal, with \" written " and ' written \', between single quotes.
func unquoteJSONSchema(s string) (string, bool) {
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	var b strings.Builder
	b.WriteByte('"')
	inner := s[1 : len(s)-1]
	for i := 0; i < len(inner); i++ {
		switch c := inner[i]; {
		case c == '\\' && i+1 < len(inner):
			if inner[i+1] == '\'' {
				b.WriteByte('\'')
			} else {
				b.WriteByte(c)
				b.WriteByte(inner[i+1])
			}
			i++
		case c == '"':
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	out, err := strconv.Unquote(b.String())
	return out, err == nil
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

// Results of quickCheck.
const (
	quickInvalid = iota
	quickValid
	quickUnsure
)

// quickCheck tells whether v is valid against s without building errors,
// for the keywords structural schemas use (type, properties, required,
// additionalProperties, items, enum of scalars, bounds, lengths, pattern).
// It answers quickUnsure for anything else, and whenever it is not certain
// to agree with s.Validate; only quickValid is ever trusted, so a wrong
// quickInvalid or quickUnsure costs time, never correctness.
func quickCheck(s *jsonschema.Schema, v any) int {
	if s.Always != nil {
		if *s.Always {
			return quickValid
		}
		return quickInvalid
	}
	if s.Ref != nil || s.RecursiveRef != nil || s.DynamicRef != nil || s.Not != nil ||
		len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.If != nil ||
		s.Format != "" || len(s.Constant) > 0 || len(s.Extensions) > 0 || s.MultipleOf != nil ||
		s.ContentEncoding != "" || s.ContentMediaType != "" || s.ContentSchema != nil {
		return quickUnsure
	}
	if len(s.Types) > 0 {
		matched := false
		for _, t := range s.Types {
			switch x := v.(type) {
			case nil:
				matched = t == "null"
			case bool:
				matched = t == "boolean"
			case string:
				matched = t == "string"
			case []any:
				matched = t == "array"
			case map[string]any:
				matched = t == "object"
			case json.Number:
				if t == "number" {
					matched = true
				} else if t == "integer" {
					_, err := strconv.ParseInt(string(x), 10, 64)
					if err != nil {
						return quickUnsure
					}
					matched = true
				}
			default:
				return quickUnsure
			}
			if matched {
				break
			}
		}
		if !matched {
			return quickInvalid
		}
	}
	if len(s.Enum) > 0 {
		matched := false
		for _, item := range s.Enum {
			switch eq := quickEqual(v, item); eq {
			case quickValid:
				matched = true
			case quickUnsure:
				return quickUnsure
			}
			if matched {
				break
			}
		}
		if !matched {
			return quickInvalid
		}
	}
	switch x := v.(type) {
	case map[string]any:
		return quickObject(s, x)
	case []any:
		if s.UniqueItems || s.AdditionalItems != nil || len(s.PrefixItems) > 0 || s.Items2020 != nil ||
			s.Contains != nil || s.UnevaluatedItems != nil {
			return quickUnsure
		}
		if (s.MinItems != -1 && len(x) < s.MinItems) || (s.MaxItems != -1 && len(x) > s.MaxItems) {
			return quickInvalid
		}
		switch items := s.Items.(type) {
		case nil:
		case *jsonschema.Schema:
			for _, item := range x {
				if r := quickCheck(items, item); r != quickValid {
					return r
				}
			}
		default:
			return quickUnsure
		}
	case string:
		if s.MinLength != -1 || s.MaxLength != -1 {
			n := utf8.RuneCountInString(x)
			if (s.MinLength != -1 && n < s.MinLength) || (s.MaxLength != -1 && n > s.MaxLength) {
				return quickInvalid
			}
		}
		if s.Pattern != nil && !s.Pattern.MatchString(x) {
			return quickInvalid
		}
	case json.Number:
		if s.Minimum == nil && s.Maximum == nil && s.ExclusiveMinimum == nil && s.ExclusiveMaximum == nil {
			break
		}
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return quickUnsure
		}
		for _, b := range []struct {
			bound *big.Rat
			ok    func(c int) bool
		}{
			{s.Minimum, func(c int) bool { return c >= 0 }},
			{s.ExclusiveMinimum, func(c int) bool { return c > 0 }},
			{s.Maximum, func(c int) bool { return c <= 0 }},
			{s.ExclusiveMaximum, func(c int) bool { return c < 0 }},
		} {
			if b.bound == nil {
				continue
			}
			if !b.bound.IsInt() || !b.bound.Num().IsInt64() {
				return quickUnsure
			}
			if !b.ok(cmpInt64(n, b.bound.Num().Int64())) {
				return quickInvalid
			}
		}
	}
	return quickValid
}

func quickObject(s *jsonschema.Schema, x map[string]any) int {
	if s.PropertyNames != nil || s.RegexProperties || len(s.PatternProperties) > 0 || len(s.Dependencies) > 0 ||
		len(s.DependentRequired) > 0 || len(s.DependentSchemas) > 0 || s.UnevaluatedProperties != nil {
		return quickUnsure
	}
	if (s.MinProperties != -1 && len(x) < s.MinProperties) || (s.MaxProperties != -1 && len(x) > s.MaxProperties) {
		return quickInvalid
	}
	for _, name := range s.Required {
		if _, ok := x[name]; !ok {
			return quickInvalid
		}
	}
	for name, sub := range s.Properties {
		if val, ok := x[name]; ok {
			if r := quickCheck(sub, val); r != quickValid {
				return r
			}
		}
	}
	switch ap := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		if !ap {
			for name := range x {
				if _, declared := s.Properties[name]; !declared {
					return quickInvalid
				}
			}
		}
	case *jsonschema.Schema:
		for name, val := range x {
			if _, declared := s.Properties[name]; declared {
				continue
			}
			if r := quickCheck(ap, val); r != quickValid {
				return r
			}
		}
	default:
		return quickUnsure
	}
	return quickValid
}

// quickEqual compares a value with a scalar enum item as jsonschema does.
func quickEqual(v, item any) int {
	switch a := item.(type) {
	case nil:
		return boolResult(v == nil)
	case bool:
		b, ok := v.(bool)
		return boolResult(ok && a == b)
	case string:
		b, ok := v.(string)
		return boolResult(ok && a == b)
	}
	switch v.(type) {
	case nil, bool, string:
		// Items of other types are numbers, lists or objects: never
		// equal to these.
		switch item.(type) {
		case json.Number, float64, []any, map[string]any:
			return quickInvalid
		}
	}
	return quickUnsure
}

func boolResult(ok bool) int {
	if ok {
		return quickValid
	}
	return quickInvalid
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
