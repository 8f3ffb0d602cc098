package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// UnknownFields says what validation does with the fields of a spec that
// its schema does not declare: the fieldValidation of a Kubernetes API
// server, chosen per source.
type UnknownFields string

// The modes of UnknownFields. The zero value is UnknownFieldsStrict.
const (
	// UnknownFieldsStrict refuses the document, naming each such field, as
	// a server asked for fieldValidation=Strict (kubectl apply) does.
	UnknownFieldsStrict UnknownFields = "strict"
	// UnknownFieldsWarn keeps them in the stored spec and warns of each.
	UnknownFieldsWarn UnknownFields = "warn"
	// UnknownFieldsPrune drops them before the spec is stored, as a server
	// asked for fieldValidation=Ignore does, and says which it dropped.
	UnknownFieldsPrune UnknownFields = "prune"
)

// ParseUnknownFields reads a mode as configured; empty is strict.
func ParseUnknownFields(s string) (UnknownFields, error) {
	switch m := UnknownFields(s); m {
	case "":
		return UnknownFieldsStrict, nil
	case UnknownFieldsStrict, UnknownFieldsWarn, UnknownFieldsPrune:
		return m, nil
	}
	return "", fmt.Errorf("unknown fields mode %q: use strict, warn or prune", s)
}

func (m UnknownFields) orStrict() UnknownFields {
	if m == "" {
		return UnknownFieldsStrict
	}
	return m
}

// fieldNode is what a schema node declares about the fields below it: the
// parts of the schema that say which fields exist (properties, items,
// additionalProperties) and the x-kubernetes keywords that change it. It
// is built once per schema. A node Kubernetes would take as structural is
// read as Kubernetes reads it: an object that declares no fields has none.
// A node that says nothing about its shape (no type, no properties, no
// items, as JSON Schema allows and Kubernetes refuses) accepts anything.
type fieldNode struct {
	// free accepts any value: nothing below it is checked.
	free bool
	// object and array are the kinds of value the node describes (its
	// type, or any when it has none); other values are left to the schema
	// validation, which refuses them.
	object, array bool
	// preserve is x-kubernetes-preserve-unknown-fields: true; fields the
	// node does not declare are kept, those it declares are still checked.
	preserve bool
	// embedded is x-kubernetes-embedded-resource: apiVersion, kind and
	// metadata are the embedded object's own and are not checked.
	embedded bool
	props    map[string]*fieldNode
	patterns []patternField
	// additional is additionalProperties: a schema, or a free node for
	// true; nil when absent or false.
	additional *fieldNode
	// branches are the nodes of allOf, anyOf and oneOf that say something
	// of the value's shape: a field one of them declares is declared
	// (Kubernetes requires such fields in the node itself too; other
	// schemas need not).
	branches []*fieldNode
	// items is never nil but in freeNode.
	items *fieldNode
	// listType and mapKeys are x-kubernetes-list-type and
	// x-kubernetes-list-map-keys.
	listType string
	mapKeys  []string
	// names are the declared field names, sorted: the candidates of a
	// suggestion.
	names []string
}

type patternField struct {
	// re is nil when the pattern does not compile here: it then matches
	// any name, as refusing would be a guess.
	re   *regexp.Regexp
	node *fieldNode
}

// freeNode accepts anything.
var freeNode = &fieldNode{free: true}

// compileFields builds the field tree of a schema; root is the whole
// schema, which references (#/...) resolve in. lists tells whether any
// node is a list-type map or set, which duplicates need to look for.
func compileFields(root map[string]any) (n *fieldNode, lists bool) {
	c := fieldCompiler{root: root, refs: map[string]*fieldNode{}}
	n = c.node(root)
	return n, c.lists
}

type fieldCompiler struct {
	root map[string]any
	// refs are the nodes of references, by reference, so that a schema
	// that refers to itself is built once.
	refs  map[string]*fieldNode
	lists bool
}

// structuralKeywords are the keywords that say what shape a value has;
// the branches of allOf, anyOf and oneOf may say it too.
var structuralKeywords = []string{"type", "properties", "patternProperties", "additionalProperties", "items",
	"x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"}

