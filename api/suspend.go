package api

import (
	"net/http"
	"strings"

	"github.com/no8s/no8s-agent/store"
)

// suspendResource and resumeResource answer the resource as written.
func (s *Server) suspendResource(w http.ResponseWriter, r *http.Request) error {
	return s.setResourceSuspended(w, r, true)
}

func (s *Server) resumeResource(w http.ResponseWriter, r *http.Request) error {
	return s.setResourceSuspended(w, r, false)
}

func (s *Server) setResourceSuspended(w http.ResponseWriter, r *http.Request, suspend bool) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.mayResource(r, VerbSuspend, id); err != nil {
		return err
	}
	note, err := suspension(r, suspend)
	if err != nil {
		return err
	}
	row, err := s.store.SuspendResource(r.Context(), id, suspend, note)
	if err != nil {
		return err
	}
	writeResource(w, http.StatusOK, row)
	return nil
}

// suspendBody is the optional body of a suspension: why.
type suspendBody struct {
	Reason string `json:"reason"`
}

// suspension reads what a suspension records: the reason its body gives,
// if any, and the caller's identity as the audit trail names it (the
// token's name). A resume takes no body and records nothing.
func suspension(r *http.Request, suspend bool) (store.Suspension, error) {
	if !suspend {
		return store.Suspension{}, nil
	}
	var body suspendBody
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		if err := decodeBody(r, &body, nil); err != nil {
			return store.Suspension{}, err
		}
	}
	note := store.Suspension{Reason: strings.TrimSpace(body.Reason), Identity: TokenName(r.Context())}
	if err := note.Check(); err != nil {
		return store.Suspension{}, errorf(http.StatusBadRequest, "%s", strings.TrimSuffix(err.Error(), ": "+store.ErrInvalid.Error()))
	}
	return note, nil
}

// suspendSource and resumeSource answer the source as written. A resume
// syncs the source at once when this agent serves it; other agents see it
// at their next interval.
func (s *Server) suspendSource(w http.ResponseWriter, r *http.Request) error {
	return s.setSourceSuspended(w, r, true)
}

func (s *Server) resumeSource(w http.ResponseWriter, r *http.Request) error {
	return s.setSourceSuspended(w, r, false)
}

func (s *Server) setSourceSuspended(w http.ResponseWriter, r *http.Request, suspend bool) error {
	name := r.PathValue("name")
	if err := maySource(r.Context(), VerbSuspend, name); err != nil {
		return err
	}
	if name == store.APISource {
		return errorf(http.StatusBadRequest, "source %q is the API itself: there is nothing to suspend", name)
	}
	note, err := suspension(r, suspend)
	if err != nil {
		return err
	}
	src, err := s.store.SuspendSource(r.Context(), name, store.SuspendedByAPI, suspend, note)
	if err != nil {
		return err
	}
	if !suspend && s.syncable(name) == nil {
		s.opts.Sources.Trigger(name, false)
	}
	writeJSON(w, http.StatusOK, NewSource(src))
	return nil
}

// refuseSuspendedSource answers 409 for a source that is suspended.
func (s *Server) refuseSuspendedSource(r *http.Request, name string) error {
	src, err := s.store.GetSource(r.Context(), name)
	if err != nil || src.SuspendedBy == "" {
		return nil // an unknown source is told by the caller's own checks
	}
	return errorf(http.StatusConflict, "source %q is suspended (by %s): resume it first", name, src.SuspendedBy)
}
