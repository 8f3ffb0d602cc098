package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/internal/flatjson"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

const resourceCols = `id, kind, namespace, grp, type_version, name, labels, annotations, spec, spec_hash, action, depends_on,
	origin_document, origin_line, source_name, source_path, source_revision, generation, observed_generation,
	phase, status_message, conditions, outputs, retry_count, next_reconcile_at, deletion_requested_at,
	reconcile_requested_at, last_reconcile_time, lease_owner, lease_expires_at, lease_token, created_at, updated_at,
	leased_at, suspended_at, plugin_config, annotation_suspended_at, suspended_reason, suspended_by_identity,
	source_name IN (` + store.OrphanedSourcesSQL + `)`

// scanResource scans the resourceCols of row, followed by extra columns
// into extra.
func scanResource(row pgx.Row, extra ...any) (*store.Resource, error) {
	var (
		r                                                         store.Resource
		labels, annotations, spec, deps, conds, out, pluginConfig []byte
		annotatedAt                                               *time.Time
	)
	dest := []any{&r.ID, &r.Kind, &r.Namespace, &r.Group, &r.Version, &r.Name, &labels, &annotations, &spec, &r.SpecHash,
		&r.Action, &deps, &r.Origin.Document, &r.Origin.Line, &r.Source.Name, &r.Source.Path, &r.Source.Revision,
		&r.Generation, &r.ObservedGeneration, &r.Phase, &r.StatusMessage, &conds, &out, &r.RetryCount,
		&r.NextReconcileAt, &r.DeletionRequestedAt, &r.ReconcileRequestedAt, &r.LastReconcileTime,
		&r.LeaseOwner, &r.LeaseExpiresAt, &r.LeaseToken, &r.CreatedAt, &r.UpdatedAt, &r.LeasedAt, &r.SuspendedAt, &pluginConfig, &annotatedAt,
		&r.SuspendedReason, &r.SuspendedIdentity, &r.Orphaned}
	err := row.Scan(append(dest, extra...)...)
	if err != nil {
		return nil, err
	}
	if r.Labels, err = decodeMap(labels, "labels"); err != nil {
		return nil, err
	}
	if r.Annotations, err = decodeMap(annotations, "annotations"); err != nil {
		return nil, err
	}
	if r.DependsOn, err = decodeSlice[manifest.ObjectRef](deps, "dependsOn"); err != nil {
		return nil, err
	}
	if r.Conditions, err = decodeConditions(conds); err != nil {
		return nil, err
	}
	for i := range r.Conditions {
		r.Conditions[i].LastTransitionTime = utc(r.Conditions[i].LastTransitionTime)
	}
	r.Spec = rawDoc(spec)
	r.Outputs = rawDoc(out)
	r.PluginConfig = rawDoc(pluginConfig)
	r.Origin.File = r.Source.Path
	r.NextReconcileAt = utcPtr(r.NextReconcileAt)
	r.DeletionRequestedAt = utcPtr(r.DeletionRequestedAt)
	r.ReconcileRequestedAt = utcPtr(r.ReconcileRequestedAt)
	r.LastReconcileTime = utcPtr(r.LastReconcileTime)
	r.LeaseExpiresAt = utcPtr(r.LeaseExpiresAt)
	r.LeasedAt = utcPtr(r.LeasedAt)
	r.SuspendedAt = utcPtr(r.SuspendedAt)
	if r.SuspendAnnotated() && annotatedAt != nil {
		r.SuspendedAt = utcPtr(annotatedAt)
	}
	r.CreatedAt, r.UpdatedAt = utc(r.CreatedAt), utc(r.UpdatedAt)
	return &r, nil
}

// prefixed qualifies every column of a column list with prefix, e.g. "r.".
func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

func collectResources(rows pgx.Rows) ([]*store.Resource, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Resource, error) { return scanResource(row) })
}

// desired holds the encoded desired-state columns of a resource.
type desired struct {
	labels, annotations, deps []byte
	path                      string
}

