package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	gosync "sync"
	"sync/atomic"
	"unique"
)

// Set is a validated set of manifests: every type compiled, every resource's
// spec defaulted, valid and hashed, no (kind, namespace, name) twice.
type Set struct {
	// Types are sorted by name.
	Types []*ResourceType
	// Resources are sorted by kind, then namespace, then name.
	Resources []*Resource
	// Warnings are about what the manifests hold that is ignored, such as
	// the metadata fields a server sets: at most one per file, sorted as
	// problems are. They refuse nothing.
	Warnings []Problem
	// UnknownFields are the fields of specs that their schemas do not
	// declare, accepted anyway: kept or dropped (see UnknownFields),
	// sorted like problems.
	UnknownFields []Problem

	// reassembled is set when Resources were made from a previous set.
	reassembled bool
}

// TypeResolver finds resource types that the documents themselves do not
// declare, such as those of other sources. It returns nil when it knows none.
type TypeResolver func(name string) *ResourceType

// Validate checks a set of documents as a whole: types first (declared in the
// documents, then from known), then every resource against its type.
// Duplicate types or resources are reported at every repeat, naming the first.
// Fields a spec's schema does not declare are refused (UnknownFieldsStrict).
// It returns a *ValidationError listing every problem, or the Set.
func Validate(docs []*Document, known TypeResolver) (*Set, error) {
	return ValidateWith(docs, known, UnknownFieldsStrict, DefaultNamespace)
}

// ValidateWith is Validate with unknown saying what to do with the fields
// of a spec that its schema does not declare, and defaultNamespace the
// namespace of resources of namespaced kinds that name none
// (DefaultNamespace when empty).
func ValidateWith(docs []*Document, known TypeResolver, unknown UnknownFields, defaultNamespace string) (*Set, error) {
	var entries []*fileEntry
	for _, d := range docs {
		if len(entries) == 0 || entries[len(entries)-1].path != d.File {
			entries = append(entries, &fileEntry{path: d.File, unknown: unknown.orStrict(), defaultNS: orDefault(defaultNamespace)})
		}
		e := entries[len(entries)-1]
		e.docs = append(e.docs, d)
	}
	for _, e := range entries {
		if ws := generatorWarning(e.docs); len(ws) > 0 {
			e.noted().warnings = ws
		}
	}
	return validateEntries(entries, known, 0)
}

// Validator validates successive snapshots of a tree of files. It remembers
// the previous snapshot's work, so that a file is decoded again only when its
// content changed, or when a type its resources use changed, and its
// resources validated again only in those cases. Between calls it keeps only
// what later calls need: each file's resources, types and problems, not its
// decoded documents. One Validator serves one source; calls are serialised,
// and each spreads its work over GOMAXPROCS goroutines.
type Validator struct {
	// Decode bounds the decoding of each file.
	Decode DecodeOptions
	// UnknownFields says what to do with the fields of a spec that its
	// schema does not declare; zero is UnknownFieldsStrict.
	UnknownFields UnknownFields
	// DefaultNamespace is the namespace of resources of namespaced kinds
	// that name none; empty is DefaultNamespace.
	DefaultNamespace string

	mu    gosync.Mutex
	cache map[fileKey]*fileEntry
	// order is the last call's entries in the order of its files: a call
	// whose files are those of the last one, in the same places, finds
	// its entries without hashing a path.
	order []*fileEntry
	// calls counts the calls; an entry's call is the last that used it.
	calls uint64
	// last is the last call's set of resources, when it gave one: the
	// next set is made from it by taking out and putting in only the
	// resources of the files that changed.
	last *assembly

	// kinds are the kinds the last call resolved, resolved first by the
	// next, so that its workers find them.
	kinds []string

	// workers, when positive, caps the goroutines of one call (1 is the
	// sequential path); zero means GOMAXPROCS.
	workers int
	// decoded, when set, is told of every file decoded; tests count with it.
	decoded func(path string)
	// reassembled counts the sets made from the last one; tests read it.
	reassembled int
}

type fileKey struct{ path, hash string }

