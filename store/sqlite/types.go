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

const typeCols = `id, name, version, grp, description, action, drift_interval_ms, schema,
	source_name, source_path, source_revision, created_at, updated_at, deprecated, annotations, scope`

func scanType(row scanner) (*store.ResourceType, error) {
	var (
		t                store.ResourceType
		drift            int64
		schema           []byte
		annotations      string
		created, updated int64
	)
	err := row.Scan(&t.ID, &t.Name, &t.Version, &t.Group, &t.Description, &t.Action, &drift, &schema,
		&t.Source.Name, &t.Source.Path, &t.Source.Revision, &created, &updated, &t.Deprecated, &annotations, &t.Scope)
	if err != nil {
		return nil, err
	}
	if t.Annotations, err = decodeMap(annotations, "annotations"); err != nil {
		return nil, err
	}
	t.DriftInterval = fromMillis(drift)
	t.Schema = rawDoc(schema)
	t.CreatedAt, t.UpdatedAt = fromMs(created), fromMs(updated)
	return &t, nil
}

func typeWhat(name, version string) string {
	return fmt.Sprintf("resource type %s version %s", name, version)
}

// PutResourceType creates or updates the (Name, Version) row of t. See
// store.Store. Its transaction is the only writer, so the group check and
// the write cannot race with a write of another version.
func (s *Store) PutResourceType(ctx context.Context, t *store.ResourceType) (*store.ResourceType, error) {
	if t == nil || t.Name == "" || t.Version == "" || t.Source.Name == "" {
		return nil, invalid("put resource type: name, version and source are required")
	}
	what := typeWhat(t.Name, t.Version)
	if t.DriftInterval < 0 {
		return nil, invalid("put %s: negative drift interval", what)
	}
	if err := validDoc(t.Schema, "put "+what+": schema"); err != nil {
		return nil, err
	}
	annotations, err := jsonValue(t.Annotations, len(t.Annotations) == 0, "{}")
	if err != nil {
		return nil, err
	}
	var out *store.ResourceType
	err = s.withTx(ctx, func(s *Store) error {
		now := ms(clock())
		var otherGroup string
		err := s.queryRow(ctx,
			`SELECT grp FROM resource_types WHERE name = $1 AND version <> $2 AND grp <> $3 LIMIT 1`,
			t.Name, t.Version, t.Group).Scan(&otherGroup)
		switch {
		case err == nil:
			return fmt.Errorf("%s: group %q differs from group %q of its other versions: %w",
				what, t.Group, otherGroup, store.ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var (
			id                   int64
			owner                store.SourceRef
			insertErr, updateErr error
		)
		err = s.queryRow(ctx,
			`SELECT id, source_name, source_path, source_revision FROM resource_types WHERE name = $1 AND version = $2`,
			t.Name, t.Version).Scan(&id, &owner.Name, &owner.Path, &owner.Revision)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case owner.Name != t.Source.Name:
			return &store.OwnerConflictError{What: what, Owner: owner}
		}
		if err := s.setTypeScope(ctx, t.Name, t.ScopeOf(), now); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if id == 0 {
			out, insertErr = scanType(s.queryRow(ctx, `INSERT INTO resource_types
				(name, version, grp, description, action, drift_interval_ms, schema, source_name, source_path,
				source_revision, created_at, updated_at, deprecated, annotations, scope)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, $14)
				RETURNING `+typeCols,
				t.Name, t.Version, t.Group, t.Description, t.Action, millis(t.DriftInterval), jsonDoc(t.Schema),
				t.Source.Name, t.Source.Path, string(t.Source.Revision), now, t.Deprecated, annotations, string(t.ScopeOf())))
			return insertErr
		}
		out, updateErr = scanType(s.queryRow(ctx, `UPDATE resource_types SET
				grp = $2, description = $3, action = $4, drift_interval_ms = $5, schema = $6,
				source_path = $7, source_revision = $8, updated_at = $9, deprecated = $10, annotations = $11
			WHERE id = $1
			RETURNING `+typeCols,
			id, t.Group, t.Description, t.Action, millis(t.DriftInterval), jsonDoc(t.Schema),
			t.Source.Path, string(t.Source.Revision), now, t.Deprecated, annotations))
		return updateErr
	})
	if err != nil {
		return nil, mapErr(err, "put "+what)
	}
	return out, nil
}

// setTypeScope gives every version of the type name the scope scope, as
// store.Store.PutResourceType says: refused while resources of it exist
// if that changes a scope written before; and when it is ScopeCluster
// over rows stored before types had a scope, the resources of the name,
// and dependencies on them, lose their namespace.
func (s *Store) setTypeScope(ctx context.Context, name string, scope manifest.Scope, now int64) error {
	scopes, err := collect(ctx, s, func(row scanner) (string, error) {
		var v string
		return v, row.Scan(&v)
	}, `SELECT DISTINCT scope FROM resource_types WHERE name = $1 ORDER BY scope`, name)
	if err != nil {
		return err
	}
	legacy, changed := false, false
	var from manifest.Scope
	for _, v := range scopes {
		switch {
		case v == "":
			legacy = true
		case manifest.Scope(v) != scope:
			changed, from = true, manifest.Scope(v)
		}
	}
	if !legacy && !changed {
		return nil
	}
	var n int
	if err := s.queryRow(ctx, `SELECT count(*) FROM resources WHERE kind = $1`, name).Scan(&n); err != nil {
		return err
	}
	if changed && n > 0 {
		return &store.ScopeChangeError{Type: name, From: from, To: scope, Resources: n}
	}
	if legacy && scope == manifest.ScopeCluster && n > 0 {
		var dup string
		err := s.queryRow(ctx, `SELECT name FROM resources WHERE kind = $1 GROUP BY name HAVING count(*) > 1 ORDER BY name LIMIT 1`,
			name).Scan(&dup)
		switch {
		case err == nil:
			return fmt.Errorf("%s becomes cluster-scoped, but %s/%s is declared in several namespaces: keep one: %w",
				name, name, dup, store.ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		// The owners' rows change too: what a syncer remembers of a
		// source's resources holds while its row stays the same.
		if _, err := s.exec(ctx, `UPDATE sources SET updated_at = $2
			WHERE name IN (SELECT source_name FROM resources WHERE kind = $1 AND namespace <> '')`, name, now); err != nil {
			return err
		}
		if _, err := s.exec(ctx, `UPDATE resources SET namespace = '', updated_at = $2 WHERE kind = $1 AND namespace <> ''`,
			name, now); err != nil {
			return err
		}
		if _, err := s.exec(ctx, `UPDATE resources SET updated_at = $2, depends_on = (
				SELECT json_group_array(CASE WHEN json_extract(d.value, '$.kind') = $1
					THEN json_object('kind', $1, 'name', json_extract(d.value, '$.name')) ELSE json(d.value) END)
				FROM json_each(resources.depends_on) d)
			WHERE id IN (SELECT resource_id FROM resource_dependencies WHERE kind = $1 AND namespace <> '')`,
			name, now); err != nil {
			return err
		}
	}
	_, err = s.exec(ctx, `UPDATE resource_types SET scope = $2, updated_at = $3 WHERE name = $1 AND scope <> $2`,
		name, string(scope), now)
	return err
}

// GetResourceType returns the type with the given ID, or ErrNotFound.
func (s *Store) GetResourceType(ctx context.Context, id int64) (*store.ResourceType, error) {
	t, err := scanType(s.queryRow(ctx, `SELECT `+typeCols+` FROM resource_types WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("resource type %d", id))
	}
	return t, nil
}

// GetResourceTypeByName returns the type (name, version), or ErrNotFound.
func (s *Store) GetResourceTypeByName(ctx context.Context, name, version string) (*store.ResourceType, error) {
	t, err := scanType(s.queryRow(ctx,
		`SELECT `+typeCols+` FROM resource_types WHERE name = $1 AND version = $2`, name, version))
	if err != nil {
		return nil, mapErr(err, typeWhat(name, version))
	}
	return t, nil
}

// ListResourceTypes returns the types matching f, ordered by name, then version.
func (s *Store) ListResourceTypes(ctx context.Context, f store.TypeFilter) ([]*store.ResourceType, error) {
	var (
		where []string
		args  []any
	)
	if f.Name != "" {
		args = append(args, f.Name)
		where = append(where, fmt.Sprintf("name = $%d", len(args)))
	}
	if f.Source != "" {
		args = append(args, f.Source)
		where = append(where, fmt.Sprintf("source_name = $%d", len(args)))
	}
	query := `SELECT ` + typeCols + ` FROM resource_types`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY name, version"
	out, err := collect(ctx, s, scanType, query, args...)
	if err != nil {
		return nil, mapErr(err, "list resource types")
	}
	return out, nil
}

// DeleteResourceType removes the type (name, version): ErrNotFound when it
// does not exist, ErrInUse while resources of that kind and version exist.
func (s *Store) DeleteResourceType(ctx context.Context, name, version string) error {
	what := typeWhat(name, version)
	err := s.withTx(ctx, func(s *Store) error {
		var id int64
		if err := s.queryRow(ctx, `SELECT id FROM resource_types WHERE name = $1 AND version = $2`,
			name, version).Scan(&id); err != nil {
			return err
		}
		var total int64
		if err := s.queryRow(ctx, `SELECT count(*) FROM resources WHERE kind = $1 AND type_version = $2`,
			name, version).Scan(&total); err != nil {
			return err
		}
		if total > 0 {
			// The message names a few users and counts all.
			users, err := collect(ctx, s, func(row scanner) (string, error) {
				ref := manifest.ObjectRef{Kind: name}
				err := row.Scan(&ref.Namespace, &ref.Name)
				return ref.String(), err
			}, `SELECT namespace, name FROM resources WHERE kind = $1 AND type_version = $2 ORDER BY namespace, name LIMIT 3`, name, version)
			if err != nil {
				return err
			}
			more := ""
			if total > int64(len(users)) {
				more = fmt.Sprintf(" and %d more", total-int64(len(users)))
			}
			return fmt.Errorf("%s is used by %d resources (%s%s): %w",
				what, total, strings.Join(users, ", "), more, store.ErrInUse)
		}
		_, err := s.exec(ctx, `DELETE FROM resource_types WHERE id = $1`, id)
		return err
	})
	return mapErr(err, "delete "+what)
}

// collect runs query and scans every row with scan.
func collect[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
