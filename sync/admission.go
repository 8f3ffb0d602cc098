package sync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
)

// Reasons of admission refusals.
const (
	// ReasonAdmissionDenied: an admission hook refused a change, or the
	// object a mutating hook returned is invalid.
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonAdmissionFailed: a hook whose failurePolicy is Fail could not
	// give an answer (unreachable, timed out, answered nonsense).
	ReasonAdmissionFailed = "AdmissionFailed"
)

// UseAdmission makes every sync, preview and API write pass its changes
// to the hooks of chain before they are accepted. Call it before the first
// sync; a nil chain admits everything.
func (s *Syncer) UseAdmission(chain *admission.Chain) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admission = chain
}

func (s *Syncer) admissionChain() *admission.Chain {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admission
}

// planChecked plans set against the store, puts the plan's changes to the
// admission hooks and checks the updates against the transition rules of
// their types. The resources mutating hooks patch are validated again and
// planned anew; a denial or a broken rule refuses the whole revision.
// dryRun tells the hooks that nothing will be applied: it serves previews,
// which apply nothing (a sync reviews its plan with reviewSync instead).
func (s *Syncer) planChecked(ctx context.Context, st store.Store, t Target, snap *source.Snapshot, set *manifest.Set, cur *store.Source, dryRun bool) (*Plan, error) {
	p, err := makePlan(ctx, st, t, snap, set, cur, dryRun, nil)
	if err != nil || (p.Changes() == 0 && len(p.writes) == 0) {
		return p, err
	}
	rv, err := s.admit(ctx, st, s.admissionChain(), t, snap, set, p, dryRun)
	if err != nil {
		return p, err
	}
	if rv.set != set {
		set = rv.set
		if p, err = makePlan(ctx, st, t, snap, set, cur, dryRun, nil); err != nil {
			return p, err
		}
	}
	if err := s.checkTransitions(ctx, st, t, set, p.Updates, snap.Files); err != nil {
		return p, err
	}
	p.Warnings = append(p.Warnings, rv.warnings...)
	return p, nil
}

// find returns the resource of set named ref, or nil: by binary search, as
// a Set's resources are in (kind, namespace, name) order, unless they are
// not.
func find(set *manifest.Set, ref manifest.ObjectRef) *manifest.Resource {
	compare := func(r *manifest.Resource, ref manifest.ObjectRef) int { return r.Ref().Compare(ref) }
	if i, ok := slices.BinarySearchFunc(set.Resources, ref, compare); ok {
		return set.Resources[i]
	}
	for _, r := range set.Resources {
		if r.Ref() == ref {
			return r
		}
	}
	return nil
}