// fileEntry is what is known of one file's content. Between calls it holds
// no decoded document: docs and data are set only during a call.
type fileEntry struct {
	path, hash string
	// call is the last call of the Validator that used the entry, pos its
	// place among that call's files.
	call uint64
	pos  int32
	// resValid is true while resources are current; typesParsed once
	// notes hold the file's types. (Beside pos, they fill its word.)
	resValid    bool
	typesParsed bool
	// inSet are the resources the entry gave the last set assembled.
	inSet []*Resource

	// docs are the file's decoded documents and data its content, while a
	// call needs them.
	docs []*Document
	data []byte

	// notes are the file's problems, warnings and types, when it has any:
	// most files have none, and a tree has thousands of entries.
	notes *fileNotes

	// resources and used are the file's resources as validated, with
	// unknown fields treated as unknown says, against the types whose
	// identities used records.
	resources []*Resource
	used      []typeUse
	unknown   UnknownFields
	// defaultNS is the namespace its resources of namespaced kinds that
	// name none were placed in.
	defaultNS string
}

// fileNotes is what few files have: problems and warnings, and the types
// they declare.
type fileNotes struct {
	problems []Problem // decoding problems; when set, the file has no documents
	warnings []Problem // what its documents hold that is ignored
	types    []parsedType
	// resProblems and resWarnings are those of its resources as validated.
	resProblems []Problem
	resWarnings []Problem
}

// noNotes is the notes of an entry that has none. It is never written.
var noNotes fileNotes

// note returns e's notes, to read.
func (e *fileEntry) note() *fileNotes {
	if e.notes == nil {
		return &noNotes
	}
	return e.notes
}

// noted returns e's notes, to write.
func (e *fileEntry) noted() *fileNotes {
	if e.notes == nil {
		e.notes = &fileNotes{}
	}
	return e.notes
}

// tidyNotes lets go of notes that hold nothing.
func (e *fileEntry) tidyNotes() {
	if n := e.notes; n != nil && len(n.problems)+len(n.warnings)+len(n.types)+len(n.resProblems)+len(n.resWarnings) == 0 {
		e.notes = nil
	}
}

// typeUse records which type a kind resolved to when a file's resources were
// validated.
type typeUse struct{ kind, identity string }

type parsedType struct {
	origin   Origin
	name     string
	t        *ResourceType
	problems []Problem
}

// ValidateFiles decodes and validates files as Validate does, reusing the
// work of earlier calls where files and types are unchanged. Entries for
// files absent from this call are forgotten, so memory follows the tree.
// Files are decoded and validated in parallel; the result does not depend on
// it.
func (v *Validator) ValidateFiles(files []File, known TypeResolver) (*Set, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls++
	if v.cache == nil {
		v.cache = make(map[fileKey]*fileEntry, len(files))
	}
	entries := make([]*fileEntry, len(files))
	var fresh []*fileEntry
	// Files are walked beside the last call's, in the same order: a file
	// in its place, unchanged, is found without hashing its path; one
	// found elsewhere resumes the walk after it. kept counts the entries
	// of the last call this one takes or replaces.
	j, kept := 0, 0
	for i, f := range files {
		var e *fileEntry
		if j < len(v.order) && v.order[j].path == f.Path {
			old := v.order[j]
			j++
			if old.hash == f.Hash {
				e = old
			} else {
				delete(v.cache, fileKey{old.path, old.hash})
				kept++
			}
		}
		if e == nil {
			k := fileKey{f.Path, f.Hash}
			if e = v.cache[k]; e == nil {
				e = &fileEntry{path: f.Path, hash: f.Hash}
				v.cache[k] = e
				fresh = append(fresh, e)
			} else if e.call != v.calls {
				j = int(e.pos) + 1
			}
		}
		if e.call != 0 && e.call == v.calls-1 {
			kept++
		}
		e.call, e.pos = v.calls, int32(i)
		if mode := v.UnknownFields.orStrict(); e.unknown != mode {
			e.unknown, e.resValid = mode, false
		}
		if ns := orDefault(v.DefaultNamespace); e.defaultNS != ns {
			e.defaultNS, e.resValid = ns, false
		}
		e.data = f.Data
		entries[i] = e
	}
	if kept != len(v.order) {
		// Entries of files this call does not have are forgotten.
		for k, e := range v.cache {
			if e.call != v.calls {
				delete(v.cache, k)
			}
		}
	}
	v.order = entries
	defer func() {
		for _, e := range entries {
			e.data, e.docs = nil, nil
		}
	}()
	// Only the files that may declare types are decoded before the types
	// are known. The others are decoded and validated in one go by the
	// workers, which drop their documents at once: the documents of the
	// whole tree are never all held together.
	var typeFiles []*fileEntry
	for _, e := range fresh {
		if mayDeclareTypes(e.data) {
			typeFiles = append(typeFiles, e)
		} else {
			e.typesParsed = true
		}
	}
	parallel(v.workers, len(typeFiles), func(i int) {
		v.decode(typeFiles[i])
		typeFiles[i].parseTypes()
	})
	a := v.last
	v.last = nil // until this call gives a set
	set, err := validateEntriesWith(entries, known, v.workers, v.decode, &v.kinds, a, v.calls)
	if err == nil {
		if set.reassembled {
			v.reassembled++
		}
		v.last = &assembly{sorted: set.Resources, entries: entries}
		set.Resources = slices.Clone(set.Resources)
	}
	return set, err
}