func (c *fieldCompiler) node(s map[string]any) *fieldNode {
	if ref, ok := s["$ref"].(string); ok {
		// Draft 4: a reference stands for the whole schema it sits in.
		if n := c.refs[ref]; n != nil {
			return n
		}
		target, ok := resolveRef(c.root, ref)
		if !ok {
			return freeNode
		}
		n := &fieldNode{}
		c.refs[ref] = n
		*n = *c.node(target)
		return n
	}
	structural := false
	for _, k := range structuralKeywords {
		if _, ok := s[k]; ok {
			structural = true
			break
		}
	}
	var branches []*fieldNode
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, _ := s[k].([]any)
		for _, sub := range list {
			if m, ok := sub.(map[string]any); ok {
				if b := c.node(m); !b.free {
					branches = append(branches, b)
				}
			}
		}
	}
	if !structural && len(branches) == 0 {
		// Nothing here, nor in a branch (anyOf: [{required: [a]}, ...]),
		// says what shape the value has.
		return freeNode
	}
	n := &fieldNode{branches: branches}
	switch t := s["type"].(type) {
	case nil:
		n.object, n.array = true, true
	case string:
		n.object, n.array = t == "object", t == "array"
	case []any:
		n.object, n.array = slices.Contains(t, any("object")), slices.Contains(t, any("array"))
	}
	n.preserve, _ = s["x-kubernetes-preserve-unknown-fields"].(bool)
	n.embedded, _ = s["x-kubernetes-embedded-resource"].(bool)
	names := map[string]bool{}
	if props, ok := s["properties"].(map[string]any); ok {
		n.props = make(map[string]*fieldNode, len(props))
		for name, sub := range props {
			names[name] = true
			if m, ok := sub.(map[string]any); ok {
				n.props[name] = c.node(m)
			} else {
				n.props[name] = freeNode
			}
		}
	}
	if pp, ok := s["patternProperties"].(map[string]any); ok {
		for _, pattern := range slices.Sorted(maps.Keys(pp)) {
			p := patternField{node: freeNode}
			p.re, _ = regexp.Compile(pattern)
			if m, ok := pp[pattern].(map[string]any); ok {
				p.node = c.node(m)
			}
			n.patterns = append(n.patterns, p)
		}
	}
	switch ap := s["additionalProperties"].(type) {
	case bool:
		if ap {
			n.additional = freeNode
		}
	case map[string]any:
		n.additional = c.node(ap)
	}
	switch items := s["items"].(type) {
	case map[string]any:
		n.items = c.node(items)
	default:
		// Absent (Kubernetes requires items; JSON Schema allows anything)
		// or a list of schemas, one per position: not checked.
		n.items = freeNode
	}
	for _, b := range branches {
		for _, name := range b.names {
			names[name] = true
		}
	}
	n.listType, _ = s["x-kubernetes-list-type"].(string)
	c.lists = c.lists || n.listType == "set" || n.listType == "map"
	if keys, ok := s["x-kubernetes-list-map-keys"].([]any); ok {
		for _, k := range keys {
			if name, ok := k.(string); ok {
				n.mapKeys = append(n.mapKeys, name)
			}
		}
	}
	n.names = slices.Sorted(maps.Keys(names))
	return n
}

// resolveRef finds the schema a local reference (#/definitions/x) names.
func resolveRef(root map[string]any, ref string) (map[string]any, bool) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	var cur any = root
	if ptr != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
			switch x := cur.(type) {
			case map[string]any:
				cur = x[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return nil, false
				}
				cur = x[i]
			default:
				return nil, false
			}
		}
	}
	m, ok := cur.(map[string]any)
	return m, ok
}

// child returns the node of the field name of an object n describes, and
// whether n declares it.
func (n *fieldNode) child(name string) (*fieldNode, bool) {
	if c, ok := n.props[name]; ok {
		return c, true
	}
	for _, p := range n.patterns {
		if p.re == nil || p.re.MatchString(name) {
			return p.node, true
		}
	}
	for _, b := range n.branches {
		if c, ok := b.child(name); ok {
			return c, true
		}
	}
	if n.additional != nil {
		return n.additional, true
	}
	return nil, false
}