// checkTransitions evaluates the CEL rules of the updated resources' types
// with their stored specs, the last accepted generation, as oldSelf. files,
// when given, are the files the resources were declared in: a broken rule
// is reported at its field's line in them.
func (s *Syncer) checkTransitions(ctx context.Context, st store.Store, t Target, set *manifest.Set, updates []Change, files []manifest.File) error {
	if len(updates) == 0 {
		return nil
	}
	// Only the updated resources are looked up, and the other sources'
	// types are read only for a kind the set does not declare itself: a
	// commit that changes a few of many resources costs a few lookups.
	declared := make(map[manifest.ObjectRef]*manifest.Resource, len(updates))
	for _, c := range updates {
		declared[c.Ref()] = find(set, c.Ref())
	}
	var lookup func(string) (*manifest.ResourceType, error)
	typeOf := func(kind string) (*manifest.ResourceType, error) {
		for _, ty := range set.Types {
			if ty.Name == kind {
				return ty, nil
			}
		}
		if lookup == nil {
			var err error
			if lookup, err = s.kindLookup(ctx, st, t, set); err != nil {
				return nil, err
			}
		}
		return lookup(kind)
	}
	types := map[int64]*manifest.ResourceType{}
	var ids []int64
	for _, c := range updates {
		r := declared[c.Ref()]
		if r == nil {
			continue
		}
		ty, err := typeOf(r.Kind)
		if lookup == nil && err != nil {
			return err // the other sources' types could not be read
		}
		if err == nil && ty.HasRules(r.Version) {
			types[c.ID] = ty
			ids = append(ids, c.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	stored, err := st.ListResources(ctx, store.ResourceFilter{IDs: ids})
	if err != nil {
		return fmt.Errorf("read the specs the transition rules compare with: %w", err)
	}
	var problems []manifest.Problem
	for _, old := range stored {
		r := declared[old.Ref()]
		problems = append(problems, types[old.ID].CheckTransition(r, old.Version, old.Spec)...)
	}
	if len(problems) > 0 {
		manifest.PlaceProblems(files, problems)
		manifest.SortProblems(problems)
		return &Error{Reason: ReasonValidationFailed, Problems: problems,
			Message: fmt.Sprintf("%d change(s) break a transition rule; first: %s", len(problems), problems[0])}
	}
	return nil
}

// admit puts each create, update and delete of p to the hooks of chain
// and returns what they allowed: the set with the resources they patched
// in place of the declared ones, and the deletions, each with the stored
// row it was judged on. With no hooks it allows everything and asks
// nothing. It reads through st and, since hooks may take long to answer,
// must not be called inside a write transaction when chain is not nil.
//
// It is the only caller of the hooks: every path that changes resources
// reviews its plan here, and destructions are requested only with the
// review it returns (requestDestroys).
func (s *Syncer) admit(ctx context.Context, st store.Store, chain *admission.Chain, t Target, snap *source.Snapshot, set *manifest.Set, p *Plan, dryRun bool) (*review, error) {
	rv := &review{set: set, destroys: make(map[int64]string, len(p.Deletes))}
	if chain == nil {
		for _, c := range p.Deletes {
			rv.destroys[c.ID] = ""
		}
		return rv, nil
	}
	rv.basis = p.stateBasis()
	declared := make(map[manifest.ObjectRef]int, len(set.Resources))
	for i, r := range set.Resources {
		declared[r.Ref()] = i
	}
	var (
		problems []manifest.Problem
		denied   bool
		warnings []string
		patched  map[int]*manifest.Resource
		lookup   func(kind string) (*manifest.ResourceType, error)
	)
	review := func(c Change, op admission.Operation, r *manifest.Resource) error {
		if !chain.Matches(c.Kind, op) {
			if op == admission.Delete {
				rv.destroys[c.ID] = ""
			}
			return nil
		}
		req := admission.Request{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, Operation: op, Source: t.Name,
			Revision: string(snap.Revision), DryRun: dryRun}
		var err error
		if r != nil {
			if req.Object, err = r.Object(); err != nil {
				return err
			}
		}
		if op != admission.Create {
			var old *store.Resource
			if c.ID != 0 {
				old, err = st.GetResource(ctx, c.ID)
			} else {
				old, err = st.GetResourceByName(ctx, c.Ref())
			}
			if errors.Is(err, store.ErrNotFound) {
				// Gone since the plan was made: plan again.
				return fmt.Errorf("read %s for admission: %w", c.Ref(), errPlanMoved)
			}
			if err != nil {
				return fmt.Errorf("read %s for admission: %w", c.Ref(), err)
			}
			if req.OldObject, err = old.Resource.Object(); err != nil {
				return err
			}
			if op == admission.Delete {
				if rv.destroys[c.ID], err = rowStamp(old); err != nil {
					return err
				}
			}
		}
		res, err := chain.Review(ctx, req)
		if err != nil {
			return err
		}
		for _, w := range res.Warnings {
			warnings = append(warnings, fmt.Sprintf("%s: %s", c.Ref(), w))
		}
		at := manifest.Origin{File: c.File, Line: c.Line}
		if r != nil {
			at = r.Origin
		}
		if !res.Allowed {
			denied = denied || !res.Denial.Failed
			problems = append(problems, manifest.Problem{File: at.File, Line: at.Line, Document: at.Document,
				Message: fmt.Sprintf("%s %s: %s", op, c.Ref(), res.Denial.Error())})
			return nil
		}
		if !res.Patched || r == nil {
			return nil
		}
		if lookup == nil {
			if lookup, err = s.kindLookup(ctx, st, t, set); err != nil {
				return err
			}
		}
		mutated, ps, ws := manifest.ParseResourceObject(res.Object, r.Origin, lookup, t.UnknownFields, s.DefaultNamespace())
		denied = denied || len(ps) > 0
		for _, w := range ws {
			warnings = append(warnings, fmt.Sprintf("%s as admission hooks patched it: %s", c.Ref(), w.Message))
		}
		for _, pr := range ps {
			pr.Message = fmt.Sprintf("%s as admission hooks patched it: %s", c.Ref(), pr.Message)
			problems = append(problems, pr)
		}
		switch {
		case len(ps) > 0:
		case mutated.Ref() != r.Ref():
			denied = true
			problems = append(problems, manifest.Problem{File: at.File, Line: at.Line, Document: at.Document,
				Message: fmt.Sprintf("%s: admission hooks may not rename it (to %s)", c.Ref(), mutated.Ref())})
		default:
			if patched == nil {
				patched = map[int]*manifest.Resource{}
			}
			patched[declared[r.Ref()]] = mutated
		}
		return nil
	}
	// A change of labels or annotations alone is an update too: a policy
	// on them must not be passed by leaving the spec alone.
	var metadataOnly []Change
	changed := map[manifest.ObjectRef]bool{}
	for _, c := range slices.Concat(p.Creates, p.Updates) {
		changed[c.Ref()] = true
	}
	for _, r := range p.writes {
		if !changed[r.Ref()] {
			metadataOnly = append(metadataOnly, Change{Action: Update, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, File: r.Origin.File, Line: r.Origin.Line})
		}
	}
	for _, group := range []struct {
		changes []Change
		op      admission.Operation
	}{{p.Creates, admission.Create}, {p.Updates, admission.Update}, {metadataOnly, admission.Update}, {p.Deletes, admission.Delete}} {
		for _, c := range group.changes {
			var r *manifest.Resource
			if i, ok := declared[c.Ref()]; ok && group.op != admission.Delete {
				r = set.Resources[i]
			}
			if err := review(c, group.op, r); err != nil {
				return nil, err
			}
		}
	}
	if len(problems) > 0 {
		manifest.SortProblems(problems)
		reason := ReasonAdmissionFailed
		if denied {
			reason = ReasonAdmissionDenied
		}
		return nil, &Error{Reason: reason, Problems: problems,
			Message: fmt.Sprintf("%d change(s) refused at admission; first: %s", len(problems), problems[0])}
	}
	rv.warnings = warnings
	if patched == nil {
		return rv, nil
	}
	// The validated set may be shared with the validator's cache: the
	// patched resources go into a copy.
	out := &manifest.Set{Types: set.Types, Resources: slices.Clone(set.Resources), Warnings: set.Warnings,
		UnknownFields: set.UnknownFields}
	for i, r := range patched {
		out.Resources[i] = r
	}
	rv.set = out
	return rv, nil
}

// kindLookup resolves kinds as the validation of t's snapshot did: the
// types set declares, then those of other sources.
func (s *Syncer) kindLookup(ctx context.Context, st store.Store, t Target, set *manifest.Set) (func(string) (*manifest.ResourceType, error), error) {
	self := t.Name
	if self == apiTarget.Name {
		// API writes validate against every stored type, the API's too.
		self = ""
	}
	known, err := s.otherTypes(ctx, st, self)
	if err != nil {
		return nil, err
	}
	return func(kind string) (*manifest.ResourceType, error) {
		for _, ty := range set.Types {
			if ty.Name == kind {
				return ty, nil
			}
		}
		if ty := known(kind); ty != nil {
			return ty, nil
		}
		return nil, fmt.Errorf("unknown kind %q", kind)
	}, nil
}

// writePlan plans the API write of set's one resource: a create, or an
// update of what the store holds when anything a hook judges changes (the
// object it is shown, or a destruction the write calls off), else
// nothing. Its basis is the stored row's stamp and the declared object: a
// review of the plan holds while both stay the same.
func writePlan(ctx context.Context, st store.Store, set *manifest.Set, rev manifest.Revision) (*Plan, error) {
	r := set.Resources[0]
	p := &Plan{Source: apiTarget.Name, Revision: rev}
	obj, err := r.Object()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(obj)
	p.basis = hex.EncodeToString(sum[:])
	c := Change{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, File: r.Origin.File, Line: r.Origin.Line}
	old, err := st.GetResourceByName(ctx, r.Ref())
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.Action = Create
		p.Creates = append(p.Creates, c)
		return p, nil
	case err != nil:
		return nil, err
	case old.Source.Name != apiTarget.Name:
		// The write is refused as another source's object; no hook need see it.
		return p, nil
	case old.DeletionRequestedAt == nil:
		// The write changes nothing a hook could judge when the object the
		// hooks are shown stays the same: not only the spec, action, labels
		// and annotations, but the type version, the dependencies and the
		// plugin configuration too, all of which the write stores.
		stored, err := old.Resource.Object()
		if err != nil {
			return nil, err
		}
		if bytes.Equal(stored, obj) {
			return p, nil
		}
	}
	stamp, err := rowStamp(old)
	if err != nil {
		return nil, err
	}
	p.basis += " " + stamp
	c.Action, c.ID = Update, old.ID
	p.Updates = append(p.Updates, c)
	return p, nil
}