func encodeDesired(r *manifest.Resource, src store.SourceRef) (*desired, error) {
	if r == nil || r.Kind == "" || r.Name == "" || src.Name == "" {
		return nil, invalid("resource: kind, name and source are required")
	}
	if r.Namespace != "" && !manifest.ValidNamespace(r.Namespace) {
		return nil, invalid("%s: namespace %q is not a DNS-1123 label", resourceWhat(r.Ref()), r.Namespace)
	}
	var (
		d   desired
		err error
	)
	if d.labels, err = jsonValue(r.Labels, len(r.Labels) == 0, "{}"); err != nil {
		return nil, err
	}
	if d.annotations, err = jsonValue(r.Annotations, len(r.Annotations) == 0, "{}"); err != nil {
		return nil, err
	}
	if d.deps, err = jsonValue(r.DependsOn, len(r.DependsOn) == 0, "[]"); err != nil {
		return nil, err
	}
	d.path = src.Path
	if d.path == "" {
		d.path = r.Origin.File
	}
	return &d, nil
}

func resourceWhat(ref manifest.ObjectRef) string { return "resource " + ref.String() }

// insertResource inserts r; with onConflictNothing, an existing (kind, namespace, name)
// yields pgx.ErrNoRows instead of a unique violation.
func (s *Store) insertResource(ctx context.Context, r *manifest.Resource, src store.SourceRef, d *desired, onConflictNothing bool) (*store.Resource, error) {
	sql := `INSERT INTO resources (kind, grp, type_version, name, labels, annotations, spec, spec_hash, action,
			depends_on, origin_document, origin_line, source_name, source_path, source_revision, meta_hash, plugin_config,
			namespace)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`
	if onConflictNothing {
		sql += ` ON CONFLICT (kind, namespace, name) DO NOTHING`
	}
	return scanResource(s.q.QueryRow(ctx, sql+` RETURNING `+resourceCols,
		r.Kind, r.Group, r.Version, r.Name, d.labels, d.annotations, jsonDoc(r.Spec), r.SpecHash, r.Action,
		d.deps, r.Origin.Document, r.Origin.Line, src.Name, d.path, string(src.Revision), r.MetaHash(), jsonDoc(r.PluginConfig),
		r.Namespace))
}

// CreateResource inserts r at generation 1, phase pending, owned by src;
// ErrConflict when (Kind, Namespace, Name) exists.
func (s *Store) CreateResource(ctx context.Context, r *manifest.Resource, src store.SourceRef) (*store.Resource, error) {
	d, err := encodeDesired(r, src)
	if err != nil {
		return nil, err
	}
	var out *store.Resource
	err = s.withTx(ctx, func(s *Store) error {
		if out, err = s.insertResource(ctx, r, src, d, false); err != nil {
			return err
		}
		return s.Notify(ctx, store.TopicResources, r.Ref().String())
	})
	if err != nil {
		return nil, mapErr(err, "create "+resourceWhat(r.Ref()))
	}
	return out, nil
}