// metaFields are the fields of an embedded resource that are its own.
var metaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// unknownField is a field of a value that its schema does not declare.
type unknownField struct {
	pointer string
	// suggestion is a declared sibling one or two edits away; empty when
	// none is.
	suggestion string
	// noFields is true when the object declares no field at all.
	noFields bool
}

// fieldWalk walks a value with its field tree. Its path is the way from
// the root to the value at hand, made into a JSON pointer only for what is
// reported: most values have nothing to report, and a pointer per field
// walked would cost more than the walk.
type fieldWalk struct {
	// root is the pointer of the value the walk starts from.
	root string
	path []pathStep
	// drop deletes the unknown fields it finds.
	drop    bool
	unknown []unknownField
	dups    []listIssue
}

// pathStep is an object's key, or a list's index when index >= 0.
type pathStep struct {
	key   string
	index int
}

func (w *fieldWalk) pointer(last pathStep) string {
	var b strings.Builder
	b.WriteString(w.root)
	for _, s := range append(w.path, last) {
		b.WriteByte('/')
		if s.index >= 0 {
			b.WriteString(strconv.Itoa(s.index))
		} else {
			b.WriteString(escapePointer(s.key))
		}
	}
	return b.String()
}

// undeclared finds the fields of v that n does not declare, in no
// particular order, and with w.drop deletes them from v.
func (w *fieldWalk) undeclared(n *fieldNode, v any) {
	if n == nil || n.free {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if !n.object {
			return
		}
		for k, val := range x {
			if n.embedded && metaFields[k] {
				continue
			}
			if c, ok := n.child(k); ok {
				if !c.free {
					w.path = append(w.path, pathStep{key: k, index: -1})
					w.undeclared(c, val)
					w.path = w.path[:len(w.path)-1]
				}
				continue
			}
			if n.preserve {
				continue
			}
			w.unknown = append(w.unknown, unknownField{pointer: w.pointer(pathStep{key: k, index: -1}),
				suggestion: suggest(k, n.names), noFields: len(n.names) == 0})
			if w.drop {
				delete(x, k)
			}
		}
	case []any:
		if !n.array {
			return
		}
		items := n.items
		for _, b := range n.branches {
			if !items.free {
				break
			}
			items = b.items
		}
		if items.free {
			return
		}
		for i, e := range x {
			w.path = append(w.path, pathStep{index: i})
			w.undeclared(items, e)
			w.path = w.path[:len(w.path)-1]
		}
	}
}

// problem places the field in d: at its own line, with a message that
// names its path, says what was done with it (done, when not empty), which
// declared field it may be a misspelling of, and ends with tail.
func (u unknownField) problem(d *Document, done, tail string) Problem {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown field %q", FieldPath(u.pointer))
	if done != "" {
		b.WriteString(" " + done)
	}
	switch {
	case u.suggestion != "":
		fmt.Fprintf(&b, ", did you mean %q?", u.suggestion)
	case u.noFields:
		b.WriteString(": the schema declares no fields here (x-kubernetes-preserve-unknown-fields: true accepts any)")
	}
	b.WriteString(tail)
	return Problem{File: d.File, Line: d.LineOf(u.pointer), Document: d.Index, Pointer: u.pointer, Message: b.String()}
}

