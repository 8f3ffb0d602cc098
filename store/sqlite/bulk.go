package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// ApplyResources applies many resources of one source in one transaction,
// with the rules of ApplyResource. Owners are checked first, in input
// order, so that a conflict is reported before anything is written; rows
// are then written in (kind, namespace, name) order, which is also the order in which
// new ones get their IDs, as in PostgreSQL.
func (s *Store) ApplyResources(ctx context.Context, rs []*manifest.Resource, src store.SourceRef) ([]store.Applied, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if src.Name == "" {
		return nil, invalid("apply resources: source is required")
	}
	type item struct {
		r *manifest.Resource
		d *desired
		// at is the input position.
		at int
	}
	items := make([]item, len(rs))
	refs := make([]manifest.ObjectRef, len(rs))
	seen := make(map[manifest.ObjectRef]bool, len(rs))
	for i, r := range rs {
		if r == nil || r.Kind == "" || r.Name == "" {
			return nil, invalid("apply resources: resource %d has no kind or name", i)
		}
		if seen[r.Ref()] {
			return nil, invalid("apply resources: %s appears twice", r.Ref())
		}
		seen[r.Ref()] = true
		d, err := encodeDesired(r, src)
		if err != nil {
			return nil, err
		}
		if d.spec == nil {
			// Written as PostgreSQL's batch path writes it.
			d.spec = "{}"
		}
		items[i] = item{r: r, d: d, at: i}
		refs[i] = r.Ref()
	}
	slices.SortFunc(items, func(a, b item) int { return manifest.CompareResources(a.r, b.r) })
	out := make([]store.Applied, len(rs))
	err := s.withTx(ctx, func(s *Store) error {
		owners, err := s.Owners(ctx, refs)
		if err != nil {
			return err
		}
		for _, ref := range refs {
			if o, ok := owners[ref]; ok && o.Name != src.Name {
				return &store.OwnerConflictError{What: ref.String(), Owner: o}
			}
		}
		a := &applier{s: s, src: src, now: ms(clock())}
		for _, it := range items {
			res, err := a.apply(ctx, it.r, it.d)
			if err != nil {
				return err
			}
			out[it.at] = store.Applied{ID: res.id, Generation: res.gen, Outcome: res.outcome}
		}
		// Workers look at the queue after any write, not only a new
		// generation: new annotations may lift a suspension.
		if len(items) > 0 {
			return s.Notify(ctx, store.TopicResources, src.Name)
		}
		return nil
	})
	var oc *store.OwnerConflictError
	if errors.As(err, &oc) {
		return nil, oc
	}
	if err != nil {
		return nil, mapErr(err, "apply resources")
	}
	return out, nil
}

// RequestDeletions marks resources for destruction.
func (s *Store) RequestDeletions(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := jsonArray(ids)
	if err != nil {
		return err
	}
	err = s.withTx(ctx, func(s *Store) error {
		res, err := s.exec(ctx, requestDeletionSet+` WHERE id IN (SELECT value FROM json_each($2))`,
			ms(clock()), list)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.Notify(ctx, store.TopicResources, "")
	})
	return mapErr(err, "request deletion of resources")
}

// DeleteResources removes rows; their history stays.
func (s *Store) DeleteResources(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := jsonArray(ids)
	if err != nil {
		return err
	}
	err = s.withTx(ctx, func(s *Store) error {
		_, err := s.exec(ctx, `DELETE FROM resources WHERE id IN (SELECT value FROM json_each($1))`, list)
		return err
	})
	return mapErr(err, "delete resources")
}

// Owners returns the owners of the refs that exist.
func (s *Store) Owners(ctx context.Context, refs []manifest.ObjectRef) (map[manifest.ObjectRef]store.SourceRef, error) {
	out := map[manifest.ObjectRef]store.SourceRef{}
	if len(refs) == 0 {
		return out, nil
	}
	list, err := jsonArray(refs)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, `SELECT kind, namespace, name, source_name, source_path, source_revision
		FROM resources WHERE `+fmt.Sprintf(refsIn, 1), list)
	if err != nil {
		return nil, mapErr(err, "find owners")
	}
	defer rows.Close()
	for rows.Next() {
		var ref manifest.ObjectRef
		var src store.SourceRef
		if err := rows.Scan(&ref.Kind, &ref.Namespace, &ref.Name, &src.Name, &src.Path, &src.Revision); err != nil {
			return nil, mapErr(err, "find owners")
		}
		out[ref] = src
	}
	return out, mapErr(rows.Err(), "find owners")
}

// LockSource holds the source for the rest of the transaction. A write
// transaction excludes every other writer of the file (begun IMMEDIATE, it
// holds SQLite's write lock from its start), so it holds every source
// already: there is nothing more to take.
func (s *Store) LockSource(ctx context.Context, name string) error {
	if s.tx == nil {
		return invalid("lock source %q: only inside a transaction", name)
	}
	return nil
}

// Notify announces a change on a topic to the listeners of this process.
// Inside a transaction it joins the outbox and is delivered when the
// transaction commits; outside, at once.
func (s *Store) Notify(ctx context.Context, topic, payload string) error {
	if topic == "" {
		return invalid("notify: topic is required")
	}
	if s.tx != nil {
		_, err := s.exec(ctx, `INSERT INTO notify_outbox (topic, payload) VALUES ($1, $2)`, topic, payload)
		return mapErr(err, "notify "+topic)
	}
	s.hub.order.Lock()
	defer s.hub.order.Unlock()
	s.hub.publish([]store.Notification{{Topic: topic, Payload: payload}})
	return nil
}

// ListResourceDigests returns what planning needs of a source's resources.
func (s *Store) ListResourceDigests(ctx context.Context, source string) ([]store.ResourceDigest, error) {
	out, err := collect(ctx, s, func(row scanner) (store.ResourceDigest, error) {
		var d store.ResourceDigest
		err := row.Scan(&d.ID, &d.Kind, &d.Namespace, &d.Name, &d.SpecHash, &d.Action, &d.MetaHash, &d.Generation,
			&d.Deleting, &d.PruneDisabled, &d.Path)
		return d, err
	}, `SELECT id, kind, namespace, name, spec_hash, action, meta_hash, generation, deletion_requested_at IS NOT NULL,
			EXISTS (SELECT 1 FROM json_each(resources.annotations) a WHERE a.key = $2 AND a.value = 'disabled'),
			source_path
		FROM resources WHERE source_name = $1 ORDER BY id`, source, manifest.AnnotationPrune)
	if err != nil {
		return nil, mapErr(err, "list resources of "+source)
	}
	return out, nil
}
