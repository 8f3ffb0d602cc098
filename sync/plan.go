package sync

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
)

// Action is what a plan does to one resource or type.
type Action string

// The actions of a plan.
const (
	Create Action = "create"
	// Update is a new generation: the spec or the action binding changed.
	Update Action = "update"
	// Delete marks the resource for destruction by its action.
	Delete Action = "delete"
	// Forget removes the resource from the store without destroying it
	// (pruning disabled for the source, or no8s.io/prune: disabled).
	Forget Action = "forget"
)

// Change is one planned change to a resource.
type Change struct {
	Action    Action            `json:"action"`
	Kind      string            `json:"kind"`
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name"`
	File      string            `json:"file,omitempty"`
	Line      int               `json:"line,omitempty"`
	ID        int64             `json:"id,omitempty"`
	Before    json.RawMessage   `json:"before,omitempty"`
	After     json.RawMessage   `json:"after,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Generation is the generation after the change (creates and updates).
	Generation int64 `json:"generation,omitempty"`
	// Instance is the action instance the resource is bound to (creates
	// and updates), which a preview asks for a plan.
	Instance string `json:"instance,omitempty"`
	// PluginConfig is the resource's plugin configuration after the change.
	PluginConfig json.RawMessage `json:"pluginConfig,omitempty"`
}

// Ref returns the resource the change is about.
func (c Change) Ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

// TypeChange is one planned change to a resource type version.
type TypeChange struct {
	Action  Action `json:"action"`
	Name    string `json:"name"`
	Version string `json:"version"`
	File    string `json:"file,omitempty"`
}

// Plan is the difference between a snapshot and what the store holds for
// its source.
type Plan struct {
	Source   string            `json:"source"`
	Revision manifest.Revision `json:"revision"`
	Creates  []Change          `json:"creates"`
	Updates  []Change          `json:"updates"`
	Deletes  []Change          `json:"deletes"`
	Forgets  []Change          `json:"forgets"`
	// Unchanged counts resources whose spec and action stay; their labels,
	// annotations or location may still be refreshed.
	Unchanged int          `json:"unchanged"`
	Types     []TypeChange `json:"types"`
	// Owned is how many resources the source owned before the plan.
	Owned int `json:"owned"`

	// writes are the resources to create, update, or refresh (unchanged
	// spec and action, changed metadata: written without a new generation).
	writes []*manifest.Resource
	// types to write, and type rows to remove.
	putTypes    []*store.ResourceType
	removeTypes []TypeChange
	// storedScopes are the scopes the store holds of the types, by name
	// (none for those stored before types had one); typeOrigins where the
	// set declares each.
	storedScopes map[string]manifest.Scope
	typeOrigins  map[string]manifest.Origin
	deleteIDs    []int64
	forgetIDs    []int64
	// basis fingerprints the stored state the plan was made from (see
	// stateBasis; an API write's is its object and the stamp of its one
	// resource): an admission review of the plan holds while the basis
	// stays the same.
	basis string
	// owned are the digests of the source's resources the plan was made
	// from, fingerprinted into basis only when it is needed.
	owned []store.ResourceDigest
	// applied is what the store did to each of writes, once applied, and
	// recorded the source's state as the sync wrote it.
	applied  []store.Applied
	recorded *store.Source
	// kept are the declared resources the source owns once the plan is
	// applied; keepsDeleting is true when it also keeps a resource being
	// deleted.
	kept          []keptResource
	keepsDeleting bool

	// Warnings are about what the revision uses that it should not for
	// long (deprecated type versions), what its files hold that is
	// ignored (the metadata fields a server sets) and fields the schemas do
	// not declare (kept or dropped, as the source's unknownFields says).
	Warnings []string `json:"warnings,omitempty"`
}

// Changes counts the resources the plan creates, updates, deletes or forgets.
func (p *Plan) Changes() int {
	return len(p.Creates) + len(p.Updates) + len(p.Deletes) + len(p.Forgets)
}

// Summary is one line for status messages and logs.
func (p *Plan) Summary() string {
	s := fmt.Sprintf("%d created, %d updated, %d deleted, %d forgotten, %d unchanged",
		len(p.Creates), len(p.Updates), len(p.Deletes), len(p.Forgets), p.Unchanged)
	if len(p.Types) > 0 {
		s += fmt.Sprintf("; %d resource type version(s) changed", len(p.Types))
	}
	for _, w := range p.Warnings {
		s += "; warning: " + w
	}
	return s
}

// manifestWarnings returns the set's warnings (what its files hold that is
// ignored), each as "file:line: message", the way problems are shown.
func manifestWarnings(set *manifest.Set) []string {
	var out []string
	for _, w := range set.Warnings {
		out = append(out, w.String())
	}
	return out
}

// deprecations returns a warning for each deprecated type version the
// set's resources use, with how many resources use it once the change is
// made, in every source: the versions are the set's own types' and, for
// kinds the set does not declare, the store's. When written, the set's
// resources are already in st (an API write, inside its transaction) and
// the store's users are all; otherwise the set replaces the resources of
// the source owner, and its users count with the other sources'. A
// resource being destroyed uses nothing any more.
func deprecations(ctx context.Context, st store.Store, set *manifest.Set, owner string, written bool) ([]string, error) {
	type key struct{ kind, version string }
	used := map[key]int{}
	// Resources come in runs of one kind, mostly of one version: counted
	// per run, not hashed one by one.
	var run key
	n := 0
	for _, r := range set.Resources {
		if r.Kind != run.kind || r.Version != run.version {
			if n > 0 {
				used[run] += n
			}
			run, n = key{r.Kind, r.Version}, 0
		}
		n++
	}
	if n > 0 {
		used[run] += n
	}
	if len(used) == 0 {
		return nil, nil
	}
	deprecated := map[key]bool{}
	own := map[string]bool{}
	for _, t := range set.Types {
		own[t.Name] = true
		for _, v := range t.Versions {
			deprecated[key{t.Name, v.Name}] = v.Deprecated
		}
	}
	for k := range used {
		if !own[k.kind] {
			rows, err := st.ListResourceTypes(ctx, store.TypeFilter{})
			if err != nil {
				return nil, fmt.Errorf("list resource types: %w", err)
			}
			for _, r := range rows {
				if !own[r.Name] {
					deprecated[key{r.Name, r.Version}] = r.Deprecated
				}
			}
			break
		}
	}
	var out []string
	for k, n := range used {
		if !deprecated[k] {
			continue
		}
		// The store is read only for versions that are deprecated, which
		// few resources should still use.
		rows, err := st.ListResources(ctx, store.ResourceFilter{Kind: k.kind})
		if err != nil {
			return nil, fmt.Errorf("list resources of %s: %w", k.kind, err)
		}
		if written {
			n = 0
		}
		for _, r := range rows {
			if r.Version == k.version && r.DeletionRequestedAt == nil && (written || r.Source.Name != owner) {
				n++
			}
		}
		out = append(out, fmt.Sprintf("resource type %s version %s is deprecated (used by %d resource(s)): move them to another version", k.kind, k.version, n))
	}
	sort.Strings(out)
	return out, nil
}

// unknownFieldsWarning sums up, in one warning, the fields that schemas do
// not declare and that a sync under mode keeps or drops: each is named with
// its file and line, up to a few.
func unknownFieldsWarning(mode manifest.UnknownFields, fields []manifest.Problem) []string {
	if len(fields) == 0 {
		return nil
	}
	const shown = 5
	var b strings.Builder
	fmt.Fprintf(&b, "%d field(s) the schemas do not declare (unknownFields: %s): ", len(fields), mode)
	for i, f := range fields[:min(shown, len(fields))] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	if len(fields) > shown {
		fmt.Fprintf(&b, "; and %d more", len(fields)-shown)
	}
	return []string{b.String()}
}

// makePlan diffs the validated set against the store's state for the source,
// and applies the guards: ownership, types still in use, prune limits.
// owned, when not nil, are the digests of the source's resources as the
// store holds them (ownedCache); otherwise they are read from st.
func makePlan(ctx context.Context, st store.Store, t Target, snap *source.Snapshot, set *manifest.Set, cur *store.Source, preview bool, owned []store.ResourceDigest) (*Plan, error) {
	p := &Plan{Source: t.Name, Revision: snap.Revision}
	warnings, err := deprecations(ctx, st, set, t.Name, false)
	if err != nil {
		return nil, err
	}
	p.Warnings = append(manifestWarnings(set), warnings...)
	p.Warnings = append(p.Warnings, unknownFieldsWarning(t.UnknownFields, set.UnknownFields)...)
	if owned == nil {
		if owned, err = st.ListResourceDigests(ctx, t.Name); err != nil {
			return nil, fmt.Errorf("list resources of %s: %w", t.Name, err)
		}
	}
	if owned, err = adoptScopes(ctx, st, set, owned); err != nil {
		return nil, err
	}
	p.Owned = len(owned)
	p.owned = owned
	p.kept = make([]keptResource, 0, len(set.Resources))
	// declared marks the rows the snapshot still declares, stored the row
	// of each declared resource.
	declared := make([]bool, len(owned))
	stored := make([]*store.ResourceDigest, len(set.Resources))
	matchStored(set.Resources, owned, stored, declared)

	// Resources declared here but owned elsewhere are conflicts, not takeovers.
	var fresh []manifest.ObjectRef
	for i, r := range set.Resources {
		if stored[i] == nil {
			fresh = append(fresh, r.Ref())
		}
	}
	owners, err := st.Owners(ctx, fresh)
	if err != nil {
		return nil, err
	}
	var conflicts []manifest.Problem
	for i, r := range set.Resources {
		o := stored[i]
		switch {
		case o == nil:
			if owner, taken := owners[r.Ref()]; taken {
				hint, err := retiredHint(ctx, st, owner.Name)
				if err != nil {
					return nil, err
				}
				conflicts = append(conflicts, conflictProblem(r, owner, hint))
				continue
			}
			p.Creates = append(p.Creates, Change{Action: Create, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, File: r.Origin.File,
				Line: r.Origin.Line, After: r.Spec, Labels: r.Labels, Generation: 1, Instance: r.Action, PluginConfig: r.PluginConfig})
			p.kept = append(p.kept, keptResource{r: r, write: len(p.writes)})
			p.writes = append(p.writes, r)
		case o.SpecHash != r.SpecHash || o.Action != r.Action || o.Deleting:
			p.Updates = append(p.Updates, Change{Action: Update, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, File: r.Origin.File,
				Line: r.Origin.Line, ID: o.ID, After: r.Spec, Labels: r.Labels, Generation: o.Generation + 1, Instance: r.Action,
				PluginConfig: r.PluginConfig})
			p.kept = append(p.kept, keptResource{r: r, write: len(p.writes)})
			p.writes = append(p.writes, r)
		default:
			p.Unchanged++
			if o.MetaHash != r.MetaHash() {
				p.kept = append(p.kept, keptResource{r: r, write: len(p.writes)})
				p.writes = append(p.writes, r)
				continue
			}
			// Same spec, action and metadata (which covers the file it is
			// declared in and its annotations): the row's digest is r's.
			p.kept = append(p.kept, keptResource{r: r, write: -1, id: o.ID, gen: o.Generation})
		}
	}
	for i, o := range owned {
		if declared[i] {
			continue
		}
		if o.Deleting {
			p.keepsDeleting = true
			continue
		}
		c := Change{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, File: o.Path, ID: o.ID}
		if !t.Prune.Enabled || o.PruneDisabled {
			c.Action = Forget
			p.Forgets = append(p.Forgets, c)
			p.forgetIDs = append(p.forgetIDs, o.ID)
			continue
		}
		c.Action = Delete
		p.Deletes = append(p.Deletes, c)
		p.deleteIDs = append(p.deleteIDs, o.ID)
	}
	// In the order of the rows, whatever order owned came in.
	byID := func(a, b Change) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(p.Deletes, byID)
	slices.SortFunc(p.Forgets, byID)
	slices.Sort(p.deleteIDs)
	slices.Sort(p.forgetIDs)
	if preview {
		if err := loadBefore(ctx, st, p); err != nil {
			return nil, err
		}
	}

	typeConflicts, err := planTypes(ctx, st, t, snap, set, p)
	if err != nil {
		return nil, err
	}
	if err := checkScopes(ctx, st, p, snap.Files); err != nil {
		return p, err
	}
	conflicts = append(conflicts, typeConflicts...)
	if len(conflicts) > 0 {
		manifest.SortProblems(conflicts)
		return p, &Error{Reason: ReasonConflict, Problems: conflicts,
			Message: fmt.Sprintf("%d declaration(s) collide with other sources; first: %s", len(conflicts), conflicts[0])}
	}
	if err := checkTypesInUse(ctx, st, p); err != nil {
		return p, err
	}
	return p, pruneGuard(t, snap, set, cur, p)
}

// adoptScopes returns owned as the plan's apply leaves it when the set
// declares cluster-scoped a type stored before types had a scope: writing
// the type takes the namespace away from its resources (see
// store.Store.PutResourceType), so they are matched without one, and
// neither destroyed nor created again. owned is not changed (it may be
// cached); a copy is returned when anything differs.
func adoptScopes(ctx context.Context, st store.Store, set *manifest.Set, owned []store.ResourceDigest) ([]store.ResourceDigest, error) {
	var cluster []string
	for _, t := range set.Types {
		if !t.Namespaced() {
			cluster = append(cluster, t.Name)
		}
	}
	if len(cluster) == 0 {
		return owned, nil
	}
	legacy := map[string]bool{}
	for _, name := range cluster {
		rows, err := st.ListResourceTypes(ctx, store.TypeFilter{Name: name})
		if err != nil {
			return nil, fmt.Errorf("list resource types: %w", err)
		}
		for _, r := range rows {
			if r.Scope == "" {
				legacy[name] = true
			}
		}
	}
	if len(legacy) == 0 {
		return owned, nil
	}
	out := slices.Clone(owned)
	for i := range out {
		if legacy[out[i].Kind] {
			out[i].Namespace = ""
		}
	}
	return out, nil
}

// matchStored finds the stored row of each declared resource: stored[i] is
// the row of resources[i], and declared[j] tells whether owned[j] is
// declared. Both sides in (kind, namespace, name) order, as a Set's
// resources and the owned cache are, are walked side by side; otherwise
// they are matched through a map.
func matchStored(resources []*manifest.Resource, owned []store.ResourceDigest, stored []*store.ResourceDigest, declared []bool) {
	if !slices.IsSortedFunc(resources, manifest.CompareResources) {
		byRef := make(map[manifest.ObjectRef]int, len(owned))
		for i := range owned {
			byRef[owned[i].Ref()] = i
		}
		for i, r := range resources {
			if j, ok := byRef[r.Ref()]; ok {
				stored[i], declared[j] = &owned[j], true
			}
		}
		return
	}
	compare := func(o *store.ResourceDigest, r *manifest.Resource) int {
		if c := strings.Compare(o.Kind, r.Kind); c != 0 {
			return c
		}
		if c := strings.Compare(o.Namespace, r.Namespace); c != 0 {
			return c
		}
		return strings.Compare(o.Name, r.Name)
	}
	order := make([]int, len(owned))
	for j := range order {
		order[j] = j
	}
	// The owned cache keeps the set's order; rows read from the store come
	// in id order, and are sorted here.
	if !slices.IsSortedFunc(owned, compareDigests) {
		slices.SortFunc(order, func(a, b int) int { return compareDigests(owned[a], owned[b]) })
	}
	j := 0
	for i, r := range resources {
		for j < len(order) && compare(&owned[order[j]], r) < 0 {
			j++
		}
		if j < len(order) && compare(&owned[order[j]], r) == 0 {
			stored[i], declared[order[j]] = &owned[order[j]], true
			j++
		}
	}
}

// compareDigests orders digests by kind, then namespace, then name.
func compareDigests(a, b store.ResourceDigest) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// loadBefore fills in the stored spec and labels of updated, deleted and
// forgotten resources, for previews to show what changes.
func loadBefore(ctx context.Context, st store.Store, p *Plan) error {
	ids := []int64{}
	for _, group := range [][]Change{p.Updates, p.Deletes, p.Forgets} {
		for _, c := range group {
			ids = append(ids, c.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := st.ListResources(ctx, store.ResourceFilter{IDs: ids})
	if err != nil {
		return fmt.Errorf("read the resources a plan changes: %w", err)
	}
	byID := make(map[int64]*store.Resource, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, group := range [][]Change{p.Updates, p.Deletes, p.Forgets} {
		for i := range group {
			if r := byID[group[i].ID]; r != nil {
				group[i].Before = r.Spec
				if group[i].Labels == nil {
					group[i].Labels = r.Labels
				}
			}
		}
	}
	return nil
}

// planTypes plans the type rows and returns conflicts with types other
// sources own.
func planTypes(ctx context.Context, st store.Store, t Target, snap *source.Snapshot, set *manifest.Set, p *Plan) ([]manifest.Problem, error) {
	rows, err := st.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		return nil, fmt.Errorf("list resource types: %w", err)
	}
	type key struct{ name, version string }
	mine := map[key]*store.ResourceType{}
	otherOwner := map[string]store.SourceRef{}
	for _, r := range rows {
		if r.Source.Name == t.Name {
			mine[key{r.Name, r.Version}] = r
		} else {
			otherOwner[r.Name] = r.Source
		}
	}
	var conflicts []manifest.Problem
	declared := map[key]bool{}
	p.storedScopes = map[string]manifest.Scope{}
	for _, r := range rows {
		if r.Scope != "" {
			p.storedScopes[r.Name] = r.Scope
		}
	}
	p.typeOrigins = map[string]manifest.Origin{}
	for _, ty := range set.Types {
		p.typeOrigins[ty.Name] = ty.Origin
		if owner, taken := otherOwner[ty.Name]; taken {
			where := owner.Name
			if owner.Path != "" {
				where += " (" + owner.Path + ")"
			}
			hint, err := retiredHint(ctx, st, owner.Name)
			if err != nil {
				return nil, err
			}
			conflicts = append(conflicts, manifest.Problem{File: ty.Origin.File, Line: ty.Origin.Line, Document: ty.Origin.Document,
				Pointer: "/metadata/name", Message: fmt.Sprintf("metadata.name: ResourceType %s is already declared by source %s%s", ty.Name, where, hint)})
			continue
		}
		for _, v := range ty.Versions {
			k := key{ty.Name, v.Name}
			declared[k] = true
			row := &store.ResourceType{Name: ty.Name, Version: v.Name, Group: ty.Group, Description: ty.Description, Annotations: ty.Annotations,
				Scope:  ty.Scope,
				Action: ty.Action, DriftInterval: ty.DriftInterval, Schema: v.Schema, Deprecated: v.Deprecated,
				Source: store.SourceRef{Name: t.Name, Path: ty.Origin.File, Revision: snap.Revision}}
			old := mine[k]
			switch {
			case old == nil:
				p.Types = append(p.Types, TypeChange{Action: Create, Name: ty.Name, Version: v.Name, File: ty.Origin.File})
			case typeChanged(old, row):
				p.Types = append(p.Types, TypeChange{Action: Update, Name: ty.Name, Version: v.Name, File: ty.Origin.File})
			default:
				continue
			}
			p.putTypes = append(p.putTypes, row)
		}
	}
	for k, old := range mine {
		if !declared[k] {
			c := TypeChange{Action: Delete, Name: k.name, Version: k.version, File: old.Source.Path}
			p.Types = append(p.Types, c)
			p.removeTypes = append(p.removeTypes, c)
		}
	}
	sort.Slice(p.Types, func(i, j int) bool {
		a, b := p.Types[i], p.Types[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Version < b.Version
	})
	return conflicts, nil
}

// checkScopes refuses a change of a type's scope while resources of it
// exist: it would change their identity (kind, namespace, name). A type
// stored before types had a scope takes the one it is declared with.
// Problems are placed at the line of spec.scope in files.
func checkScopes(ctx context.Context, st store.Store, p *Plan, files []manifest.File) error {
	var problems []manifest.Problem
	checked := map[string]bool{}
	for _, row := range p.putTypes {
		if checked[row.Name] {
			continue
		}
		checked[row.Name] = true
		from := p.storedScopes[row.Name]
		if from == "" || from == row.ScopeOf() {
			continue
		}
		users, err := st.ListResources(ctx, store.ResourceFilter{Kind: row.Name, Limit: 3})
		if err != nil {
			return fmt.Errorf("list resources of %s: %w", row.Name, err)
		}
		if len(users) == 0 {
			continue
		}
		var names []string
		for _, u := range users {
			names = append(names, fmt.Sprintf("%s (source %s)", u.Ref(), u.Source.Name))
		}
		at := p.typeOrigins[row.Name]
		problems = append(problems, manifest.Problem{File: at.File, Line: at.Line, Document: at.Document, Pointer: "/spec/scope",
			Message: fmt.Sprintf("spec.scope: ResourceType %s cannot change its scope from %s to %s while resources of it exist (%s): "+
				"it would change their identity (kind, namespace, name); remove them first, or keep the scope",
				row.Name, from, row.ScopeOf(), strings.Join(names, ", "))})
	}
	if len(problems) > 0 {
		manifest.PlaceProblems(files, problems)
		return &Error{Reason: ReasonScopeChange, Problems: problems, Message: problems[0].Message}
	}
	return nil
}

func typeChanged(old, row *store.ResourceType) bool {
	return old.Group != row.Group || old.Description != row.Description || old.Action != row.Action ||
		old.DriftInterval != row.DriftInterval || !bytes.Equal(old.Schema, row.Schema) || old.Source.Path != row.Source.Path ||
		old.Deprecated != row.Deprecated || !maps.Equal(old.Annotations, row.Annotations) || old.Scope != row.ScopeOf()
}

// checkTypesInUse refuses to remove a type version that resources still use,
// unless this very plan deletes or forgets all of them. Rows of types whose
// last users are still being destroyed stay until a later sync finds them unused.
func checkTypesInUse(ctx context.Context, st store.Store, p *Plan) error {
	if len(p.removeTypes) == 0 {
		return nil
	}
	leaving := map[manifest.ObjectRef]bool{}
	for _, c := range append(append([]Change(nil), p.Deletes...), p.Forgets...) {
		leaving[c.Ref()] = true
	}
	var problems []manifest.Problem
	var removable []TypeChange
	for _, tc := range p.removeTypes {
		users, err := st.ListResources(ctx, store.ResourceFilter{Kind: tc.Name})
		if err != nil {
			return fmt.Errorf("list resources of %s: %w", tc.Name, err)
		}
		var live []string
		pending := false
		for _, u := range users {
			if u.Version != tc.Version {
				continue
			}
			switch {
			case leaving[u.Ref()]:
				pending = true
			case u.DeletionRequestedAt != nil:
				pending = true
			default:
				live = append(live, fmt.Sprintf("%s (source %s)", u.Ref(), u.Source.Name))
			}
		}
		if len(live) > 0 {
			problems = append(problems, manifest.Problem{File: tc.File,
				Message: fmt.Sprintf("ResourceType %s %s was removed but %d resource(s) still use it: %s; remove or move them first",
					tc.Name, tc.Version, len(live), listRefs(live))})
			continue
		}
		if !pending {
			removable = append(removable, tc)
		}
	}
	p.removeTypes = removable
	if len(problems) > 0 {
		return &Error{Reason: ReasonTypeInUse, Problems: problems, Message: problems[0].Message}
	}
	return nil
}

// pruneGuard refuses plans that would destroy too much: an empty snapshot
// for a source that owns resources, or more deletions than MaxDeletes (or
// the default limit when it is not set). An approved revision passes both.
func pruneGuard(t Target, snap *source.Snapshot, set *manifest.Set, cur *store.Source, p *Plan) error {
	if cur.ApprovedRevision != "" && cur.ApprovedRevision == snap.Revision {
		return nil
	}
	if len(set.Resources) == 0 && p.Owned > 0 && !t.Prune.AllowEmpty {
		return &Error{Reason: ReasonEmptySnapshot, Problems: leavingProblems(p.Deletes, p.Forgets), Message: fmt.Sprintf(
			"revision %s declares no resources but the source owns %d; if that is intended, set prune.allowEmpty or approve the revision",
			snap.Revision, p.Owned)}
	}
	if len(p.Deletes) == 0 {
		return nil
	}
	if ok, limit := t.Prune.allows(len(p.Deletes), p.Owned); !ok {
		return &Error{Reason: ReasonPruneLimitExceeded, Problems: leavingProblems(p.Deletes), Message: fmt.Sprintf(
			"revision %s would delete %d of %d resources, over %s: approve the revision to go ahead (POST /api/v1/sources/%s/approve?revision=%s)",
			snap.Revision, len(p.Deletes), p.Owned, limit, t.Name, snap.Revision)}
	}
	return nil
}

// maxLeavingProblems bounds the resources a prune guard refusal names: a
// refusal that would delete thousands names the first ones and counts the
// rest, so that the source's status stays small.
const maxLeavingProblems = 20

// leavingProblems names, as problems of a prune guard refusal, the
// resources the refused plan would delete or forget, each with the file it
// was last declared in: the refusal's message only counts them, and the
// source's status, its explanation and the dashboard show its problems.
func leavingProblems(groups ...[]Change) []manifest.Problem {
	var out []manifest.Problem
	total := 0
	for _, g := range groups {
		for _, c := range g {
			total++
			if len(out) < maxLeavingProblems {
				out = append(out, manifest.Problem{File: c.File, Message: fmt.Sprintf("would %s %s", c.Action, c.Ref())})
			}
		}
	}
	if total > len(out) {
		out = append(out, manifest.Problem{Message: fmt.Sprintf("and %d more", total-len(out))})
	}
	return out
}

// apply writes the plan, whose deletions rv allowed.
func apply(ctx context.Context, tx store.Store, t Target, snap *source.Snapshot, p *Plan, rv *review) error {
	// First, while the resources to destroy are as the hooks saw them.
	if err := requestDestroys(ctx, tx, rv, p.deleteIDs); err != nil {
		return err
	}
	for _, row := range p.putTypes {
		if _, err := tx.PutResourceType(ctx, row); err != nil {
			return fmt.Errorf("write resource type %s %s: %w", row.Name, row.Version, err)
		}
	}
	applied, err := tx.ApplyResources(ctx, p.writes, store.SourceRef{Name: t.Name, Revision: snap.Revision})
	if err != nil {
		return err
	}
	p.applied = applied
	// Report the generations the store assigned (another agent may have
	// moved them since planning).
	gens := make(map[manifest.ObjectRef]store.Applied, len(applied))
	for i, a := range applied {
		gens[p.writes[i].Ref()] = a
	}
	for i := range p.Creates {
		p.Creates[i].ID, p.Creates[i].Generation = gens[p.Creates[i].Ref()].ID, gens[p.Creates[i].Ref()].Generation
	}
	for i := range p.Updates {
		p.Updates[i].Generation = gens[p.Updates[i].Ref()].Generation
	}
	if err := tx.DeleteResources(ctx, p.forgetIDs); err != nil {
		return err
	}
	for _, tc := range p.removeTypes {
		if err := tx.DeleteResourceType(ctx, tc.Name, tc.Version); err != nil {
			return fmt.Errorf("remove resource type %s %s: %w", tc.Name, tc.Version, err)
		}
	}
	return nil
}

// All returns every resource change, in the order creates, updates,
// deletes, forgets.
func (p *Plan) All() []Change {
	out := make([]Change, 0, p.Changes())
	for _, group := range [][]Change{p.Creates, p.Updates, p.Deletes, p.Forgets} {
		out = append(out, group...)
	}
	return out
}

// Location is "file:line", or the file alone when the line is unknown.
func (c Change) Location() string {
	if c.Line > 0 {
		return fmt.Sprintf("%s:%d", manifest.QuotePath(c.File), c.Line)
	}
	return manifest.QuotePath(c.File)
}

// String renders a change as "create Kind/name (file:line)".
func (c Change) String() string {
	s := fmt.Sprintf("%s %s", c.Action, c.Ref())
	if c.File != "" {
		s += " (" + c.Location() + ")"
	}
	return s
}