// suggest returns the name of names closest to name, if it is one or two
// edits away (a letter added, removed, changed, or two swapped) and not as
// far as name is long; the first in order among equals.
func suggest(name string, names []string) string {
	best, bestDist := "", 3
	r := []rune(name)
	for _, cand := range names {
		d := editDistance(r, []rune(cand), bestDist)
		if d < bestDist && d < len(r) {
			best, bestDist = cand, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b (the
// Damerau–Levenshtein distance where no substring is edited twice), or
// limit when it is limit or more.
func editDistance(a, b []rune, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], limit)
}

// listIssue is an item of a list-type map or set that repeats an earlier one.
type listIssue struct {
	pointer string
	msg     string
}

// duplicates checks the lists below v that n declares as
// x-kubernetes-list-type map or set, as an API server does: a set may not
// hold an item twice (equal as JSON values), a map may not hold two items
// with the same values of its x-kubernetes-list-map-keys (absent keys
// being equal to each other, after defaults). Each value repeated is
// reported once, at its second item, as Kubernetes reports it.
func (w *fieldWalk) duplicates(n *fieldNode, v any) {
	if n == nil || n.free {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if !n.object || (len(n.props) == 0 && n.additional == nil && len(n.patterns) == 0 && len(n.branches) == 0) {
			return
		}
		for k, val := range x {
			if n.embedded && metaFields[k] {
				continue
			}
			if c, ok := n.child(k); ok && !c.free {
				w.path = append(w.path, pathStep{key: k, index: -1})
				w.duplicates(c, val)
				w.path = w.path[:len(w.path)-1]
			}
		}
	case []any:
		if !n.array {
			return
		}
		switch n.listType {
		case "set":
			w.duplicateItems(x, func(i int) any { return x[i] })
		case "map":
			w.duplicateKeys(n, x)
		}
		if !n.items.free {
			for i, e := range x {
				w.path = append(w.path, pathStep{index: i})
				w.duplicates(n.items, e)
				w.path = w.path[:len(w.path)-1]
			}
		}
	}
}

// duplicateKeys checks the items of a list-type map.
func (w *fieldWalk) duplicateKeys(n *fieldNode, x []any) {
	for i, e := range x {
		if _, ok := e.(map[string]any); e != nil && !ok {
			w.dups = append(w.dups, listIssue{w.pointer(pathStep{index: i}),
				"Invalid value: " + duplicateValue(e) + ": must be an object for an array of list-type map"})
			return
		}
	}
	if len(x) <= 1 || len(n.mapKeys) == 0 {
		return
	}
	keys := make([]map[string]any, len(x))
	for i, e := range x {
		item, _ := e.(map[string]any)
		key := map[string]any{}
		for _, k := range n.mapKeys {
			if v, ok := item[k]; ok {
				key[k] = v
			}
		}
		keys[i] = key
	}
	w.duplicateItems(x, func(i int) any { return keys[i] })
}

// duplicateItems reports, at its second item, each value of key(0) ...
// key(len(x)-1) that appears more than once.
func (w *fieldWalk) duplicateItems(x []any, key func(i int) any) {
	if len(x) <= 1 {
		return
	}
	seen := make(map[string]int, len(x))
	for i := range x {
		k := key(i)
		c, err := CanonicalJSON(k)
		if err != nil {
			continue // not JSON: the schema validation says why
		}
		seen[string(c)]++
		if seen[string(c)] == 2 {
			w.dups = append(w.dups, listIssue{w.pointer(pathStep{index: i}), "Duplicate value: " + duplicateValue(k)})
		}
	}
}

// duplicateValue writes a value as Kubernetes' field errors do: strings
// quoted, numbers and booleans as they are, the rest as JSON.
func duplicateValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// undeclaredFields finds the fields of a defaulted spec that the schema
// does not declare, sorted by pointer (pointers into the document: they
// start with /spec). In strict and prune modes they are deleted from spec,
// so that what is validated next is what a server would validate (strict
// refuses them anyway); in warn mode they stay.
func (c *compiledSchema) undeclaredFields(spec map[string]any, mode UnknownFields) []unknownField {
	if c == nil || c.fields == nil {
		return nil
	}
	w := fieldWalk{root: "/spec", drop: mode.orStrict() != UnknownFieldsWarn, path: make([]pathStep, 0, 8)}
	w.undeclared(c.fields, spec)
	sort.Slice(w.unknown, func(i, j int) bool { return w.unknown[i].pointer < w.unknown[j].pointer })
	return w.unknown
}

// listDuplicates finds the repeated items of the spec's list-type maps
// and sets, sorted by pointer (relative to the spec).
func (c *compiledSchema) listDuplicates(spec map[string]any) []listIssue {
	if c == nil || c.fields == nil || !c.lists {
		return nil
	}
	var w fieldWalk
	w.duplicates(c.fields, spec)
	sort.Slice(w.dups, func(i, j int) bool { return w.dups[i].pointer < w.dups[j].pointer })
	return w.dups
}
