package sync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
)

// apiTarget is the pseudo-source of objects written through the HTTP API.
// It is never synced from a snapshot, so it never prunes: what the API
// writes stays until the API deletes it.
var apiTarget = Target{Name: store.APISource, Kind: store.SourceAPI}

// UseAPIUnknownFields sets what the API's writes do with the fields of a
// spec that its schema does not declare; the default, zero, refuses them
// (strict), as a Git source does. Call it before the first write.
func (s *Syncer) UseAPIUnknownFields(mode manifest.UnknownFields) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiUnknownFields = mode
}

// apiWrites is apiTarget with what the API's writes do with unknown fields.
func (s *Syncer) apiWrites() Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := apiTarget
	t.UnknownFields = s.apiUnknownFields
	return t
}

// Written is what ApplyDocument did.
type Written struct {
	// Type is set when the document was a ResourceType: the version written.
	Type *store.ResourceType
	// Resource is set when the document was a resource: the row as written.
	Resource *store.Resource
	// Outcome says whether the object was created, updated or unchanged.
	Outcome store.ApplyOutcome
	// Revision is the pseudo-revision the write is recorded under.
	Revision manifest.Revision
	// Warnings are about what the write uses: a deprecated type version,
	// fields the schema does not declare (kept or dropped).
	Warnings []string
}

// DocumentFunc builds the manifest document of an API write. It reads
// through tx: inside the write's transaction, after the API source's lock
// is taken, what it reads (the resource being changed, the types) cannot
// change before the document is written. With admission hooks it is also
// called before, through the store, so that the hooks judge the document
// before any lock is taken: it must not change anything but its result.
type DocumentFunc func(ctx context.Context, tx store.Store) ([]byte, error)

// ApplyDocument applies one manifest document written through the API, as
// the pseudo-source store.APISource: under that source's lock, build makes
// the document, which is decoded, validated against the stored types,
// checked for ownership and written with a sync history row and
// notifications, the way a snapshot of a Git source is. A ResourceType
// document carries the versions to write; versions of the type the API wrote
// before and the document leaves out are kept. API writes are serialized,
// so a read-modify-write in build loses no concurrent change.
//
// A resource is put to the admission hooks before the lock is taken; the
// write goes ahead only if the document and the stored resource are still
// those the hooks judged, else it is reviewed again.
//
// A document that does not validate returns an *Error with reason
// ValidationFailed; an object another source owns returns an
// *store.OwnerConflictError naming that source, its file and revision; an
// error of build is returned as it is. Either way nothing changes.
func (s *Syncer) ApplyDocument(ctx context.Context, build DocumentFunc) (*Written, error) {
	start := s.now()
	out := &Written{}
	chain := s.admissionChain()
	err := reviewed(func() error {
		var rv *review
		if chain != nil {
			var err error
			if rv, err = s.reviewDocument(ctx, chain, build); err != nil {
				return err
			}
		}
		return s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			*out = Written{}
			if err := tx.LockSource(ctx, apiTarget.Name); err != nil {
				return err
			}
			set, rev, err := s.buildDocument(ctx, tx, build)
			if err != nil {
				return err
			}
			out.Revision = rev
			cur, err := s.sourceState(ctx, tx, apiTarget)
			if err != nil {
				return err
			}
			p := &Plan{Source: apiTarget.Name, Revision: rev, Warnings: manifestWarnings(set)}
			switch {
			case len(set.Types) == 1:
				if err := s.writeType(ctx, tx, set.Types[0], rev, p, out); err != nil {
					return err
				}
			case len(set.Resources) == 1:
				wp, err := writePlan(ctx, tx, set, rev)
				if err != nil {
					return err
				}
				r := set.Resources[0]
				if chain != nil && len(wp.Creates)+len(wp.Updates) > 0 {
					// Something the hooks judge changes: they must have
					// judged this very change.
					if rv == nil || rv.basis != wp.basis {
						return errPlanMoved
					}
					r = rv.set.Resources[0]
					p.Warnings = append(p.Warnings, rv.warnings...)
				}
				if old, err := tx.GetResourceByName(ctx, r.Ref()); err == nil && old.Source.Name == apiTarget.Name {
					written := &manifest.Set{Types: set.Types, Resources: []*manifest.Resource{r}}
					if err := s.checkTransitions(ctx, tx, apiTarget, written, []Change{{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, ID: old.ID}}, nil); err != nil {
						return err
					}
				} else if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err := writeResource(ctx, tx, r, rev, p, out); err != nil {
					return err
				}
				deprecated, err := deprecations(ctx, tx, set, apiTarget.Name, true)
				if err != nil {
					return err
				}
				p.Warnings = append(deprecated, p.Warnings...)
				for _, w := range set.UnknownFields {
					p.Warnings = append(p.Warnings, w.Message)
				}
				out.Warnings = p.Warnings
			default:
				return fmt.Errorf("api write: %w: the document declares nothing", store.ErrInvalid)
			}
			return s.recordSuccess(ctx, tx, apiTarget, apiSnapshot(ctx, rev), cur, p, start)
		})
	})
	if errors.Is(err, errReviewOutdated) {
		return nil, fmt.Errorf("api write: %w", err)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("applied through the API", "revision", string(out.Revision), "outcome", string(out.Outcome))
	return out, nil
}

