package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	gosync "sync"
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
	var entries []*fileEntry
	for _, d := range docs {
		if len(entries) == 0 || entries[len(entries)-1].path != d.File {
			entries = append(entries, &fileEntry{path: d.File})
		}
		e := entries[len(entries)-1]
		e.docs = append(e.docs, d)
	}
	return validateEntries(entries, known)
}

// Validator validates successive snapshots of a tree of files. It remembers
// the previous snapshot's work, so that a file is decoded again only when its
// content changed, and its resources validated again only when it or one of
// the types they use changed. One Validator serves one source; it is safe for
// concurrent use but gains nothing from it.
type Validator struct {
	// Decode bounds the decoding of each file.
	Decode DecodeOptions

	mu    gosync.Mutex
	cache map[fileKey]*fileEntry
}

type fileKey struct{ path, hash string }

// fileEntry is what is known of one file's content.
type fileEntry struct {
	path     string
	docs     []*Document
	problems []Problem // decoding problems; when set, docs is empty

	typesParsed bool
	types       []parsedType

	// resources, resProblems and used are the file's resources as
	// validated against the types whose identities used records.
	resValid    bool
	resources   []*Resource
	resDocs     []*Document // the document of each resource, for duplicate errors
	resProblems []Problem
	used        map[string]string
}

type parsedType struct {
	doc      *Document
	name     string
	t        *ResourceType
	problems []Problem
}

// ValidateFiles decodes and validates files as Validate does, reusing the
// work of earlier calls where files and types are unchanged. Entries for
// files absent from this call are forgotten, so memory follows the tree.
func (v *Validator) ValidateFiles(files []File, known TypeResolver) (*Set, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	next := make(map[fileKey]*fileEntry, len(files))
	entries := make([]*fileEntry, 0, len(files))
	var decodeProblems problems
	for _, f := range files {
		k := fileKey{f.Path, f.Hash}
		e := v.cache[k]
		if e == nil {
			e = &fileEntry{path: f.Path}
			e.docs, e.problems = DecodeFile(f.Path, f.Data, v.Decode)
			if len(e.problems) > 0 {
				e.docs = nil
			}
		}
		next[k] = e
		decodeProblems = append(decodeProblems, e.problems...)
		entries = append(entries, e)
	}
	v.cache = next
	set, err := validateEntries(entries, known)
	if len(decodeProblems) == 0 {
		return set, err
	}
	var verr *ValidationError
	if errors.As(err, &verr) {
		decodeProblems = append(decodeProblems, verr.Problems...)
	}
	SortProblems(decodeProblems)
	return nil, decodeProblems.err()
}

// validateEntries is Validate over files, reusing what entries already know.
func validateEntries(entries []*fileEntry, known TypeResolver) (*Set, error) {
	var (
		errs     problems
		set      = &Set{}
		declared = map[string]*ResourceType{}
		broken   = map[string]Origin{}
		firstAt  = map[string]Origin{}
	)
	for _, e := range entries {
		if !e.typesParsed {
			e.typesParsed = true
			for _, d := range e.docs {
				if kind, _ := d.Object["kind"].(string); kind != KindResourceType {
					continue
				}
				name, _ := nestedString(d.Object, "metadata", "name")
				t, ps := parseType(d)
				e.types = append(e.types, parsedType{doc: d, name: name, t: t, problems: ps})
			}
		}
		for _, pt := range e.types {
			if first, dup := firstAt[pt.name]; dup && pt.name != "" {
				errs.add(pt.doc.Problem("/metadata/name", "duplicate ResourceType %s (first declared in %s)", pt.name, first.at()))
				continue
			}
			firstAt[pt.name] = pt.doc.Origin()
			errs = append(errs, pt.problems...)
			if pt.t == nil {
				broken[pt.name] = pt.doc.Origin()
				continue
			}
			declared[pt.t.Name] = pt.t
			set.Types = append(set.Types, pt.t)
		}
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
	// identity says which type a kind resolves to now; a file's cached
	// resources stay valid while every kind they used resolves the same.
	identity := func(kind string) string {
		t, err := lookup(kind)
		if err != nil {
			return "error: " + err.Error()
		}
		return t.Fingerprint()
	}
	seen := map[ObjectRef]Origin{}
	for _, e := range entries {
		if e.resValid {
			for kind, id := range e.used {
				if identity(kind) != id {
					e.resValid = false
					break
				}
			}
		}
		if !e.resValid {
			e.resources, e.resDocs, e.resProblems, e.used = nil, nil, nil, map[string]string{}
			for _, d := range e.docs {
				kind, _ := d.Object["kind"].(string)
				if kind == KindResourceType {
					continue
				}
				e.used[kind] = identity(kind)
				r, ps := parseResource(d, lookup)
				e.resProblems = append(e.resProblems, ps...)
				if r != nil {
					e.resources = append(e.resources, r)
					e.resDocs = append(e.resDocs, d)
				}
			}
			e.resValid = true
		}
		errs = append(errs, e.resProblems...)
		for i, r := range e.resources {
			if first, dup := seen[r.Ref()]; dup {
				errs.add(e.resDocs[i].Problem("/metadata/name", "duplicate resource %s (first declared in %s)", r.Ref(), first.at()))
				continue
			}
			seen[r.Ref()] = r.Origin
			set.Resources = append(set.Resources, r)
		}
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

// Fingerprint identifies everything about the type that affects its
// resources: group, default action and each version's schema.
func (t *ResourceType) Fingerprint() string {
	if t.fingerprint != "" {
		return t.fingerprint
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%s\x00%s", t.Name, t.Group, t.Action)
	for _, v := range t.Versions {
		fmt.Fprintf(&b, "\x00%s\x00%s", v.Name, v.Schema)
	}
	t.fingerprint = HashJSON([]byte(b.String()))
	return t.fingerprint
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
		return fmt.Sprintf("%s:%d", QuotePath(o.File), o.Line)
	}
	return QuotePath(o.File)
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
