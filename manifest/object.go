package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Object returns r as the document that declares it, with its spec as
// stored (defaults applied): what admission hooks are shown.
func (r *Resource) Object() (json.RawMessage, error) {
	meta := map[string]any{"name": r.Name}
	if r.Namespace != "" {
		meta["namespace"] = r.Namespace
	}
	if len(r.Labels) > 0 {
		meta["labels"] = r.Labels
	}
	if len(r.Annotations) > 0 {
		meta["annotations"] = r.Annotations
	}
	doc := map[string]any{"apiVersion": r.APIVersion(), "kind": r.Kind, "metadata": meta}
	if len(r.Spec) > 0 {
		doc["spec"] = r.Spec
	}
	if r.Action != "" {
		doc["action"] = r.Action
	}
	if len(r.PluginConfig) > 0 {
		doc["pluginConfig"] = r.PluginConfig
	}
	if len(r.DependsOn) > 0 {
		doc["dependsOn"] = r.DependsOn
	}
	return json.Marshal(doc)
}

// ParseResourceObject validates obj, a resource document as JSON, as if it
// were declared at origin: a document that a program changed, such as a
// mutating admission hook. Problems point at origin's document, whose
// lines obj no longer matches. lookup resolves kinds; unknown says what to
// do with fields the spec's schema does not declare, and the warnings
// returned say which were kept or dropped. A resource of a namespaced kind
// that names no namespace is placed in defaultNamespace (DefaultNamespace
// when empty).
func ParseResourceObject(obj json.RawMessage, origin Origin, lookup func(kind string) (*ResourceType, error), unknown UnknownFields, defaultNamespace string) (*Resource, []Problem, []Problem) {
	docs, ps := DecodeFile(origin.File, obj, DecodeOptions{})
	if len(ps) == 0 && len(docs) != 1 {
		ps = []Problem{{Message: fmt.Sprintf("one document expected, not %d", len(docs))}}
	}
	if len(ps) > 0 {
		for i := range ps {
			ps[i].File, ps[i].Line, ps[i].Document = origin.File, origin.Line, origin.Document
		}
		return nil, ps, nil
	}
	d := docs[0]
	d.File, d.Index, d.Line, d.root, d.lazy = origin.File, origin.Document, origin.Line, nil, nil
	if IsTypeDocument(d.Object) {
		return nil, []Problem{d.Problem("/kind", "a resource cannot become a type")}, nil
	}
	return parseResource(d, lookup, unknown, defaultNamespace)
}

// HasRules reports whether the type's version carries CEL rules
// (x-kubernetes-validations): only then can a change of a resource break
// one of them.
func (t *ResourceType) HasRules(version string) bool {
	v := t.Version(version)
	return v != nil && v.compiled != nil && v.compiled.rules != nil
}

// CheckTransition evaluates the CEL rules of r's type version on r's spec
// with old, the spec last accepted for r (canonical JSON), as oldSelf: the
// transition rules (immutability, allowed state changes) hold across
// changes. Problems are placed at r's document. A resource that moved to
// another version is not checked: its old spec follows another schema,
// and nothing converts it.
func (t *ResourceType) CheckTransition(r *Resource, oldVersion string, old json.RawMessage) []Problem {
	if oldVersion != r.Version || !t.HasRules(r.Version) || len(old) == 0 {
		return nil
	}
	decode := func(raw json.RawMessage) (any, error) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v)
	}
	spec, err := decode(r.Spec)
	if err == nil {
		var prev any
		if prev, err = decode(old); err == nil {
			var out []Problem
			for _, is := range t.Version(r.Version).compiled.checkRules(spec, prev) {
				out = append(out, problemAt(r.Origin, r.Origin.Line, "/spec"+is.pointer, is.msg))
			}
			return out
		}
	}
	return []Problem{problemAt(r.Origin, r.Origin.Line, "/spec", "cannot check the transition rules: "+err.Error())}
}

// PlaceProblems sets the line of each problem that names a field (a
// pointer) to that field's line in its file, one of files: problems found
// once the documents are gone, such as broken transition rules, carry the
// line of their document. A file is parsed again only when a problem
// names it; problems whose file is not among files keep their line.
func PlaceProblems(files []File, ps []Problem) {
	var (
		index map[string]int
		roots = map[string]*lazyRoots{}
	)
	for i := range ps {
		p := &ps[i]
		if p.Pointer == "" || p.File == "" {
			continue
		}
		if index == nil {
			index = make(map[string]int, len(files))
			for j, f := range files {
				index[f.Path] = j
			}
		}
		l, seen := roots[p.File]
		if !seen {
			if j, ok := index[p.File]; ok {
				l = &lazyRoots{data: bytes.TrimPrefix(files[j].Data, []byte(utf8BOM))}
			}
			roots[p.File] = l
		}
		if l == nil {
			continue
		}
		d := Document{File: p.File, Index: p.Document, Line: p.Line, lazy: l}
		p.Line = d.LineOf(p.Pointer)
	}
}