// buildDocument builds the document of an API write through st, decodes
// it and validates it against the stored types, and returns it with the
// pseudo-revision it is recorded under.
func (s *Syncer) buildDocument(ctx context.Context, st store.Store, build DocumentFunc) (*manifest.Set, manifest.Revision, error) {
	data, err := build(ctx, st)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	rev := manifest.Revision("api@sha256:" + hex.EncodeToString(sum[:]))
	docs, problems := manifest.DecodeFile("api", data, manifest.DecodeOptions{})
	if len(problems) == 0 && len(docs) != 1 {
		problems = append(problems, manifest.Problem{File: "api", Message: fmt.Sprintf("want one document, got %d", len(docs))})
	}
	if len(problems) > 0 {
		return nil, rev, invalidDocument(problems)
	}
	known, err := s.otherTypes(ctx, st, "")
	if err != nil {
		return nil, rev, err
	}
	set, err := manifest.ValidateWith(docs, known, s.apiWrites().UnknownFields, s.DefaultNamespace())
	var verr *manifest.ValidationError
	switch {
	case errors.As(err, &verr):
		return nil, rev, invalidDocument(verr.Problems)
	case err != nil:
		return nil, rev, err
	}
	return set, rev, nil
}

// reviewDocument builds the document of an API write through the store,
// outside any transaction, and puts the resource it declares to the hooks
// of chain. A type, or a resource whose write changes nothing a hook
// judges, gives no review.
func (s *Syncer) reviewDocument(ctx context.Context, chain *admission.Chain, build DocumentFunc) (*review, error) {
	set, rev, err := s.buildDocument(ctx, s.store, build)
	if err != nil || len(set.Resources) != 1 {
		return nil, err
	}
	p, err := writePlan(ctx, s.store, set, rev)
	if err != nil || len(p.Creates)+len(p.Updates) == 0 {
		return nil, err
	}
	return s.admit(ctx, s.store, chain, s.apiWrites(), apiSnapshot(ctx, rev), set, p, false)
}

