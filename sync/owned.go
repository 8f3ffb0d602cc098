package sync

import (
	"cmp"
	"slices"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// ownedCache is what a source owned once this Syncer applied a sync of
// it: the digests of its resources as that sync left them, worked out from
// the plan and what the store said it did, and the source's row as the
// sync wrote it. The next sync plans against it instead of reading every
// digest again, as long as the source's row is still that one: a sync of
// the source by anyone, a refusal, a fetch failure, an approval, an
// orphaning all write the row. Nothing else changes what a digest holds
// of a source's resources, or which resources it owns, but the removal of
// a resource whose destruction is done; so a cache that holds a resource
// being deleted is not kept.
type ownedCache struct {
	stamp   sourceStamp
	digests []store.ResourceDigest
}

// sourceStamp is what tells that a source's row was written since.
type sourceStamp struct {
	updated            time.Time
	applied, attempted manifest.Revision
	phase              store.SourcePhase
}

func stampOf(src *store.Source) sourceStamp {
	return sourceStamp{updated: src.UpdatedAt, applied: src.LastAppliedRevision, attempted: src.LastAttemptedRevision, phase: src.Phase}
}

func (a sourceStamp) equal(b sourceStamp) bool {
	return !a.updated.IsZero() && a.updated.Equal(b.updated) && a.applied == b.applied && a.attempted == b.attempted && a.phase == b.phase
}

// cachedOwned returns the digests of the resources of the source whose
// stored row is cur, when this Syncer knows them; nil otherwise. They are
// shared: read them, do not change them.
func (s *Syncer) cachedOwned(name string, cur *store.Source) []store.ResourceDigest {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.owned[name]
	if c == nil || !c.stamp.equal(stampOf(cur)) {
		return nil
	}
	return c.digests
}

// keepOwned remembers what the source owns after a sync that applied p,
// or forgets it when the sync failed (err) or left something it cannot
// tell without reading the store.
func (s *Syncer) keepOwned(name string, p *Plan, err error) {
	var c *ownedCache
	if err == nil && p != nil && p.recorded != nil {
		if digests := ownedAfter(p); digests != nil {
			c = &ownedCache{stamp: stampOf(p.recorded), digests: digests}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == nil {
		delete(s.owned, name)
		return
	}
	s.owned[name] = c
}

// ownedAfter works out the digests of the resources the source owns once
// p is applied: those it owned, less those forgotten, with what was
// written as written, in ID order. It returns nil when a resource is
// being deleted: the reconciler removes it once destroyed.
func ownedAfter(p *Plan) []store.ResourceDigest {
	if len(p.deleteIDs) > 0 || len(p.applied) != len(p.writes) {
		return nil
	}
	written := make(map[manifest.ObjectRef]int, len(p.writes))
	for i, r := range p.writes {
		written[r.Ref()] = i
	}
	forgotten := make(map[int64]bool, len(p.forgetIDs))
	for _, id := range p.forgetIDs {
		forgotten[id] = true
	}
	out := make([]store.ResourceDigest, 0, len(p.owned)+len(p.Creates))
	for _, d := range p.owned {
		if forgotten[d.ID] {
			continue
		}
		if i, ok := written[d.Ref()]; ok {
			delete(written, d.Ref())
			out = append(out, writtenDigest(p.writes[i], p.applied[i]))
			continue
		}
		if d.Deleting {
			return nil
		}
		out = append(out, d)
	}
	for _, i := range written {
		out = append(out, writtenDigest(p.writes[i], p.applied[i]))
	}
	slices.SortFunc(out, func(a, b store.ResourceDigest) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// writtenDigest is the digest of r as ApplyResources wrote it: its
// deletion, if one was requested, is called off.
func writtenDigest(r *manifest.Resource, a store.Applied) store.ResourceDigest {
	return store.ResourceDigest{ID: a.ID, Kind: r.Kind, Name: r.Name, SpecHash: r.SpecHash, Action: r.Action,
		MetaHash: r.MetaHash(), Generation: a.Generation, PruneDisabled: r.PruneDisabled(), Path: r.Origin.File}
}
