package postgres

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// lockClassSource is the advisory lock class of per-source sync locks.
const lockClassSource int32 = lockClass + 2

// bulkRow is one resource of ApplyResources as json_to_recordset reads it.
type bulkRow struct {
	Kind        string               `json:"kind"`
	Namespace   string               `json:"namespace"`
	Grp         string               `json:"grp"`
	Version     string               `json:"type_version"`
	Name        string               `json:"name"`
	Labels      map[string]string    `json:"labels"`
	Annotations map[string]string    `json:"annotations"`
	Spec        json.RawMessage      `json:"spec"`
	SpecHash    string               `json:"spec_hash"`
	Action      string               `json:"action"`
	DependsOn   []manifest.ObjectRef `json:"depends_on"`
	Document    int                  `json:"origin_document"`
	Line        int                  `json:"origin_line"`
	Path        string               `json:"source_path"`
	MetaHash    string               `json:"meta_hash"`
	// PluginConfig is omitted when nil, so that json_to_recordset reads NULL.
	PluginConfig json.RawMessage `json:"plugin_config,omitempty"`
}

// ApplyResources upserts many resources in one statement: rows are read
// from one JSON parameter, existing rows are locked first so that every
// outcome is computed against the latest state, and rows owned by another
// source are left alone and reported.
func (s *Store) ApplyResources(ctx context.Context, rs []*manifest.Resource, src store.SourceRef) ([]store.Applied, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if src.Name == "" {
		return nil, invalid("apply resources: source is required")
	}
	rows := make([]bulkRow, len(rs))
	for i, r := range rs {
		if r == nil || r.Kind == "" || r.Name == "" {
			return nil, invalid("apply resources: resource %d has no kind or name", i)
		}
		path := r.Origin.File
		if src.Path != "" {
			path = src.Path
		}
		spec := r.Spec
		if len(spec) == 0 {
			spec = json.RawMessage("{}")
		}
		labels, annotations, deps := r.Labels, r.Annotations, r.DependsOn
		if labels == nil {
			labels = map[string]string{}
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		if deps == nil {
			deps = []manifest.ObjectRef{}
		}
		if r.Namespace != "" && !manifest.ValidNamespace(r.Namespace) {
			return nil, invalid("apply resources: %s: namespace %q is not a DNS-1123 label", r.Ref(), r.Namespace)
		}
		rows[i] = bulkRow{Kind: r.Kind, Namespace: r.Namespace, Grp: r.Group, Version: r.Version, Name: r.Name, Labels: labels,
			Annotations: annotations, Spec: spec, SpecHash: r.SpecHash, Action: r.Action, DependsOn: deps,
			Document: r.Origin.Document, Line: r.Origin.Line, Path: path, MetaHash: r.MetaHash(), PluginConfig: r.PluginConfig}
	}
	input, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("apply resources: encode: %w", err)
	}
	kinds := make([]string, len(rs))
	namespaces := make([]string, len(rs))
	names := make([]string, len(rs))
	for i, r := range rs {
		kinds[i], namespaces[i], names[i] = r.Kind, r.Namespace, r.Name
	}
	type previous struct {
		gen   int64
		owner store.SourceRef
	}
	old := make(map[manifest.ObjectRef]previous, len(rs))
	applied := make(map[manifest.ObjectRef]store.Applied, len(rs))
	err = s.withTx(ctx, func(s *Store) error {
		// Lock the existing rows in (kind, namespace, name) order before writing, so
		// that agents applying overlapping sets queue up instead of
		// deadlocking, and read their generations to tell the outcomes.
		// (One statement cannot do both: FOR UPDATE skips rows its own
		// upsert already changed.)
		rows, err := s.q.Query(ctx, `SELECT r.kind, r.namespace, r.name, r.generation, r.source_name, r.source_path, r.source_revision
			FROM resources r JOIN unnest($1::text[], $2::text[], $3::text[]) AS w(kind, namespace, name)
				ON r.kind = w.kind AND r.namespace = w.namespace AND r.name = w.name
			ORDER BY r.kind, r.namespace, r.name FOR UPDATE OF r`, kinds, namespaces, names)
		if err != nil {
			return err
		}
		for rows.Next() {
			var ref manifest.ObjectRef
			var p previous
			if err := rows.Scan(&ref.Kind, &ref.Namespace, &ref.Name, &p.gen, &p.owner.Name, &p.owner.Path, &p.owner.Revision); err != nil {
				rows.Close()
				return err
			}
			old[ref] = p
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range rs {
			if p, ok := old[r.Ref()]; ok && p.owner.Name != src.Name {
				return &store.OwnerConflictError{What: r.Ref().String(), Owner: p.owner}
			}
		}
		rows, err = s.q.Query(ctx, `
WITH input AS (
	SELECT * FROM json_to_recordset($1::json) AS x(kind text, namespace text, grp text, type_version text, name text,
		labels jsonb, annotations jsonb, spec json, spec_hash text, action text, depends_on jsonb,
		origin_document int, origin_line int, source_path text, meta_hash text, plugin_config json)
)
INSERT INTO resources (kind, namespace, grp, type_version, name, labels, annotations, spec, spec_hash, action,
	depends_on, origin_document, origin_line, source_name, source_path, source_revision, meta_hash, plugin_config)
SELECT kind, namespace, grp, type_version, name, labels, annotations, spec, spec_hash, action,
	depends_on, origin_document, origin_line, $2, source_path, $3, meta_hash, plugin_config
FROM input ORDER BY kind, namespace, name
ON CONFLICT (kind, namespace, name) DO UPDATE SET
	grp = EXCLUDED.grp, type_version = EXCLUDED.type_version, labels = EXCLUDED.labels,
	annotations = EXCLUDED.annotations, spec = EXCLUDED.spec, spec_hash = EXCLUDED.spec_hash,
	action = EXCLUDED.action, depends_on = EXCLUDED.depends_on,
	origin_document = EXCLUDED.origin_document, origin_line = EXCLUDED.origin_line,
	source_path = EXCLUDED.source_path, source_revision = EXCLUDED.source_revision, meta_hash = EXCLUDED.meta_hash,
	plugin_config = EXCLUDED.plugin_config,
	generation = resources.generation + CASE WHEN resources.spec_hash <> EXCLUDED.spec_hash
		OR resources.action <> EXCLUDED.action OR resources.deletion_requested_at IS NOT NULL THEN 1 ELSE 0 END,
	-- A new generation is pending until reconciled, unless a worker holds
	-- it: its completion makes it pending then.
	phase = CASE WHEN resources.deletion_requested_at IS NOT NULL THEN 'pending'
		WHEN (`+bulkBump+`) AND (resources.lease_expires_at IS NULL OR resources.lease_expires_at <= now()) THEN 'pending'
		ELSE resources.phase END,
	status_message = CASE WHEN (`+bulkBump+`) AND (resources.lease_expires_at IS NULL OR resources.lease_expires_at <= now())
		THEN 'generation ' || (resources.generation + 1) || ' is waiting to be reconciled' ELSE resources.status_message END,
	conditions = CASE WHEN `+bulkBump+` THEN `+pendingConditions("resources.conditions", "resources.generation + 1")+`
		ELSE resources.conditions END,
	deletion_requested_at = NULL,
	-- A new generation is due at once, whatever retry or drift schedule the
	-- previous one had, and its retries start from the first backoff step.
	-- A resource waiting on others looks again when its dependsOn may have changed.
	next_reconcile_at = CASE WHEN resources.spec_hash <> EXCLUDED.spec_hash OR resources.action <> EXCLUDED.action
		OR resources.deletion_requested_at IS NOT NULL THEN NULL
		WHEN resources.waiting AND resources.meta_hash <> EXCLUDED.meta_hash THEN now()
		ELSE resources.next_reconcile_at END,
	retry_count = CASE WHEN resources.spec_hash <> EXCLUDED.spec_hash OR resources.action <> EXCLUDED.action
		OR resources.deletion_requested_at IS NOT NULL THEN 0 ELSE resources.retry_count END,
	updated_at = now()
-- A row another source created since the lock above is left alone.
WHERE resources.source_name = EXCLUDED.source_name
RETURNING id, kind, namespace, name, generation`, input, src.Name, string(src.Revision))
		if err != nil {
			return err
		}
		for rows.Next() {
			var ref manifest.ObjectRef
			var a store.Applied
			if err := rows.Scan(&a.ID, &ref.Kind, &ref.Namespace, &ref.Name, &a.Generation); err != nil {
				rows.Close()
				return err
			}
			switch p, ok := old[ref]; {
			case !ok:
				a.Outcome = store.Created
			case p.gen != a.Generation:
				a.Outcome = store.Updated
			default:
				a.Outcome = store.Unchanged
			}
			applied[ref] = a
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range rs {
			if _, ok := applied[r.Ref()]; !ok {
				owners, err := s.Owners(ctx, []manifest.ObjectRef{r.Ref()})
				if err != nil {
					return err
				}
				return &store.OwnerConflictError{What: r.Ref().String(), Owner: owners[r.Ref()]}
			}
		}
		// Workers look at the queue after any write, not only a new
		// generation: new annotations may lift a suspension.
		if len(applied) > 0 {
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
	out := make([]store.Applied, len(rs))
	for i, r := range rs {
		out[i] = applied[r.Ref()]
	}
	return out, nil
}

// RequestDeletions marks resources for destruction.
func (s *Store) RequestDeletions(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	// A first request is due at once; repeating it keeps the destroy's retry schedule.
	err := s.withTx(ctx, func(s *Store) error {
		tag, err := s.q.Exec(ctx, `UPDATE resources SET
		next_reconcile_at = CASE WHEN deletion_requested_at IS NULL THEN NULL ELSE next_reconcile_at END,
		retry_count = CASE WHEN deletion_requested_at IS NULL THEN 0 ELSE retry_count END,
		deletion_requested_at = COALESCE(deletion_requested_at, now()),
		phase = 'deleting', updated_at = now() WHERE id = ANY($1)`, ids)
		if err != nil || tag.RowsAffected() == 0 {
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
	_, err := s.q.Exec(ctx, `DELETE FROM resources WHERE id = ANY($1)`, ids)
	return mapErr(err, "delete resources")
}

// Owners returns the owners of the refs that exist.
func (s *Store) Owners(ctx context.Context, refs []manifest.ObjectRef) (map[manifest.ObjectRef]store.SourceRef, error) {
	out := map[manifest.ObjectRef]store.SourceRef{}
	if len(refs) == 0 {
		return out, nil
	}
	kinds := make([]string, len(refs))
	namespaces := make([]string, len(refs))
	names := make([]string, len(refs))
	for i, r := range refs {
		kinds[i], namespaces[i], names[i] = r.Kind, r.Namespace, r.Name
	}
	rows, err := s.q.Query(ctx, `SELECT r.kind, r.namespace, r.name, r.source_name, r.source_path, r.source_revision
		FROM resources r JOIN unnest($1::text[], $2::text[], $3::text[]) AS w(kind, namespace, name)
			ON r.kind = w.kind AND r.namespace = w.namespace AND r.name = w.name`,
		kinds, namespaces, names)
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

// LockSource takes the source's advisory lock until the transaction ends.
func (s *Store) LockSource(ctx context.Context, name string) error {
	if s.tx == nil {
		return invalid("lock source %q: only inside a transaction", name)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	_, err := s.q.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClassSource, int32(h.Sum32()))
	return mapErr(err, "lock source "+name)
}

// Notify sends a PostgreSQL notification, which a transaction delivers on commit.
func (s *Store) Notify(ctx context.Context, topic, payload string) error {
	if topic == "" {
		return invalid("notify: topic is required")
	}
	_, err := s.q.Exec(ctx, `SELECT pg_notify($1, $2)`, topic, payload)
	return mapErr(err, "notify "+topic)
}

// ListResourceDigests returns what planning needs of a source's resources,
// in id order.
//
// Every sync reads all of a source's rows here, so it is decoded from the
// rows' raw values rather than through Scan, whose per-column plans cost
// more than the values, and sorted here rather than by the server. Kinds
// repeat on every row and are shared.
func (s *Store) ListResourceDigests(ctx context.Context, source string) ([]store.ResourceDigest, error) {
	rows, err := s.q.Query(ctx, `SELECT id, kind, name, spec_hash, action, meta_hash, generation,
			deletion_requested_at IS NOT NULL, annotations->>'`+manifest.AnnotationPrune+`' = 'disabled', source_path,
			namespace
		FROM resources WHERE source_name = $1`, source)
	if err != nil {
		return nil, mapErr(err, "list resources of "+source)
	}
	defer rows.Close()
	var out []store.ResourceDigest
	var dec digestDecoder
	for rows.Next() {
		d, err := dec.decode(rows.FieldDescriptions(), rows.RawValues())
		if err != nil {
			return nil, mapErr(err, "list resources of "+source)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "list resources of "+source)
	}
	slices.SortFunc(out, func(a, b store.ResourceDigest) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// digestDecoder decodes ListResourceDigests' rows from their wire form, text
// or binary, and shares equal kinds, namespaces and actions between rows.
type digestDecoder struct {
	shared map[string]string
	buf    []byte
}

// decode decodes one row of ListResourceDigests' query.
func (d *digestDecoder) decode(fields []pgconn.FieldDescription, vals [][]byte) (store.ResourceDigest, error) {
	if len(vals) != 11 || len(fields) != 11 {
		return store.ResourceDigest{}, fmt.Errorf("resource digest: %d columns, want 11", len(vals))
	}
	var r store.ResourceDigest
	var err error
	if r.ID, err = wireInt8(fields[0], vals[0]); err != nil {
		return r, fmt.Errorf("resource digest id: %w", err)
	}
	r.Kind = d.share(vals[1])
	r.Action = d.share(vals[4])
	r.Namespace = d.share(vals[10])
	// The row's own strings are cut from one allocation.
	d.buf = append(append(append(append(d.buf[:0], vals[2]...), vals[3]...), vals[5]...), vals[9]...)
	all := string(d.buf)
	n1, n2, n3 := len(vals[2]), len(vals[2])+len(vals[3]), len(vals[2])+len(vals[3])+len(vals[5])
	r.Name, r.SpecHash, r.MetaHash, r.Path = all[:n1], all[n1:n2], all[n2:n3], all[n3:]
	if r.Generation, err = wireInt8(fields[6], vals[6]); err != nil {
		return r, fmt.Errorf("resource digest generation: %w", err)
	}
	r.Deleting = wireBool(fields[7], vals[7])
	r.PruneDisabled = wireBool(fields[8], vals[8])
	return r, nil
}

// share returns b as a string, the same string for equal values.
func (d *digestDecoder) share(b []byte) string {
	if s, ok := d.shared[string(b)]; ok {
		return s
	}
	if d.shared == nil {
		d.shared = make(map[string]string)
	}
	s := string(b)
	d.shared[s] = s
	return s
}

// wireInt8 decodes a bigint sent in text or binary format.
func wireInt8(f pgconn.FieldDescription, b []byte) (int64, error) {
	if b == nil {
		return 0, errors.New("null")
	}
	if f.Format == pgx.BinaryFormatCode {
		if len(b) != 8 {
			return 0, fmt.Errorf("%d bytes, want 8", len(b))
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// wireBool decodes a boolean sent in text or binary format; NULL is false.
func wireBool(f pgconn.FieldDescription, b []byte) bool {
	if len(b) == 0 {
		return false
	}
	if f.Format == pgx.BinaryFormatCode {
		return b[0] != 0
	}
	return b[0] == 't'
}

// bulkBump is true, in ApplyResources' upsert, of a row that gets a new
// generation.
const bulkBump = `resources.spec_hash <> EXCLUDED.spec_hash OR resources.action <> EXCLUDED.action
	OR resources.deletion_requested_at IS NOT NULL`