// writeType writes the versions a ResourceType document declares. A type
// name belongs to one source: if another source declares any version of
// it, the API may not add versions.
func (s *Syncer) writeType(ctx context.Context, tx store.Store, ty *manifest.ResourceType, rev manifest.Revision, p *Plan, out *Written) error {
	rows, err := tx.ListResourceTypes(ctx, store.TypeFilter{Name: ty.Name})
	if err != nil {
		return err
	}
	mine := map[string]*store.ResourceType{}
	for _, r := range rows {
		if r.Source.Name != apiTarget.Name {
			return &store.OwnerConflictError{What: "ResourceType " + ty.Name, Owner: r.Source}
		}
		if r.Group != ty.Group {
			return invalidDocument([]manifest.Problem{{File: "api", Pointer: "/spec/group", Message: fmt.Sprintf(
				"spec.group: %q differs from %q, the group of version %s: all versions of a type share one group", ty.Group, r.Group, r.Version)}})
		}
		mine[r.Version] = r
	}
	for _, v := range ty.Versions {
		row := &store.ResourceType{Name: ty.Name, Version: v.Name, Group: ty.Group, Description: ty.Description, Annotations: ty.Annotations,
			Action: ty.Action, DriftInterval: ty.DriftInterval, Schema: v.Schema, Deprecated: v.Deprecated,
			Source: store.SourceRef{Name: apiTarget.Name, Revision: rev}}
		switch old := mine[v.Name]; {
		case old == nil:
			out.Outcome = store.Created
		case typeChanged(old, row):
			out.Outcome = store.Updated
		default:
			out.Outcome, out.Type = store.Unchanged, old
			continue
		}
		written, err := tx.PutResourceType(ctx, row)
		if err != nil {
			return err
		}
		p.Types = append(p.Types, TypeChange{Action: Action(out.Outcome), Name: ty.Name, Version: v.Name})
		out.Type = written
	}
	return nil
}

// writeResource creates or updates one resource the API owns.
func writeResource(ctx context.Context, tx store.Store, r *manifest.Resource, rev manifest.Revision, p *Plan, out *Written) error {
	row, outcome, err := tx.ApplyResource(ctx, r, store.SourceRef{Name: apiTarget.Name, Revision: rev})
	if err != nil {
		return err
	}
	c := Change{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, ID: row.ID, After: r.Spec, Labels: r.Labels, Generation: row.Generation,
		PluginConfig: r.PluginConfig}
	switch outcome {
	case store.Created:
		c.Action = Create
		p.Creates = append(p.Creates, c)
	case store.Updated:
		c.Action = Update
		p.Updates = append(p.Updates, c)
	default:
		p.Unchanged++
	}
	out.Resource, out.Outcome = row, outcome
	return nil
}

