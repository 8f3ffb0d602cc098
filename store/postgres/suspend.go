package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// notSuspended is true of resources a worker may claim: neither the API
// nor their annotation suspends them (the generated column suspended says
// either).
const notSuspended = `NOT suspended`

// SuspendResource suspends or resumes a resource through the API.
func (s *Store) SuspendResource(ctx context.Context, id int64, suspend bool, note store.Suspension) (*store.Resource, error) {
	if err := note.Check(); suspend && err != nil {
		return nil, fmt.Errorf("suspend resource %d: %w", id, err)
	}
	var out *store.Resource
	err := s.withTx(ctx, func(s *Store) error {
		if suspend {
			r, err := scanResource(s.q.QueryRow(ctx, `UPDATE resources SET
					suspended_at = coalesce(suspended_at, now()), suspended_reason = $2, suspended_by_identity = $3,
					updated_at = now()
				WHERE id = $1 RETURNING `+resourceCols, id, note.Reason, note.Identity))
			out = r
			return err
		}
		cur, err := scanResource(s.q.QueryRow(ctx, `SELECT `+resourceCols+` FROM resources WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		if err := cur.CheckResume(); err != nil {
			return err
		}
		// A resource whose declaration is gone can only be resumed here, so
		// the annotation it was declared with goes too.
		r, err := scanResource(s.q.QueryRow(ctx, `UPDATE resources SET suspended_at = NULL,
				suspended_reason = '', suspended_by_identity = '',
				annotations = CASE WHEN deletion_requested_at IS NOT NULL
					THEN annotations - '`+manifest.AnnotationSuspend+`' ELSE annotations END,
				updated_at = now()
			WHERE id = $1 RETURNING `+resourceCols, id))
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
		cur, err := scanSource(s.q.QueryRow(ctx, `SELECT `+sourceCols+` FROM sources WHERE name = $1 FOR UPDATE`, name))
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
		q := `UPDATE sources SET suspended_at = NULL, suspended_by = '', suspended_reason = '', suspended_by_identity = '',
			updated_at = now() WHERE name = $1 RETURNING ` + sourceCols
		args := []any{name}
		if suspend {
			q = `UPDATE sources SET suspended_at = coalesce(suspended_at, now()), suspended_by = $2,
					suspended_reason = $3, suspended_by_identity = $4, updated_at = now()
				WHERE name = $1 RETURNING ` + sourceCols
			args = append(args, by, note.Reason, note.Identity)
		}
		if out, err = scanSource(s.q.QueryRow(ctx, q, args...)); err != nil {
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
	rows, err := s.q.Query(ctx, `SELECT kind, namespace, name, source_name, action, phase, ready, NOT (`+notSuspended+`)
		FROM (SELECT *, phase = 'ready' AND observed_generation = generation AS ready FROM resources) r
		ORDER BY ready, id LIMIT $1`, limit)
	if err != nil {
		return nil, mapErr(err, "resource states")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ResourceState, error) {
		var st store.ResourceState
		err := row.Scan(&st.Kind, &st.Namespace, &st.Name, &st.Source, &st.Action, &st.Phase, &st.Ready, &st.Suspended)
		return st, err
	})
	return out, mapErr(err, "resource states")
}
