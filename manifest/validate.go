package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Set is a validated set of manifests: every type compiled, every resource's
// spec defaulted, valid and hashed, no (kind, name) twice.
type Set struct {
	// Types are sorted by name.
	Types []*ResourceType
	// Resources are sorted by kind, then name.
	Resources []*Resource
}

// TypeResolver finds resource types that the documents themselves do not
// declare, such as those of other sources. It returns nil when it knows none.
type TypeResolver func(name string) *ResourceType

// Validate checks a set of documents as a whole: types first (declared in the
// documents, then from known), then every resource against its type.
// Duplicate types or resources are reported at every repeat, naming the first.
// It returns a *ValidationError listing every problem, or the Set.
func Validate(docs []*Document, known TypeResolver) (*Set, error) {
	var (
		errs     problems
		set      = &Set{}
		declared = map[string]*ResourceType{}
		broken   = map[string]Origin{}
		firstAt  = map[string]Origin{}
	)
	for _, d := range docs {
		if kind, _ := d.Object["kind"].(string); kind != KindResourceType {
			continue
		}
		name, _ := nestedString(d.Object, "metadata", "name")
		if first, dup := firstAt[name]; dup && name != "" {
			errs.add(d.Problem("/metadata/name", "duplicate ResourceType %s (first declared in %s)", name, first.at()))
			continue
		}
		firstAt[name] = d.Origin()
		t, ps := parseType(d)
		errs = append(errs, ps...)
		if t == nil {
			broken[name] = d.Origin()
			continue
		}
		declared[t.Name] = t
		set.Types = append(set.Types, t)
	}
	lookup := func(kind string) (*ResourceType, error) {
		if t := declared[kind]; t != nil {
			return t, nil
		}
		if o, ok := broken[kind]; ok {
			return nil, fmt.Errorf("cannot validate: ResourceType %s (%s) is invalid", kind, o.at())
		}
		if known != nil {
			if t := known(kind); t != nil {
				return t, nil
			}
		}
		return nil, fmt.Errorf("unknown kind %q: no ResourceType declares it", kind)
	}
	seen := map[ObjectRef]Origin{}
	for _, d := range docs {
		if kind, _ := d.Object["kind"].(string); kind == KindResourceType {
			continue
		}
		r, ps := parseResource(d, lookup)
		errs = append(errs, ps...)
		if r == nil {
			continue
		}
		if first, dup := seen[r.Ref()]; dup {
			errs.add(d.Problem("/metadata/name", "duplicate resource %s (first declared in %s)", r.Ref(), first.at()))
			continue
		}
		seen[r.Ref()] = r.Origin
		set.Resources = append(set.Resources, r)
	}
	if len(errs) > 0 {
		SortProblems(errs)
		return nil, errs.err()
	}
	sort.Slice(set.Types, func(i, j int) bool { return set.Types[i].Name < set.Types[j].Name })
	sort.Slice(set.Resources, func(i, j int) bool {
		a, b := set.Resources[i], set.Resources[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return set, nil
}

// SortProblems orders problems by file, line, document and pointer.
func SortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Document != b.Document {
			return a.Document < b.Document
		}
		return a.Pointer < b.Pointer
	})
}

func (o Origin) at() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return o.File
}

func nestedString(obj map[string]any, keys ...string) (string, bool) {
	var cur any = obj
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur = m[k]
	}
	s, ok := cur.(string)
	return s, ok
}

// Compile compiles the schemas of a type built from stored rows, so that
// resources can be validated against it. Types returned by Validate are
// already compiled.
func (t *ResourceType) Compile() error {
	var msgs []string
	for i := range t.Versions {
		v := &t.Versions[i]
		dec := json.NewDecoder(bytes.NewReader(v.Schema))
		dec.UseNumber()
		var raw any
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("resource type %s %s: schema is not JSON: %w", t.Name, v.Name, err)
		}
		raw, err := canonicalNumbers(raw)
		if err != nil {
			return fmt.Errorf("resource type %s %s: %w", t.Name, v.Name, err)
		}
		c, issues := compileSchema(raw)
		for _, is := range issues {
			msgs = append(msgs, fmt.Sprintf("%s: %s", FieldPath("/schema"+is.pointer), is.msg))
		}
		v.compiled = c
	}
	if len(msgs) > 0 {
		return fmt.Errorf("resource type %s: %s", t.Name, strings.Join(msgs, "; "))
	}
	return nil
}
