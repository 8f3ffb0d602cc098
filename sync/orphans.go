package sync

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
)

// RemoveMode says what RemoveSource does with a retired source's resources.
type RemoveMode string

// The modes of RemoveSource.
const (
	// ModeForget drops the source's rows (resources, resource types, the
	// source) without destroying anything. History stays.
	ModeForget RemoveMode = "forget"
	// ModePrune destroys the source's resources through their actions;
	// the source and its types go once the last of them is gone.
	ModePrune RemoveMode = "prune"
)

// Removal is what RemoveSource did.
type Removal struct {
	Source string     `json:"source"`
	Mode   RemoveMode `json:"mode"`
	// Forgotten counts resources removed without destruction: all of them
	// when forgetting, those annotated no8s.io/prune: disabled when pruning.
	Forgotten int `json:"forgotten"`
	// Destroying counts resources whose destruction is requested.
	Destroying int `json:"destroying"`
	// Removed is true when the source's row is gone already.
	Removed bool `json:"removed"`
}

// orphanMessage is the status message of an orphaned source.
func orphanMessage(name string, owned int) string {
	return fmt.Sprintf("no agent's configuration lists source %s any more; its %d resource(s) are kept but neither reconciled nor destroyed: "+
		"add the source back, or forget it (no8s-agent delete source %s --mode forget: nothing is destroyed) "+
		"or prune it (--mode prune: its resources are destroyed)", name, owned, name)
}

// retiredHint is what a conflict with a resource or type of source owner
// adds when that source is retired: how to let another source take over.
// It is empty for a source that is served.
func retiredHint(ctx context.Context, st store.Store, owner string) (string, error) {
	src, err := st.GetSource(ctx, owner)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read source %s: %w", owner, err)
	}
	if !src.Phase.Retired() {
		return "", nil
	}
	return fmt.Sprintf("; source %s is %s: it is no longer configured (renamed?): forget it to let this source take its resources over "+
		"(no8s-agent delete source %s --mode forget, or DELETE /api/v1/sources/%s?mode=forget; nothing is destroyed)",
		owner, src.Phase, owner, owner), nil
}

// MarkOrphans marks orphaned every stored source that configured does not
// name, but the API's pseudo-source and sources already retired. An agent
// calls it as it starts, with its configuration's sources, before its first
// syncs: agents sharing a store are meant to list the same sources, and a
// source another agent does serve is made normal again by that agent's
// next sync of it. It returns the names it marked.
func (s *Syncer) MarkOrphans(ctx context.Context, configured []string) ([]string, error) {
	all, err := s.store.ListSources(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	var marked []string
	for _, src := range all {
		if src.Name == store.APISource || slices.Contains(configured, src.Name) || src.Phase.Retired() {
			continue
		}
		done := false
		err := s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if err := tx.LockSource(ctx, src.Name); err != nil {
				return err
			}
			cur, err := tx.GetSource(ctx, src.Name)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if cur.Phase.Retired() {
				return nil
			}
			owned, err := tx.ListResourceDigests(ctx, cur.Name)
			if err != nil {
				return err
			}
			cur.Phase = store.SourceOrphaned
			cur.Message = orphanMessage(cur.Name, len(owned))
			cur.ApprovedRevision = ""
			if _, err := tx.PutSource(ctx, cur); err != nil {
				return err
			}
			done = true
			return tx.Notify(ctx, store.TopicSources, cur.Name)
		})
		if err != nil {
			return marked, fmt.Errorf("mark source %s orphaned: %w", src.Name, err)
		}
		if done {
			marked = append(marked, src.Name)
			s.log.Warn("source orphaned: no longer configured; its resources are kept and not reconciled",
				"source", src.Name)
		}
	}
	return marked, nil
}

// PruneApprovalError refuses a prune that would destroy resources without
// approval: destroying everything a source declared is what the prune
// guard refuses of an empty snapshot unless it is approved.
type PruneApprovalError struct {
	Source     string
	Destroying int
}

// Error implements error.
func (e *PruneApprovalError) Error() string {
	return fmt.Sprintf("%s: pruning source %s would destroy all of its %d resource(s), which the prune guard refuses unless approved: "+
		"repeat with approve=true (--approve) to go ahead, or forget the source instead to destroy nothing",
		ReasonPruneLimitExceeded, e.Source, e.Destroying)
}

// Is makes errors.Is(err, store.ErrConflict) true.
func (e *PruneApprovalError) Is(target error) bool { return target == store.ErrConflict }

