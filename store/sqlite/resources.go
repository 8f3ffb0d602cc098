package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
func scanResource(row scanner, extra ...any) (*store.Resource, error) {
	var (
		r                                    store.Resource
		labels, annotations, deps, conds     string
		spec, out, pluginConfig              []byte
		next, deletion, request, last, lease sql.NullInt64
		leased, suspended, annotated         sql.NullInt64
		created, updated                     int64
	)
	dest := []any{&r.ID, &r.Kind, &r.Namespace, &r.Group, &r.Version, &r.Name, &labels, &annotations, &spec, &r.SpecHash,
		&r.Action, &deps, &r.Origin.Document, &r.Origin.Line, &r.Source.Name, &r.Source.Path, &r.Source.Revision,
		&r.Generation, &r.ObservedGeneration, &r.Phase, &r.StatusMessage, &conds, &out, &r.RetryCount,
		&next, &deletion, &request, &last, &r.LeaseOwner, &lease, &r.LeaseToken, &created, &updated, &leased, &suspended, &pluginConfig, &annotated,
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
	if r.Conditions, err = decodeSlice[manifest.Condition](conds, "conditions"); err != nil {
		return nil, err
	}
	for i := range r.Conditions {
		r.Conditions[i].LastTransitionTime = utc(r.Conditions[i].LastTransitionTime)
	}
	r.Spec = rawDoc(spec)
	r.Outputs = rawDoc(out)
	r.PluginConfig = rawDoc(pluginConfig)
	r.Origin.File = r.Source.Path
	r.NextReconcileAt = fromNullMs(next)
	r.DeletionRequestedAt = fromNullMs(deletion)
	r.ReconcileRequestedAt = fromNullMs(request)
	r.LastReconcileTime = fromNullMs(last)
	r.LeaseExpiresAt = fromNullMs(lease)
	r.LeasedAt = fromNullMs(leased)
	r.SuspendedAt = fromNullMs(suspended)
	if r.SuspendAnnotated() && annotated.Valid {
		r.SuspendedAt = fromNullMs(annotated)
	}
	r.CreatedAt, r.UpdatedAt = fromMs(created), fromMs(updated)
	return &r, nil
}

// desired holds the encoded desired-state columns of a resource.
type desired struct {
	labels, annotations, deps string
	spec, pluginConfig        any
	path                      string
}

func encodeDesired(r *manifest.Resource, src store.SourceRef) (*desired, error) {
	if r == nil || r.Kind == "" || r.Name == "" || src.Name == "" {
		return nil, invalid("resource: kind, name and source are required")
	}
	if r.Namespace != "" && !manifest.ValidNamespace(r.Namespace) {
		return nil, invalid("%s: namespace %q is not a DNS-1123 label", resourceWhat(r.Ref()), r.Namespace)
	}
	if err := validDoc(r.Spec, "the spec of "+resourceWhat(r.Ref())); err != nil {
		return nil, err
	}
	var (
		d   = desired{spec: jsonDoc(r.Spec), pluginConfig: jsonDoc(r.PluginConfig)}
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

const insertResourceSQL = `INSERT INTO resources (kind, grp, type_version, name, labels, annotations, spec, spec_hash,
	action, depends_on, origin_document, origin_line, source_name, source_path, source_revision, meta_hash,
	created_at, updated_at, plugin_config, namespace, annotation_suspended_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17, $18, $19,
		CASE WHEN json_extract($6, ` + suspendPath + `) = 'true' THEN $17 END)`

// insertArgs are the arguments of insertResourceSQL.
func insertArgs(r *manifest.Resource, src store.SourceRef, d *desired, now int64) []any {
	return []any{r.Kind, r.Group, r.Version, r.Name, d.labels, d.annotations, d.spec, r.SpecHash, r.Action,
		d.deps, r.Origin.Document, r.Origin.Line, src.Name, d.path, string(src.Revision), r.MetaHash(), now, d.pluginConfig, r.Namespace}
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
		if out, err = scanResource(s.queryRow(ctx, insertResourceSQL+` RETURNING `+resourceCols,
			insertArgs(r, src, d, ms(clock()))...)); err != nil {
			return err
		}
		return s.Notify(ctx, store.TopicResources, r.Ref().String())
	})
	if err != nil {
		return nil, mapErr(err, "create "+resourceWhat(r.Ref()))
	}
	return out, nil
}

// applier applies resources of one source in a write transaction.
type applier struct {
	s   *Store
	src store.SourceRef
	now int64
	// full appliers return whole rows; lean ones, for batches, IDs and
	// generations only.
	full bool
}

// applyResult is what applier.apply did to one resource.
type applyResult struct {
	// r is the row as written, when the applier returns full rows.
	r       *store.Resource
	id, gen int64
	outcome store.ApplyOutcome
}

// applySelectSQL reads what apply compares of an existing resource.
const applySelectSQL = `SELECT id, generation, spec_hash, action, deletion_requested_at IS NOT NULL,
	source_name, source_path, source_revision, conditions, lease_expires_at IS NOT NULL AND lease_expires_at > $3
FROM resources WHERE kind = $1 AND namespace = $4 AND name = $2`

// applyUpdateSQL refreshes the desired state of an existing resource. $14
// says whether the generation goes up, $15 whether a deletion request is
// undone, $18 whether the new generation is pending (no worker holds it:
// a worker's completion makes it pending), with the message $19; $20 are
// the conditions of a new generation; $21 the plugin configuration.
const applyUpdateSQL = `UPDATE resources SET
	grp = $2, type_version = $3, labels = $4, annotations = $5, spec = $6, spec_hash = $7,
	-- When its annotation suspends it, since when (kept while it stays).
	annotation_suspended_at = CASE WHEN json_extract($5, ` + suspendPath + `) = 'true'
		THEN coalesce(annotation_suspended_at, $17) END,
	action = $8, depends_on = $9, origin_document = $10, origin_line = $11,
	source_path = $12, source_revision = $13,
	generation = generation + CASE WHEN $14 THEN 1 ELSE 0 END,
	phase = CASE WHEN $15 OR $18 THEN 'pending' ELSE phase END,
	status_message = CASE WHEN $18 THEN $19 ELSE status_message END,
	conditions = CASE WHEN $14 THEN $20 ELSE conditions END,
	deletion_requested_at = CASE WHEN $15 THEN NULL ELSE deletion_requested_at END,
	-- A new generation is due at once and its retries start afresh.
	-- A resource waiting on others looks again when its dependsOn may have changed.
	next_reconcile_at = CASE WHEN $14 THEN NULL
		WHEN waiting AND meta_hash <> $16 THEN $17 ELSE next_reconcile_at END,
	retry_count = CASE WHEN $14 THEN 0 ELSE retry_count END,
	meta_hash = $16, updated_at = $17, plugin_config = $21
WHERE id = $1`

// returning is what the applier's writes return.
func (a *applier) returning() string {
	if a.full {
		return ` RETURNING ` + resourceCols
	}
	return ` RETURNING id, generation`
}

// scan reads what an insert or update returned.
func (a *applier) scan(row *sql.Row) (applyResult, error) {
	if a.full {
		r, err := scanResource(row)
		if err != nil {
			return applyResult{}, err
		}
		return applyResult{r: r, id: r.ID, gen: r.Generation}, nil
	}
	var res applyResult
	err := row.Scan(&res.id, &res.gen)
	return res, err
}

// apply creates r or updates the resource of the same (Kind, Namespace, Name) owned
// by the applier's source. See store.Store.ApplyResource for the rules.
func (a *applier) apply(ctx context.Context, r *manifest.Resource, d *desired) (applyResult, error) {
	var (
		id, gen  int64
		hash     string
		action   string
		deleting bool
		owner    store.SourceRef
		stored   string
		leased   bool
	)
	err := a.s.queryRow(ctx, applySelectSQL, r.Kind, r.Name, a.now, r.Namespace).
		Scan(&id, &gen, &hash, &action, &deleting, &owner.Name, &owner.Path, &owner.Revision, &stored, &leased)
	if errors.Is(err, sql.ErrNoRows) {
		res, err := a.scan(a.s.queryRow(ctx, insertResourceSQL+a.returning(), insertArgs(r, a.src, d, a.now)...))
		res.outcome = store.Created
		return res, err
	}
	if err != nil {
		return applyResult{}, err
	}
	if owner.Name != a.src.Name {
		return applyResult{}, &store.OwnerConflictError{What: r.Ref().String(), Owner: owner}
	}
	bump := hash != r.SpecHash || action != r.Action || deleting
	conds := stored
	if bump {
		prev, err := decodeSlice[manifest.Condition](stored, "conditions")
		if err != nil {
			return applyResult{}, err
		}
		next := store.PendingConditions(prev, gen+1, fromMs(a.now))
		if conds, err = jsonValue(next, false, "[]"); err != nil {
			return applyResult{}, err
		}
	}
	res, err := a.scan(a.s.queryRow(ctx, applyUpdateSQL+a.returning(), id, r.Group, r.Version, d.labels,
		d.annotations, d.spec, r.SpecHash, r.Action, d.deps, r.Origin.Document, r.Origin.Line, d.path,
		string(a.src.Revision), bump, deleting, r.MetaHash(), a.now, bump && !leased, store.PendingMessage(gen+1), conds, d.pluginConfig))
	res.outcome = store.Unchanged
	if bump {
		res.outcome = store.Updated
	}
	return res, err
}

// ApplyResource creates r or updates the resource with the same (Kind, Namespace, Name)
// owned by src.Name. Its transaction is the only writer, so it reads and
// writes the row without racing another apply. See store.Store for the
// rules.
func (s *Store) ApplyResource(ctx context.Context, r *manifest.Resource, src store.SourceRef) (*store.Resource, store.ApplyOutcome, error) {
	d, err := encodeDesired(r, src)
	if err != nil {
		return nil, "", err
	}
	var res applyResult
	err = s.withTx(ctx, func(s *Store) error {
		a := &applier{s: s, src: src, now: ms(clock()), full: true}
		if res, err = a.apply(ctx, r, d); err != nil {
			return err
		}
		// Also when unchanged: new annotations may lift a suspension.
		return s.Notify(ctx, store.TopicResources, r.Ref().String())
	})
	if err != nil {
		return nil, "", mapErr(err, "apply "+resourceWhat(r.Ref()))
	}
	return res.r, res.outcome, nil
}

// GetResource returns the resource with the given ID, or ErrNotFound.
func (s *Store) GetResource(ctx context.Context, id int64) (*store.Resource, error) {
	r, err := scanResource(s.queryRow(ctx, `SELECT `+resourceCols+` FROM resources WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("resource %d", id))
	}
	return r, nil
}

// GetResourceByName returns the resource ref names, or ErrNotFound.
func (s *Store) GetResourceByName(ctx context.Context, ref manifest.ObjectRef) (*store.Resource, error) {
	r, err := scanResource(s.queryRow(ctx,
		`SELECT `+resourceCols+` FROM resources WHERE kind = $1 AND namespace = $2 AND name = $3`, ref.Kind, ref.Namespace, ref.Name))
	if err != nil {
		return nil, mapErr(err, resourceWhat(ref))
	}
	return r, nil
}

// refsIn is true of rows whose (kind, namespace, name) is among the JSON
// array of object references in parameter $%d.
const refsIn = `(kind, namespace, name) IN (SELECT json_extract(value, '$.kind'), coalesce(json_extract(value, '$.namespace'), ''),
	json_extract(value, '$.name') FROM json_each($%d))`

// ListResources returns the resources matching f, ordered by ID. A resource
// may carry more labels than asked.
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
		nss, err := jsonArray(f.Namespaces)
		if err != nil {
			return nil, err
		}
		add("namespace IN (SELECT value FROM json_each($%d))", nss)
	}
	if f.Phase != "" {
		add("phase = $%d", string(f.Phase))
	}
	if f.Actions != nil {
		actions, err := jsonArray(f.Actions)
		if err != nil {
			return nil, err
		}
		add("action IN (SELECT value FROM json_each($%d))", actions)
	} else if f.Action != "" {
		add("action = $%d", f.Action)
	}
	if f.Source != "" {
		add("source_name = $%d", f.Source)
	}
	for k, v := range f.Labels {
		args = append(args, k, v)
		where = append(where, fmt.Sprintf(
			"EXISTS (SELECT 1 FROM json_each(resources.labels) l WHERE l.key = $%d AND l.type = 'text' AND l.value = $%d)",
			len(args)-1, len(args)))
	}
	if f.After > 0 {
		add("id > $%d", f.After)
	}
	if f.IDs != nil {
		ids, err := jsonArray(f.IDs)
		if err != nil {
			return nil, err
		}
		add("id IN (SELECT value FROM json_each($%d))", ids)
	}
	if f.Refs != nil {
		refs, err := jsonArray(f.Refs)
		if err != nil {
			return nil, err
		}
		add(refsIn, refs)
	}
	if f.DependsOn != nil {
		args = append(args, f.DependsOn.Kind, f.DependsOn.Namespace, f.DependsOn.Name)
		where = append(where, fmt.Sprintf(
			"id IN (SELECT resource_id FROM resource_dependencies WHERE kind = $%d AND namespace = $%d AND name = $%d)",
			len(args)-2, len(args)-1, len(args)))
	}
	query := `SELECT ` + resourceCols + ` FROM resources`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		query += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	out, err := collect(ctx, s, func(row scanner) (*store.Resource, error) { return scanResource(row) }, query, args...)
	if err != nil {
		return nil, mapErr(err, "list resources")
	}
	return out, nil
}

// SetResourceStatus writes u, and only the status columns, to the resource:
// the desired state and generation are left as they are, so a status write
// never undoes an apply.
func (s *Store) SetResourceStatus(ctx context.Context, id int64, u store.StatusUpdate) (*store.Resource, error) {
	what := fmt.Sprintf("resource %d", id)
	if !u.Phase.Valid() {
		return nil, invalid("set status of %s: unknown phase %q", what, u.Phase)
	}
	if u.ObservedGeneration < 0 || u.RetryCount < 0 {
		return nil, invalid("set status of %s: negative observed generation or retry count", what)
	}
	if err := validDoc(u.Outputs, "set status of "+what+": outputs"); err != nil {
		return nil, err
	}
	conds, err := jsonValue(u.Conditions, len(u.Conditions) == 0, "[]")
	if err != nil {
		return nil, err
	}
	var r *store.Resource
	err = s.withTx(ctx, func(s *Store) error {
		r, err = scanResource(s.queryRow(ctx, `UPDATE resources SET
				phase = $2, status_message = $3, conditions = $4, observed_generation = $5, outputs = $6,
				retry_count = $7, next_reconcile_at = $8, last_reconcile_time = $9, updated_at = $10
			WHERE id = $1
			RETURNING `+resourceCols,
			id, string(u.Phase), u.Message, conds, u.ObservedGeneration, jsonDoc(u.Outputs),
			u.RetryCount, msPtr(u.NextReconcileAt), msPtr(u.LastReconcileTime), ms(clock())))
		return err
	})
	if err != nil {
		return nil, mapErr(err, "set status of "+what)
	}
	return r, nil
}

// requestDeletionSet marks rows for destruction. A first request is due at
// once; repeating it keeps the destroy's retry schedule and its first
// request time. $1 is the current time.
const requestDeletionSet = `UPDATE resources SET
	next_reconcile_at = CASE WHEN deletion_requested_at IS NULL THEN NULL ELSE next_reconcile_at END,
	retry_count = CASE WHEN deletion_requested_at IS NULL THEN 0 ELSE retry_count END,
	phase = 'deleting', deletion_requested_at = coalesce(deletion_requested_at, $1), updated_at = $1`

// RequestDeletion marks the resource for destruction: phase deleting, and
// the time of the first request kept.
func (s *Store) RequestDeletion(ctx context.Context, id int64) (*store.Resource, error) {
	var r *store.Resource
	err := s.withTx(ctx, func(s *Store) error {
		var err error
		r, err = scanResource(s.queryRow(ctx, requestDeletionSet+` WHERE id = $2 RETURNING `+resourceCols,
			ms(clock()), id))
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
	err := s.withTx(ctx, func(s *Store) error {
		res, err := s.exec(ctx, `DELETE FROM resources WHERE id = $1`, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = sql.ErrNoRows
		}
		return err
	})
	return mapErr(err, fmt.Sprintf("delete resource %d", id))
}