// orDefault returns ns, or DefaultNamespace when it is empty.
func orDefault(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// mayDeclareTypes reports whether data may hold a ResourceType document: a
// document's kind is written out in it, unless escaped in a double-quoted
// string.
func mayDeclareTypes(data []byte) bool {
	return bytes.Contains(data, []byte(KindResourceType)) || bytes.Contains(data, []byte(KindCRD)) ||
		bytes.IndexByte(data, '\\') >= 0
}

// decode decodes e's data into its documents, or its problems.
func (v *Validator) decode(e *fileEntry) {
	if v.decoded != nil {
		v.decoded(e.path)
	}
	docs, problems := DecodeFile(e.path, e.data, v.Decode)
	if len(problems) > 0 {
		docs = nil
	}
	e.docs = docs
	warnings := generatorWarning(docs)
	if e.notes != nil || len(problems)+len(warnings) > 0 {
		n := e.noted()
		n.problems, n.warnings = problems, warnings
		e.tidyNotes()
	}
}

// validateEntries is Validate over files, reusing what entries already know.
func validateEntries(entries []*fileEntry, known TypeResolver, workers int) (*Set, error) {
	return validateEntriesWith(entries, known, workers, nil, nil, nil, 0)
}

// parseTypes parses the ResourceType documents of e, once.
func (e *fileEntry) parseTypes() {
	if e.typesParsed {
		return
	}
	e.typesParsed = true
	for _, d := range e.docs {
		if !IsTypeDocument(d.Object) {
			continue
		}
		name := typeDocumentName(d.Object)
		t, ps := parseTypeDocument(d)
		n := e.noted()
		n.types = append(n.types, parsedType{origin: d.Origin(), name: strings.Clone(name), t: t, problems: ps})
	}
}

// resolution is what a kind resolves to in one call.
type resolution struct {
	t        *ResourceType
	err      error
	identity string
}

// validateEntriesWith validates entries in order: the types they declare,
// then their resources, reusing each entry's resources while the types they
// used resolve the same. Entries whose resources must be validated but that
// have no documents are decoded with decode (new files, and files whose
// documents were dropped after an earlier call). Decoding and validating
// resources runs on up to workers goroutines; everything that depends on the
// order of files runs in order, so the result is the same for any number of
// workers. kinds, when set, holds the kinds to resolve before the workers
// start, and is set to those resolved. last, when set, is the set of the
// previous call (call numbers the entries of this one): the resources are
// assembled from it when few files changed.
func validateEntriesWith(entries []*fileEntry, known TypeResolver, workers int, decode func(*fileEntry), kinds *[]string, last *assembly, call uint64) (*Set, error) {
	var (
		errs     problems
		set      = &Set{}
		declared = map[string]*ResourceType{}
		broken   = map[string]Origin{}
		firstAt  = map[string]Origin{}
		roots    = map[*fileEntry]*lazyRoots{}
	)
	// lineOf finds the line of a field of a document of e, for the
	// duplicate errors, which name the line of metadata.name: in the
	// documents while the call has them, else in the file's content,
	// parsed again (duplicates are rare; keeping every line would not be).
	lineOf := func(e *fileEntry, o Origin, pointer string) int {
		for _, d := range e.docs {
			if d.Index == o.Document {
				return d.LineOf(pointer)
			}
		}
		if e.data == nil {
			return o.Line
		}
		l := roots[e]
		if l == nil {
			l = &lazyRoots{data: bytes.TrimPrefix(e.data, []byte(utf8BOM))}
			roots[e] = l
		}
		d := Document{File: e.path, Index: o.Document, Line: o.Line, lazy: l}
		return d.LineOf(pointer)
	}
	for _, e := range entries {
		e.parseTypes()
		for _, pt := range e.note().types {
			if first, dup := firstAt[pt.name]; dup && pt.name != "" {
				errs.add(problemAt(pt.origin, lineOf(e, pt.origin, "/metadata/name"), "/metadata/name", fmt.Sprintf("duplicate ResourceType %s (first declared in %s)", pt.name, first.at())))
				continue
			}
			firstAt[pt.name] = pt.origin
			errs = append(errs, pt.problems...)
			if pt.t == nil {
				broken[pt.name] = pt.origin
				continue
			}
			declared[pt.t.Name] = pt.t
			set.Types = append(set.Types, pt.t)
		}
	}
	// Kinds are resolved here, in order, and not by the workers: known may
	// not be safe for concurrent use, and Fingerprint caches in the type.
	resolved := map[string]resolution{}
	resolve := func(kind string) resolution {
		if r, ok := resolved[kind]; ok {
			return r
		}
		var r resolution
		if t := declared[kind]; t != nil {
			r.t = t
		} else if o, ok := broken[kind]; ok {
			r.err = fmt.Errorf("cannot validate: ResourceType %s (%s) is invalid", kind, o.at())
		} else {
			if known != nil {
				r.t = known(kind)
			}
			if r.t == nil {
				r.err = fmt.Errorf("unknown kind %q: no ResourceType declares it", kind)
			}
		}
		if r.err != nil {
			r.identity = "error: " + r.err.Error()
		} else {
			r.identity = r.t.Fingerprint()
		}
		resolved[kind] = r
		return r
	}
	for name := range declared {
		resolve(name)
	}
	for name := range broken {
		resolve(name)
	}
	if kinds != nil {
		for _, kind := range *kinds {
			resolve(kind)
		}
	}
	// A file's cached resources stay valid while every kind they used
	// resolves to the same type.
	var stale []*fileEntry
	queued := map[*fileEntry]bool{}
	// A tree has a few kinds and many files: the identities of the kinds
	// met are kept in a short list, looked through before the map.
	type kindIdentity struct{ kind, identity string }
	var met []kindIdentity
	identityOf := func(kind string) string {
		for _, m := range met {
			if m.kind == kind {
				return m.identity
			}
		}
		id := resolve(kind).identity
		if len(met) < 16 {
			met = append(met, kindIdentity{kind, id})
		}
		return id
	}
	for _, e := range entries {
		if e.resValid {
			for _, u := range e.used {
				if identityOf(u.kind) != u.identity {
					e.resValid = false
					break
				}
			}
		}
		if e.resValid || queued[e] {
			continue
		}
		queued[e] = true
		stale = append(stale, e)
	}
	lookup := func(kind string) (*ResourceType, error) {
		r := resolved[kind]
		return r.t, r.err
	}
	// validate validates e's resources if every kind they use is resolved,
	// and returns the kinds that are not. The workers only read resolved.
	validate := func(e *fileEntry) (missing []string) {
		if e.docs == nil && len(e.note().problems) == 0 && e.data != nil && decode != nil {
			decode(e)
		}
		e.used = e.used[:0]
		use := func(kind string) {
			if slicesContainsKind(e.used, kind) || slices.Contains(missing, kind) {
				return
			}
			r, ok := resolved[kind]
			if !ok {
				missing = append(missing, kind)
				return
			}
			// Thousands of files name the same few kinds: each is held once.
			e.used = append(e.used, typeUse{unique.Make(kind).Value(), r.identity})
		}
		for _, d := range e.docs {
			if IsTypeDocument(d.Object) {
				continue
			}
			kind, _ := d.Object["kind"].(string)
			use(kind)
			// The scope of a dependency's kind says its namespace.
			deps, _ := d.Object["dependsOn"].([]any)
			for _, dep := range deps {
				m, _ := dep.(map[string]any)
				if k, _ := m["kind"].(string); ValidKindName(k) {
					use(k)
				}
			}
		}
		if len(missing) > 0 {
			return missing
		}
		e.parseResources(lookup)
		if e.data != nil {
			// Decoded from data, which this call holds for the rare
			// lines a problem needs.
			e.docs = nil
		}
		return nil
	}
	missing := make([][]string, len(stale))
	parallel(workers, len(stale), func(i int) { missing[i] = validate(stale[i]) })
	// Kinds nothing resolved yet (known's, on a first call) are resolved
	// here, in order, and their files validated.
	var waiting []*fileEntry
	for i, ks := range missing {
		for _, kind := range ks {
			resolve(kind)
		}
		if ks != nil {
			waiting = append(waiting, stale[i])
		}
	}
	parallel(workers, len(waiting), func(i int) { validate(waiting[i]) })
	if kinds != nil {
		*kinds = slices.Collect(maps.Keys(resolved))
	}
	sort.Slice(set.Types, func(i, j int) bool { return set.Types[i].Name < set.Types[j].Name })
	for _, e := range entries {
		set.Warnings = append(set.Warnings, e.note().warnings...)
		set.UnknownFields = append(set.UnknownFields, e.note().resWarnings...)
	}
	SortProblems(set.Warnings)
	SortProblems(set.UnknownFields)
	if last != nil && len(errs) == 0 && !hasProblems(entries) {
		if rs, ok := last.next(entries, call); ok {
			set.Resources, set.reassembled = rs, true
			return set, nil
		}
	}
	n := 0
	for _, e := range entries {
		n += len(e.resources)
	}
	seen := make(map[ObjectRef]Origin, n)
	set.Resources = make([]*Resource, 0, n)
	for _, e := range entries {
		errs = append(errs, e.note().problems...)
		errs = append(errs, e.note().resProblems...)
		for _, r := range e.resources {
			if first, dup := seen[r.Ref()]; dup {
				errs.add(problemAt(r.Origin, lineOf(e, r.Origin, "/metadata/name"), "/metadata/name", fmt.Sprintf("duplicate resource %s (first declared in %s)", r.Ref(), first.at())))
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
	slices.SortFunc(set.Resources, compareRefs)
	for _, e := range entries {
		e.inSet = e.resources
	}
	return set, nil
}

// compareRefs orders resources by kind, then namespace, then name: the
// order of a Set.
func compareRefs(a, b *Resource) int { return CompareResources(a, b) }

// CompareResources orders resources by kind, then namespace, then name
// (see ObjectRef.Compare): the order of a Set's resources.
func CompareResources(a, b *Resource) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// hasProblems reports whether any entry has a problem.
func hasProblems(entries []*fileEntry) bool {
	for _, e := range entries {
		if len(e.note().problems) > 0 || len(e.note().resProblems) > 0 {
			return true
		}
	}
	return false
}

// assembly is the resources of a call that gave a set, in the set's order,
// and the entries that gave them.
type assembly struct {
	sorted  []*Resource
	entries []*fileEntry
}

// next assembles the resources of entries (those of call) from a: the
// resources of entries gone or changed since are taken out, those of
// entries new or changed put in, and the order kept. It reports false when
// that is not worth it (most files changed) or when a name is declared
// twice, which the whole assembly reports with where each was declared
// first.
func (a *assembly) next(entries []*fileEntry, call uint64) ([]*Resource, bool) {
	var (
		out, in []*Resource
		changed []*fileEntry
		limit   = len(a.sorted)/4 + 16
	)
	for _, e := range a.entries {
		if e.call != call {
			out = append(out, e.inSet...)
			if len(out) > limit {
				return nil, false
			}
		}
	}
	for _, e := range entries {
		if sameResources(e.inSet, e.resources) {
			continue
		}
		out = append(out, e.inSet...)
		in = append(in, e.resources...)
		changed = append(changed, e)
		if len(out)+len(in) > limit {
			return nil, false
		}
	}
	// Where each resource taken out is, and where each put in goes, are
	// found by binary search; the resources between are copied as they
	// are, without being looked at.
	drop := make([]int, 0, len(out))
	for _, r := range out {
		i, ok := slices.BinarySearchFunc(a.sorted, r, compareRefs)
		if !ok || a.sorted[i] != r {
			return nil, false
		}
		drop = append(drop, i)
	}
	slices.Sort(drop)
	slices.SortFunc(in, compareRefs)
	at := make([]int, len(in))
	for k, r := range in {
		if k > 0 && compareRefs(in[k-1], r) == 0 {
			return nil, false // declared twice among the new ones
		}
		i, found := slices.BinarySearchFunc(a.sorted, r, compareRefs)
		if found {
			if _, dropped := slices.BinarySearch(drop, i); !dropped {
				return nil, false // declared twice: a new one and a kept one
			}
		}
		at[k] = i
	}
	rs := make([]*Resource, 0, len(a.sorted)-len(drop)+len(in))
	from, d, k := 0, 0, 0
	for d < len(drop) || k < len(at) {
		// The next event: a resource put in before index at[k], or the
		// one at drop[d] taken out; an insertion goes first at the same
		// index.
		if k < len(at) && (d == len(drop) || at[k] <= drop[d]) {
			rs = append(rs, a.sorted[from:at[k]]...)
			from = at[k]
			rs = append(rs, in[k])
			k++
			continue
		}
		rs = append(rs, a.sorted[from:drop[d]]...)
		from = drop[d] + 1
		d++
	}
	rs = append(rs, a.sorted[from:]...)
	for _, e := range changed {
		e.inSet = e.resources
	}
	return rs, true
}

// sameResources reports whether a and b are the same slice.
func sameResources(a, b []*Resource) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func slicesContainsKind(used []typeUse, kind string) bool {
	for _, u := range used {
		if u.kind == kind {
			return true
		}
	}
	return false
}

// parseResources validates the resource documents of e against the types
// lookup resolves. It touches nothing but e, so entries can be parsed in
// parallel.
func (e *fileEntry) parseResources(lookup func(kind string) (*ResourceType, error)) {
	e.resources = nil
	if e.notes != nil {
		e.notes.resProblems, e.notes.resWarnings = nil, nil
	}
	for _, d := range e.docs {
		if IsTypeDocument(d.Object) {
			continue
		}
		r, ps, ws := parseResource(d, lookup, e.unknown, e.defaultNS)
		if len(ps)+len(ws) > 0 {
			n := e.noted()
			n.resProblems = append(n.resProblems, ps...)
			n.resWarnings = append(n.resWarnings, ws...)
		}
		if r != nil {
			e.resources = append(e.resources, r)
		}
	}
	e.tidyNotes()
	e.resValid = true
}

// problemAt is Document.Problem for a document that is no longer at hand:
// its origin and the line the pointer resolved to.
func problemAt(o Origin, line int, pointer, msg string) Problem {
	return Problem{File: o.File, Line: line, Document: o.Document, Pointer: pointer, Message: FieldPath(pointer) + ": " + msg}
}

// parallel calls f(0) ... f(n-1) on up to workers goroutines (GOMAXPROCS
// when workers is zero) and returns when every call has.
func parallel(workers, n int, f func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var (
		next atomic.Int64
		wg   gosync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// Fingerprint identifies everything about the type that affects its
// resources: group, default action, scope, name format and each version's
// schema.
func (t *ResourceType) Fingerprint() string {
	if t.fingerprint != "" {
		return t.fingerprint
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%s\x00%s", t.Name, t.Group, t.Action)
	if t.NameFormat == NameLabel {
		// Only when not the default: the fingerprints of other types stay.
		b.WriteString("\x00name:label")
	}
	if !t.Namespaced() {
		// Likewise.
		b.WriteString("\x00scope:cluster")
	}
	for _, v := range t.Versions {
		fmt.Fprintf(&b, "\x00%s\x00%s\x00%t", v.Name, v.Schema, v.Deprecated)
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