// RemoveSource forgets or prunes a retired (orphaned or pruning) source.
// A source that is served fails with store.ErrConflict, an unknown one with
// store.ErrNotFound, the API's pseudo-source and an unknown mode with
// store.ErrInvalid, and a source whose resource types resources of other
// sources use with store.ErrInUse. A prune that would destroy resources
// fails with a *PruneApprovalError unless approve is set, and then puts
// each destruction to the admission hooks, as a sync's: a refusal is an
// *Error. Nothing changes when it fails.
func (s *Syncer) RemoveSource(ctx context.Context, name string, mode RemoveMode, approve bool) (*Removal, error) {
	if mode != ModeForget && mode != ModePrune {
		return nil, fmt.Errorf("remove source %s: mode %q: use %s or %s: %w", name, mode, ModeForget, ModePrune, store.ErrInvalid)
	}
	if name == store.APISource {
		return nil, fmt.Errorf("remove source %s: it is the API's pseudo-source; delete its resources through the API: %w", name, store.ErrInvalid)
	}
	out := &Removal{Source: name, Mode: mode}
	err := reviewed(func() error {
		// The destructions are reviewed before the source's lock is taken.
		var rv *review
		if mode == ModePrune {
			cur, _, destroy, err := planRemoval(ctx, s.store, name, mode, approve)
			if err != nil {
				return err
			}
			if rv, err = s.reviewRemoval(ctx, s.store, cur, destroy); err != nil {
				return err
			}
		}
		return s.store.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			*out = Removal{Source: name, Mode: mode}
			if err := tx.LockSource(ctx, name); err != nil {
				return err
			}
			cur, forget, destroy, err := planRemoval(ctx, tx, name, mode, approve)
			if err != nil {
				return err
			}
			if err := tx.DeleteResources(ctx, forget); err != nil {
				return err
			}
			out.Forgotten, out.Destroying = len(forget), len(destroy)
			if len(destroy) > 0 {
				ids := make([]int64, len(destroy))
				for i, d := range destroy {
					ids[i] = d.ID
				}
				if err := requestDestroys(ctx, tx, rv, ids); err != nil {
					return err
				}
				cur.Phase = store.SourcePruning
				cur.Message = fmt.Sprintf("pruning: destroying %d resource(s) through their actions; the source goes once they are gone", len(destroy))
				if _, err := tx.PutSource(ctx, cur); err != nil {
					return err
				}
				return tx.Notify(ctx, store.TopicSources, name)
			}
			types, err := tx.ListResourceTypes(ctx, store.TypeFilter{Source: name})
			if err != nil {
				return err
			}
			for _, t := range types {
				if err := tx.DeleteResourceType(ctx, t.Name, t.Version); err != nil {
					return err
				}
			}
			out.Removed = true
			return tx.DeleteSource(ctx, name)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("%s source %s: %w", mode, name, err)
	}
	s.log.Info("source removed", "source", name, "mode", string(mode), "forgotten", out.Forgotten,
		"destroying", out.Destroying, "removed", out.Removed)
	return out, nil
}

// planRemoval checks that the named source may be removed in mode, and
// returns it with the IDs of the resources to forget and the resources to
// destroy.
func planRemoval(ctx context.Context, st store.Store, name string, mode RemoveMode, approve bool) (*store.Source, []int64, []store.ResourceDigest, error) {
	cur, err := st.GetSource(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	if !cur.Phase.Retired() {
		return nil, nil, nil, fmt.Errorf("source %s is %s, not orphaned: it is configured; remove it from the configuration of every agent and restart them first: %w",
			name, cur.Phase, store.ErrConflict)
	}
	if err := typesFree(ctx, st, name); err != nil {
		return nil, nil, nil, err
	}
	owned, err := st.ListResourceDigests(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	var forget []int64
	var destroy []store.ResourceDigest
	for _, d := range owned {
		if mode == ModeForget || d.PruneDisabled {
			forget = append(forget, d.ID)
		} else {
			destroy = append(destroy, d)
		}
	}
	if len(destroy) > 0 && !approve {
		return nil, nil, nil, &PruneApprovalError{Source: name, Destroying: len(destroy)}
	}
	return cur, forget, destroy, nil
}

// reviewRemoval puts the destruction of each of destroy, the resources of
// the retired source src, to the admission hooks.
func (s *Syncer) reviewRemoval(ctx context.Context, st store.Store, src *store.Source, destroy []store.ResourceDigest) (*review, error) {
	t := Target{Name: src.Name, Kind: src.Kind, URL: src.URL, Path: src.Path}
	snap := &source.Snapshot{Revision: src.LastAppliedRevision}
	p := &Plan{Source: src.Name, Revision: src.LastAppliedRevision}
	for _, d := range destroy {
		p.Deletes = append(p.Deletes, Change{Action: Delete, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name, File: d.Path, ID: d.ID})
		p.deleteIDs = append(p.deleteIDs, d.ID)
	}
	return s.admit(ctx, st, s.admissionChain(), t, snap, &manifest.Set{}, p, false)
}

// typesFree fails with store.ErrInUse when resources of other sources use
// a resource type version the named source owns: removing the source would
// take their type away.
func typesFree(ctx context.Context, st store.Store, name string) error {
	types, err := st.ListResourceTypes(ctx, store.TypeFilter{Source: name})
	if err != nil {
		return err
	}
	var users []string
	for _, t := range types {
		rows, err := st.ListResources(ctx, store.ResourceFilter{Kind: t.Name})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Source.Name != name && r.Version == t.Version {
				users = append(users, fmt.Sprintf("%s (source %s)", r.Ref(), r.Source.Name))
			}
		}
	}
	if len(users) > 0 {
		return fmt.Errorf("resource types of source %s are used by resources of other sources: %s; remove those first: %w",
			name, listRefs(users), store.ErrInUse)
	}
	return nil
}