// ApplyResource creates r or updates the resource with the same (Kind, Namespace, Name)
// owned by src.Name. The stored row is locked while the new generation is
// computed, so concurrent applies each see the previous one's result. See
// store.Store for the rules.
func (s *Store) ApplyResource(ctx context.Context, r *manifest.Resource, src store.SourceRef) (*store.Resource, store.ApplyOutcome, error) {
	d, err := encodeDesired(r, src)
	if err != nil {
		return nil, "", err
	}
	what := resourceWhat(r.Ref())
	var (
		out     *store.Resource
		outcome store.ApplyOutcome
	)
	err = s.withTx(ctx, func(s *Store) error {
		// Each statement sees rows committed before it started, so when a
		// concurrent insert wins the race, the next SELECT finds and locks it.
		// The loop ends unless rows appear and vanish again every time.
		for attempt := 0; attempt < 10; attempt++ {
			var (
				id, gen  int64
				hash     string
				action   string
				deleting bool
				owner    store.SourceRef
			)
			err := s.q.QueryRow(ctx, `SELECT id, generation, spec_hash, action, deletion_requested_at IS NOT NULL,
					source_name, source_path, source_revision
				FROM resources WHERE kind = $1 AND namespace = $2 AND name = $3 FOR UPDATE`, r.Kind, r.Namespace, r.Name).
				Scan(&id, &gen, &hash, &action, &deleting, &owner.Name, &owner.Path, &owner.Revision)
			if errors.Is(err, pgx.ErrNoRows) {
				out, err = s.insertResource(ctx, r, src, d, true)
				if errors.Is(err, pgx.ErrNoRows) {
					continue
				}
				if err != nil {
					return err
				}
				outcome = store.Created
				return s.Notify(ctx, store.TopicResources, r.Ref().String())
			}
			if err != nil {
				return err
			}
			if owner.Name != src.Name {
				return &store.OwnerConflictError{What: r.Ref().String(), Owner: owner}
			}
			changed := hash != r.SpecHash || action != r.Action
			bump := changed || deleting
			outcome = store.Unchanged
			if bump {
				outcome = store.Updated
			}
			out, err = scanResource(s.q.QueryRow(ctx, `UPDATE resources SET
					grp = $2, type_version = $3, labels = $4, annotations = $5, spec = $6, spec_hash = $7,
					action = $8, depends_on = $9, origin_document = $10, origin_line = $11,
					source_path = $12, source_revision = $13,
					generation = generation + CASE WHEN $14 THEN 1 ELSE 0 END,
					-- A new generation is pending until reconciled, unless a
					-- worker holds it: its completion makes it pending then.
					phase = CASE WHEN $15 OR ($14 AND `+leaseFree+`) THEN 'pending' ELSE phase END,
					status_message = CASE WHEN $14 AND `+leaseFree+`
						THEN 'generation ' || (generation + 1) || ' is waiting to be reconciled' ELSE status_message END,
					conditions = CASE WHEN $14 THEN `+pendingConditions("conditions", "generation + 1")+` ELSE conditions END,
					deletion_requested_at = CASE WHEN $15 THEN NULL ELSE deletion_requested_at END,
					-- A new generation is due at once and its retries start afresh.
					-- A resource waiting on others looks again when its dependsOn may have changed.
					next_reconcile_at = CASE WHEN $14 THEN NULL
						WHEN waiting AND meta_hash <> $16 THEN now() ELSE next_reconcile_at END,
					retry_count = CASE WHEN $14 THEN 0 ELSE retry_count END,
					meta_hash = $16, plugin_config = $17, updated_at = now()
				WHERE id = $1
				RETURNING `+resourceCols,
				id, r.Group, r.Version, d.labels, d.annotations, jsonDoc(r.Spec), r.SpecHash,
				r.Action, d.deps, r.Origin.Document, r.Origin.Line, d.path, string(src.Revision),
				bump, deleting, r.MetaHash(), jsonDoc(r.PluginConfig)))
			if err != nil {
				return err
			}
			// Also when unchanged: new annotations may lift a suspension.
			return s.Notify(ctx, store.TopicResources, r.Ref().String())
		}
		return fmt.Errorf("%s kept appearing and disappearing; gave up", what)
	})
	if err != nil {
		return nil, "", mapErr(err, "apply "+what)
	}
	return out, outcome, nil
}

