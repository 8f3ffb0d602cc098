package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

const typeCols = `id, name, version, grp, description, action, drift_interval_ms, schema,
	source_name, source_path, source_revision, created_at, updated_at, deprecated, annotations, scope`

func scanType(row pgx.Row) (*store.ResourceType, error) {
	var (
		t                   store.ResourceType
		drift               int64
		schema, annotations []byte
	)
	err := row.Scan(&t.ID, &t.Name, &t.Version, &t.Group, &t.Description, &t.Action, &drift, &schema,
		&t.Source.Name, &t.Source.Path, &t.Source.Revision, &t.CreatedAt, &t.UpdatedAt, &t.Deprecated, &annotations, &t.Scope)
	if err != nil {
		return nil, err
	}
	if t.Annotations, err = decodeMap(annotations, "annotations"); err != nil {
		return nil, err
	}
	t.DriftInterval = fromMillis(drift)
	t.Schema = rawDoc(schema)
	t.CreatedAt, t.UpdatedAt = utc(t.CreatedAt), utc(t.UpdatedAt)
	return &t, nil
}

func typeWhat(name, version string) string {
	return fmt.Sprintf("resource type %s version %s", name, version)
}

// PutResourceType creates or updates the (Name, Version) row of t. See store.Store.
func (s *Store) PutResourceType(ctx context.Context, t *store.ResourceType) (*store.ResourceType, error) {
	if t == nil || t.Name == "" || t.Version == "" || t.Source.Name == "" {
		return nil, invalid("put resource type: name, version and source are required")
	}
	if t.DriftInterval < 0 {
		return nil, invalid("put %s: negative drift interval", typeWhat(t.Name, t.Version))
	}
	what := typeWhat(t.Name, t.Version)
	annotations, err := jsonValue(t.Annotations, len(t.Annotations) == 0, "{}")
	if err != nil {
		return nil, err
	}
	var out *store.ResourceType
	err = s.withTx(ctx, func(s *Store) error {
		// Serializes writers of one type name, so the group check below cannot
		// race with a concurrent write of another version.
		if _, err := s.q.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", lockClassTypeKey, t.Name); err != nil {
			return err
		}
		var otherGroup string
		err := s.q.QueryRow(ctx,
			`SELECT grp FROM resource_types WHERE name = $1 AND version <> $2 AND grp <> $3 LIMIT 1`,
			t.Name, t.Version, t.Group).Scan(&otherGroup)
		switch {
		case err == nil:
			return fmt.Errorf("%s: group %q differs from group %q of its other versions: %w",
				what, t.Group, otherGroup, store.ErrConflict)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var (
			id    int64
			owner store.SourceRef
		)
		err = s.q.QueryRow(ctx,
			`SELECT id, source_name, source_path, source_revision FROM resource_types
			WHERE name = $1 AND version = $2 FOR UPDATE`,
			t.Name, t.Version).Scan(&id, &owner.Name, &owner.Path, &owner.Revision)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case owner.Name != t.Source.Name:
			return &store.OwnerConflictError{What: what, Owner: owner}
		}
		if err := s.setTypeScope(ctx, t.Name, t.ScopeOf()); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if id == 0 {
			out, err = scanType(s.q.QueryRow(ctx, `INSERT INTO resource_types
				(name, version, grp, description, action, drift_interval_ms, schema, source_name, source_path, source_revision,
				deprecated, annotations, scope)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
				RETURNING `+typeCols,
				t.Name, t.Version, t.Group, t.Description, t.Action, millis(t.DriftInterval), jsonDoc(t.Schema),
				t.Source.Name, t.Source.Path, string(t.Source.Revision), t.Deprecated, annotations, string(t.ScopeOf())))
			return err
		}
		out, err = scanType(s.q.QueryRow(ctx, `UPDATE resource_types SET
				grp = $2, description = $3, action = $4, drift_interval_ms = $5, schema = $6,
				source_path = $7, source_revision = $8, deprecated = $9, annotations = $10, updated_at = now()
			WHERE id = $1
			RETURNING `+typeCols,
			id, t.Group, t.Description, t.Action, millis(t.DriftInterval), jsonDoc(t.Schema),
			t.Source.Path, string(t.Source.Revision), t.Deprecated, annotations))
		return err
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
// and dependencies on them, lose their namespace. The caller holds the
// type name's lock.
func (s *Store) setTypeScope(ctx context.Context, name string, scope manifest.Scope) error {
	var legacy, changed bool
	var from string
	if err := s.q.QueryRow(ctx, `SELECT coalesce(bool_or(scope = ''), false), coalesce(bool_or(scope NOT IN ('', $2)), false),
			coalesce(min(scope) FILTER (WHERE scope NOT IN ('', $2)), '')
		FROM resource_types WHERE name = $1`, name, string(scope)).Scan(&legacy, &changed, &from); err != nil {
		return err
	}
	if !legacy && !changed {
		return nil
	}
	var n int
	if err := s.q.QueryRow(ctx, `SELECT count(*) FROM resources WHERE kind = $1`, name).Scan(&n); err != nil {
		return err
	}
	if changed && n > 0 {
		return &store.ScopeChangeError{Type: name, From: manifest.Scope(from), To: scope, Resources: n}
	}
	if legacy && scope == manifest.ScopeCluster && n > 0 {
		var dup string
		err := s.q.QueryRow(ctx, `SELECT name FROM resources WHERE kind = $1 GROUP BY name HAVING count(*) > 1 ORDER BY name LIMIT 1`,
			name).Scan(&dup)
		switch {
		case err == nil:
			return fmt.Errorf("%s becomes cluster-scoped, but %s/%s is declared in several namespaces: keep one: %w",
				name, name, dup, store.ErrConflict)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		// The owners' rows change too: what a syncer remembers of a
		// source's resources holds while its row stays the same.
		if _, err := s.q.Exec(ctx, `UPDATE sources SET updated_at = clock_timestamp()
			WHERE name IN (SELECT source_name FROM resources WHERE kind = $1 AND namespace <> '')`, name); err != nil {
			return err
		}
		if _, err := s.q.Exec(ctx, `UPDATE resources SET namespace = '', updated_at = now() WHERE kind = $1 AND namespace <> ''`,
			name); err != nil {
			return err
		}
		if _, err := s.q.Exec(ctx, `UPDATE resources SET updated_at = now(), depends_on = (
				SELECT jsonb_agg(CASE WHEN d.e->>'kind' = $1 THEN d.e - 'namespace' ELSE d.e END ORDER BY d.i)
				FROM jsonb_array_elements(resources.depends_on) WITH ORDINALITY AS d(e, i))
			WHERE depends_on @> jsonb_build_array(jsonb_build_object('kind', $1::text)) AND depends_on <> '[]'::jsonb`,
			name); err != nil {
			return err
		}
	}
	_, err := s.q.Exec(ctx, `UPDATE resource_types SET scope = $2, updated_at = now() WHERE name = $1 AND scope <> $2`,
		name, string(scope))
	return err
}

// GetResourceType returns the type with the given ID, or ErrNotFound.
func (s *Store) GetResourceType(ctx context.Context, id int64) (*store.ResourceType, error) {
	t, err := scanType(s.q.QueryRow(ctx, `SELECT `+typeCols+` FROM resource_types WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("resource type %d", id))
	}
	return t, nil
}

// GetResourceTypeByName returns the type (name, version), or ErrNotFound.
func (s *Store) GetResourceTypeByName(ctx context.Context, name, version string) (*store.ResourceType, error) {
	t, err := scanType(s.q.QueryRow(ctx,
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
	sql := `SELECT ` + typeCols + ` FROM resource_types`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY name, version"
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(err, "list resource types")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ResourceType, error) { return scanType(row) })
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
		if err := s.q.QueryRow(ctx, `SELECT id FROM resource_types WHERE name = $1 AND version = $2 FOR UPDATE`,
			name, version).Scan(&id); err != nil {
			return err
		}
		// count(*) OVER () is the total before LIMIT: the message names a few users and counts all.
		rows, err := s.q.Query(ctx, `SELECT namespace, name, count(*) OVER () FROM resources
			WHERE kind = $1 AND type_version = $2 ORDER BY namespace, name LIMIT 3`, name, version)
		if err != nil {
			return err
		}
		var (
			users []string
			user  = manifest.ObjectRef{Kind: name}
			total int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&user.Namespace, &user.Name, &total}, func() error {
			users = append(users, user.String())
			return nil
		}); err != nil {
			return err
		}
		if total > 0 {
			more := ""
			if total > int64(len(users)) {
				more = fmt.Sprintf(" and %d more", total-int64(len(users)))
			}
			return fmt.Errorf("%s is used by %d resources (%s%s): %w",
				what, total, strings.Join(users, ", "), more, store.ErrInUse)
		}
		_, err = s.q.Exec(ctx, `DELETE FROM resource_types WHERE id = $1`, id)
		return err
	})
	return mapErr(err, "delete "+what)
}
