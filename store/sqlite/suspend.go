package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// suspendPath is the JSON path of the suspend annotation.
const suspendPath = `'$."` + manifest.AnnotationSuspend + `"'`

// notSuspended is true of resources a worker may claim: neither the API
// nor their annotation suspends them.
const notSuspended = `suspended_at IS NULL AND coalesce(json_extract(annotations, ` + suspendPath + `), '') <> 'true'`

// SuspendResource suspends or resumes a resource through the API.
func (s *Store) SuspendResource(ctx context.Context, id int64, suspend bool, note store.Suspension) (*store.Resource, error) {
	if err := note.Check(); suspend && err != nil {
		return nil, fmt.Errorf("suspend resource %d: %w", id, err)
	}
	var out *store.Resource
	err := s.withTx(ctx, func(s *Store) error {
		now := ms(clock())
		if suspend {
			r, err := scanResource(s.queryRow(ctx, `UPDATE resources SET
					suspended_at = coalesce(suspended_at, $1), suspended_reason = $3, suspended_by_identity = $4,
					updated_at = $1
				WHERE id = $2 RETURNING `+resourceCols, now, id, note.Reason, note.Identity))
			out = r
			return err
		}
		cur, err := scanResource(s.queryRow(ctx, `SELECT `+resourceCols+` FROM resources WHERE id = $1`, id))
		if err != nil {
			return err
		}
		if err := cur.CheckResume(); err != nil {
			return err
		}
		// A resource whose declaration is gone can only be resumed here, so
		// the annotation it was declared with goes too.
		r, err := scanResource(s.queryRow(ctx, `UPDATE resources SET suspended_at = NULL,
				suspended_reason = '', suspended_by_identity = '',
				annotations = CASE WHEN deletion_requested_at IS NOT NULL
					THEN json_remove(annotations, `+suspendPath+`) ELSE annotations END,
				annotation_suspended_at = CASE WHEN deletion_requested_at IS NOT NULL
					THEN NULL ELSE annotation_suspended_at END,
				updated_at = $1
			WHERE id = $2 RETURNING `+resourceCols, now, id))
		if err != nil {
			return err
		}
		out = r
		return s.Notify(ctx, store.TopicResources, r.Ref().String())
	})
	if err != nil {
		verb := "resume"
		if suspend {
			verb = "suspend"
		}
		return nil, mapErr(err, fmt.Sprintf("%s resource %d", verb, id))
	}
	return out, nil
}

// SuspendSource suspends or resumes a source for the API or the configuration.
func (s *Store) SuspendSource(ctx context.Context, name, by string, suspend bool, note store.Suspension) (*store.Source, error) {
	if _, err := store.SourceSuspension(name, "", by, suspend); errors.Is(err, store.ErrInvalid) {
		return nil, err
	}
	if err := note.Check(); suspend && err != nil {
		return nil, fmt.Errorf("suspend source %q: %w", name, err)
	}
	var out *store.Source
	err := s.withTx(ctx, func(s *Store) error {
		cur, err := scanSource(s.queryRow(ctx, `SELECT `+sourceCols+` FROM sources WHERE name = $1`, name))
		if err != nil {
			return err
		}
		change, err := store.SourceSuspension(name, cur.SuspendedBy, by, suspend)
		if err != nil {
			return err
		}
		// A suspension by the API of a source it suspends already records
		// the new note.
		if !change && !(suspend && by == cur.SuspendedBy && by == store.SuspendedByAPI) {
			out = cur
			return nil
		}
		now := ms(clock())
		q := `UPDATE sources SET suspended_at = NULL, suspended_by = '', suspended_reason = '', suspended_by_identity = '',
			updated_at = $1 WHERE name = $2 RETURNING ` + sourceCols
		args := []any{now, name}
		if suspend {
			q = `UPDATE sources SET suspended_at = coalesce(suspended_at, $1), suspended_by = $3,
					suspended_reason = $4, suspended_by_identity = $5, updated_at = $1
				WHERE name = $2 RETURNING ` + sourceCols
			args = append(args, by, note.Reason, note.Identity)
		}
		if out, err = scanSource(s.queryRow(ctx, q, args...)); err != nil {
			return err
		}
		return s.Notify(ctx, store.TopicSources, name)
	})
	if err != nil {
		verb := "resume"
		if suspend {
			verb = "suspend"
		}
		return nil, mapErr(err, fmt.Sprintf("%s source %q", verb, name))
	}
	return out, nil
}

// ResourceStates returns the state of up to limit resources, those not
// ready first.
func (s *Store) ResourceStates(ctx context.Context, limit int) ([]store.ResourceState, error) {
	if limit <= 0 {
		return nil, invalid("resource states: limit %d is not positive", limit)
	}
	rows, err := s.query(ctx, `SELECT kind, namespace, name, source_name, action, phase,
			phase = 'ready' AND observed_generation = generation AS ready, NOT (`+notSuspended+`)
		FROM resources ORDER BY ready, id LIMIT $1`, limit)
	if err != nil {
		return nil, mapErr(err, "resource states")
	}
	defer rows.Close()
	var out []store.ResourceState
	for rows.Next() {
		var st store.ResourceState
		if err := rows.Scan(&st.Kind, &st.Namespace, &st.Name, &st.Source, &st.Action, &st.Phase, &st.Ready, &st.Suspended); err != nil {
			return nil, mapErr(err, "resource states")
		}
		out = append(out, st)
	}
	return out, mapErr(rows.Err(), "resource states")
}