// DeleteResource requests the destruction of a resource the API owns, as
// removing it from a Git source would: its action's Destroy runs, unless it
// is annotated no8s.io/prune: disabled, in which case it is forgotten. It
// returns the resource as it is now, or nil when it was forgotten. A
// resource another source owns returns an *store.OwnerConflictError and is
// left alone. The destruction is put to the admission hooks first, as a
// sync's would be; a forgotten resource is not destroyed, so it is not.
func (s *Syncer) DeleteResource(ctx context.Context, id int64) (*store.Resource, error) {
	start := s.now()
	var out *store.Resource
	err := reviewed(func() error {
		// Reviewed before the API source's lock is taken.
		r, err := s.store.GetResource(ctx, id)
		if err != nil {
			return err
		}
		if r.Source.Name != apiTarget.Name {
			return &store.OwnerConflictError{What: r.Ref().String(), Owner: r.Source}
		}
		rev := manifest.Revision("api@delete:" + r.Ref().String())
		var rv *review
		if !r.PruneDisabled() {
			p := &Plan{Source: apiTarget.Name, Revision: rev, Deletes: []Change{{Action: Delete, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, ID: r.ID, File: r.Source.Path}},
				deleteIDs: []int64{r.ID}}
			if rv, err = s.admit(ctx, s.store, s.admissionChain(), apiTarget, apiSnapshot(ctx, rev), &manifest.Set{}, p, false); err != nil {
				return err
			}
		}
		return s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if err := tx.LockSource(ctx, apiTarget.Name); err != nil {
				return err
			}
			r, err := tx.GetResource(ctx, id)
			if err != nil {
				return err
			}
			if r.Source.Name != apiTarget.Name {
				return &store.OwnerConflictError{What: r.Ref().String(), Owner: r.Source}
			}
			cur, err := s.sourceState(ctx, tx, apiTarget)
			if err != nil {
				return err
			}
			rev := manifest.Revision("api@delete:" + r.Ref().String())
			p := &Plan{Source: apiTarget.Name, Revision: rev}
			c := Change{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, ID: r.ID, File: r.Source.Path}
			if r.PruneDisabled() {
				c.Action = Forget
				p.Forgets = append(p.Forgets, c)
				if err := tx.DeleteResource(ctx, id); err != nil {
					return err
				}
				out = nil
			} else {
				c.Action = Delete
				p.Deletes = append(p.Deletes, c)
				if err := requestDestroys(ctx, tx, rv, []int64{id}); err != nil {
					return err
				}
				if out, err = tx.GetResource(ctx, id); err != nil {
					return err
				}
			}
			return s.recordSuccess(ctx, tx, apiTarget, apiSnapshot(ctx, rev), cur, p, start)
		})
	})
	if errors.Is(err, errReviewOutdated) {
		return nil, fmt.Errorf("delete resource %d: %w", id, err)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteType removes the version of a resource type the API declared, with
// its sync record. A type another source declares fails with an
// *store.OwnerConflictError, one that resources use with store.ErrInUse.
func (s *Syncer) DeleteType(ctx context.Context, id int64) (*store.ResourceType, error) {
	start := s.now()
	var out *store.ResourceType
	err := s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.LockSource(ctx, apiTarget.Name); err != nil {
			return err
		}
		t, err := tx.GetResourceType(ctx, id)
		if err != nil {
			return err
		}
		if t.Source.Name != apiTarget.Name {
			return &store.OwnerConflictError{What: "resource type " + t.Name + "/" + t.Version, Owner: t.Source}
		}
		cur, err := s.sourceState(ctx, tx, apiTarget)
		if err != nil {
			return err
		}
		if err := tx.DeleteResourceType(ctx, t.Name, t.Version); err != nil {
			return err
		}
		out = t
		rev := manifest.Revision("api@delete:resourcetype/" + t.Name + "/" + t.Version)
		p := &Plan{Source: apiTarget.Name, Revision: rev, Types: []TypeChange{{Action: Delete, Name: t.Name, Version: t.Version}}}
		return s.recordSuccess(ctx, tx, apiTarget, apiSnapshot(ctx, rev), cur, p, start)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReasonNotApprovable refuses an approval of a revision the source is not
// stalled on: approving anything else would let a future revision past the
// prune guard unseen.
const ReasonNotApprovable = "NotApprovable"

// approvable checks that rev is the revision cur is stalled on (a refusal
// by the prune guard, or of a rollback), the only revision an operator can
// approve.
func approvable(cur *store.Source, rev manifest.Revision) error {
	if cur.Phase != store.SourceStalled || cur.LastAttemptedRevision == "" {
		return &Error{Reason: ReasonNotApprovable, Message: fmt.Sprintf(
			"source %s is not stalled (it is %s): only a revision the prune guard or the rollback guard stopped can be approved", cur.Name, phaseOf(cur))}
	}
	if rev != cur.LastAttemptedRevision {
		return &Error{Reason: ReasonNotApprovable, Message: fmt.Sprintf(
			"source %s is stalled on revision %s, not %s: only that revision can be approved", cur.Name, cur.LastAttemptedRevision, rev)}
	}
	return nil
}

func phaseOf(s *store.Source) string {
	if s.Phase == "" {
		return "not synced yet"
	}
	return string(s.Phase)
}

// invalidDocument is the refusal of a document that does not validate.
func invalidDocument(problems []manifest.Problem) *Error {
	manifest.SortProblems(problems)
	return &Error{Reason: ReasonValidationFailed, Problems: problems,
		Message: fmt.Sprintf("%d problem(s); first: %s", len(problems), problems[0])}
}

// actorKey carries who makes an API write in its context.
type actorKey struct{}

// WithActor returns ctx saying that actor (an API token's name) makes the
// writes done with it: the sync history of the API records it as the
// write's author.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// apiSnapshot is what an API write records of itself: its revision, and
// its author when the context names one.
func apiSnapshot(ctx context.Context, rev manifest.Revision) *source.Snapshot {
	snap := &source.Snapshot{Revision: rev}
	if actor, _ := ctx.Value(actorKey{}).(string); actor != "" {
		snap.Commit.Author = actor
	}
	return snap
}
