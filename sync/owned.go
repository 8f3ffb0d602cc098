package sync

import (
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
	entries []ownedEntry
}

// ownedEntry is one resource of an ownedCache: every resource the source
// owns once a sync is applied is one the sync declared, so its digest is
// the declared resource's, with the row's ID and generation.
type ownedEntry struct {
	r       *manifest.Resource
	id, gen int64
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
// stored row is cur, in ID order, when this Syncer knows them; nil
// otherwise.
func (s *Syncer) cachedOwned(name string, cur *store.Source) []store.ResourceDigest {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.owned[name]
	if c == nil || !c.stamp.equal(stampOf(cur)) {
		return nil
	}
	digests := make([]store.ResourceDigest, len(c.entries))
	for i, e := range c.entries {
		digests[i] = digestOf(e.r, e.id, e.gen)
	}
	return digests
}

// keepOwned remembers what the source owns after a sync that applied p,
// or forgets it when the sync failed (err) or left something it cannot
// tell without reading the store.
func (s *Syncer) keepOwned(name string, p *Plan, err error) {
	var c *ownedCache
	if err == nil && p != nil && p.recorded != nil {
		if entries := ownedAfter(p); entries != nil {
			c = &ownedCache{stamp: stampOf(p.recorded), entries: entries}
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

// keptResource is a declared resource the source owns once a plan is
// applied: written by it (write is its index in the plan's writes), or
// kept as stored in row id at generation gen (write is -1).
type keptResource struct {
	r       *manifest.Resource
	write   int
	id, gen int64
}

// ownedAfter works out the resources the source owns once p is applied:
// those it declares, with the IDs and generations of their rows, in the
// set's order (kind, then namespace, then name), which the next plan walks side by side
// with the next set. It returns nil when a resource is being deleted, as the
// reconciler removes it once destroyed.
func ownedAfter(p *Plan) []ownedEntry {
	if len(p.deleteIDs) > 0 || p.keepsDeleting || len(p.applied) != len(p.writes) {
		return nil
	}
	out := make([]ownedEntry, len(p.kept))
	for i, k := range p.kept {
		if k.write >= 0 {
			a := p.applied[k.write]
			out[i] = ownedEntry{r: k.r, id: a.ID, gen: a.Generation}
			continue
		}
		out[i] = ownedEntry{r: k.r, id: k.id, gen: k.gen}
	}
	return out
}

// digestOf is the digest of r as ApplyResources writes it, in the row id
// at generation gen: its deletion, if one was requested, is called off.
func digestOf(r *manifest.Resource, id, gen int64) store.ResourceDigest {
	return store.ResourceDigest{ID: id, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, SpecHash: r.SpecHash, Action: r.Action,
		MetaHash: r.MetaHash(), Generation: gen, PruneDisabled: r.PruneDisabled(), Path: r.Origin.File}
}