// GetResource returns the resource with the given ID, or ErrNotFound.
func (s *Store) GetResource(ctx context.Context, id int64) (*store.Resource, error) {
	r, err := scanResource(s.q.QueryRow(ctx, `SELECT `+resourceCols+` FROM resources WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("resource %d", id))
	}
	return r, nil
}

// GetResourceByName returns the resource ref names, or ErrNotFound.
func (s *Store) GetResourceByName(ctx context.Context, ref manifest.ObjectRef) (*store.Resource, error) {
	r, err := scanResource(s.q.QueryRow(ctx,
		`SELECT `+resourceCols+` FROM resources WHERE kind = $1 AND namespace = $2 AND name = $3`, ref.Kind, ref.Namespace, ref.Name))
	if err != nil {
		return nil, mapErr(err, resourceWhat(ref))
	}
	return r, nil
}

// refColumns returns the kinds, namespaces and names of refs, for unnest.
func refColumns(refs []manifest.ObjectRef) (kinds, namespaces, names []string) {
	kinds, namespaces, names = make([]string, len(refs)), make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		kinds[i], namespaces[i], names[i] = r.Kind, r.Namespace, r.Name
	}
	return kinds, namespaces, names
}

// ListResources returns the resources matching f, ordered by ID. Labels
// match by JSON containment, so a resource may carry more labels than asked.
func (s *Store) ListResources(ctx context.Context, f store.ResourceFilter) ([]*store.Resource, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Kind != "" {
		add("kind = $%d", f.Kind)
	}
	if f.Name != "" {
		add("name = $%d", f.Name)
	}
	if f.Namespaces != nil {
		add("namespace = ANY($%d::text[])", f.Namespaces)
	}
	if f.Phase != "" {
		add("phase = $%d", string(f.Phase))
	}
	if f.Actions != nil {
		add("action = ANY($%d::text[])", f.Actions)
	} else if f.Action != "" {
		add("action = $%d", f.Action)
	}
	if f.Source != "" {
		add("source_name = $%d", f.Source)
	}
	if len(f.Labels) > 0 {
		b, err := jsonValue(f.Labels, false, "")
		if err != nil {
			return nil, err
		}
		add("labels @> $%d::jsonb", b)
	}
	if f.After > 0 {
		add("id > $%d", f.After)
	}
	if f.IDs != nil {
		add("id = ANY($%d)", f.IDs)
	}
	if f.Refs != nil {
		kinds, namespaces, names := refColumns(f.Refs)
		args = append(args, kinds, namespaces, names)
		where = append(where, fmt.Sprintf("(kind, namespace, name) IN (SELECT * FROM unnest($%d::text[], $%d::text[], $%d::text[]))",
			len(args)-2, len(args)-1, len(args)))
	}
	if f.DependsOn != nil {
		b, err := json.Marshal([]manifest.ObjectRef{*f.DependsOn})
		if err != nil {
			return nil, err
		}
		add("depends_on @> $%d::jsonb AND depends_on <> '[]'::jsonb", b)
		// Containment finds the rows through the index; a reference
		// without a namespace also contains one with a namespace.
		args = append(args, f.DependsOn.Kind, f.DependsOn.Namespace, f.DependsOn.Name)
		where = append(where, fmt.Sprintf(`EXISTS (SELECT 1 FROM jsonb_array_elements(depends_on) e
			WHERE e->>'kind' = $%d AND coalesce(e->>'namespace', '') = $%d AND e->>'name' = $%d)`, len(args)-2, len(args)-1, len(args)))
	}
	sql := `SELECT ` + resourceCols + ` FROM resources`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY id"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		sql += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(err, "list resources")
	}
	out, err := collectResources(rows)
	if err != nil {
		return nil, mapErr(err, "list resources")
	}
	return out, nil
}

// SetResourceStatus writes u, and only the status columns, to the resource:
// the desired state and generation are left as they are, so a status write
// never undoes a concurrent apply.
func (s *Store) SetResourceStatus(ctx context.Context, id int64, u store.StatusUpdate) (*store.Resource, error) {
	what := fmt.Sprintf("resource %d", id)
	if !u.Phase.Valid() {
		return nil, invalid("set status of %s: unknown phase %q", what, u.Phase)
	}
	if u.ObservedGeneration < 0 || u.RetryCount < 0 {
		return nil, invalid("set status of %s: negative observed generation or retry count", what)
	}
	conds, err := jsonValue(u.Conditions, len(u.Conditions) == 0, "[]")
	if err != nil {
		return nil, err
	}
	r, err := scanResource(s.q.QueryRow(ctx, `UPDATE resources SET
			phase = $2, status_message = $3, conditions = $4, observed_generation = $5, outputs = $6,
			retry_count = $7, next_reconcile_at = $8, last_reconcile_time = $9, updated_at = now()
		WHERE id = $1
		RETURNING `+resourceCols,
		id, string(u.Phase), u.Message, conds, u.ObservedGeneration, jsonDoc(u.Outputs),
		u.RetryCount, u.NextReconcileAt, u.LastReconcileTime))
	if err != nil {
		return nil, mapErr(err, "set status of "+what)
	}
	return r, nil
}

// RequestDeletion marks the resource for destruction: phase deleting, and
// the time of the first request kept.
func (s *Store) RequestDeletion(ctx context.Context, id int64) (*store.Resource, error) {
	var r *store.Resource
	err := s.withTx(ctx, func(s *Store) error {
		var err error
		r, err = scanResource(s.q.QueryRow(ctx, `UPDATE resources SET
				next_reconcile_at = CASE WHEN deletion_requested_at IS NULL THEN NULL ELSE next_reconcile_at END,
				retry_count = CASE WHEN deletion_requested_at IS NULL THEN 0 ELSE retry_count END,
				phase = 'deleting', deletion_requested_at = coalesce(deletion_requested_at, now()), updated_at = now()
			WHERE id = $1
			RETURNING `+resourceCols, id))
		if err != nil {
			return err
		}
		return s.Notify(ctx, store.TopicResources, r.Ref().String())
	})
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("request deletion of resource %d", id))
	}
	return r, nil
}

// DeleteResource removes the resource; its reconcile history stays.
func (s *Store) DeleteResource(ctx context.Context, id int64) error {
	tag, err := s.q.Exec(ctx, `DELETE FROM resources WHERE id = $1`, id)
	if err != nil {
		return mapErr(err, fmt.Sprintf("delete resource %d", id))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete resource %d: %w", id, store.ErrNotFound)
	}
	return nil
}

// decodeConditions decodes the conditions column. Reads of many resources
// (the API's lists and batched reads by id) spend most of their time here
// with encoding/json, so the shape the agent writes (flat objects of
// strings and integers without escapes) is parsed directly; anything else
// goes to encoding/json.
func decodeConditions(b []byte) ([]manifest.Condition, error) {
	if conds, ok := parseConditions(b); ok {
		return conds, nil
	}
	return decodeSlice[manifest.Condition](b, "conditions")
}

// parseConditions is the direct parse; false when b is not of the plain
// shape it knows, which says nothing of whether b is valid.
func parseConditions(b []byte) ([]manifest.Condition, bool) {
	p := flatjson.NewReader(string(b))
	if !p.Byte('[') {
		return nil, false
	}
	var out []manifest.Condition
	if p.Byte(']') {
		return nil, p.End()
	}
	for {
		if !p.Byte('{') {
			return nil, false
		}
		var c manifest.Condition
		for {
			key, ok := p.Str()
			if !ok || !p.Byte(':') {
				return nil, false
			}
			if key == "observedGeneration" {
				if c.ObservedGeneration, ok = p.Int(); !ok {
					return nil, false
				}
			} else {
				v, ok := p.Str()
				if !ok {
					return nil, false
				}
				switch key {
				case "type":
					c.Type = v
				case "status":
					c.Status = manifest.ConditionStatus(v)
				case "reason":
					c.Reason = v
				case "message":
					c.Message = v
				case "lastTransitionTime":
					t, err := time.Parse(time.RFC3339Nano, v)
					if err != nil {
						return nil, false
					}
					c.LastTransitionTime = t
				default:
					return nil, false
				}
			}
			if p.Byte('}') {
				break
			}
			if !p.Byte(',') {
				return nil, false
			}
		}
		out = append(out, c)
		if p.Byte(']') {
			return out, p.End()
		}
		if !p.Byte(',') {
			return nil, false
		}
	}
}
