package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// ErrorBody is every error response: a message people read, and the
// individual problems when there are several or they point at fields.
// Detail repeats the message under the predecessor's name, so that its
// clients, which read "detail", show it too.
type ErrorBody struct {
	Error   string   `json:"error"`
	Details []Detail `json:"details"`
	Detail  string   `json:"detail"`
}

// newErrorBody returns the body of an error whose message is msg.
func newErrorBody(msg string, details []Detail) ErrorBody {
	if details == nil {
		details = []Detail{}
	}
	return ErrorBody{Error: msg, Details: details, Detail: msg}
}

// Detail is one problem with a request: the request field it is about (as
// a dotted path, e.g. spec.storage_gb, and as a JSON pointer) and what is
// wrong with it. File and Line are set for problems of a source's manifests.
type Detail struct {
	Field   string `json:"field,omitempty"`
	Pointer string `json:"pointer,omitempty"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// Error is an error with the HTTP status to answer it with. Handlers return
// it for problems they find themselves; errors from the store and sync are
// classified by statusOf.
type Error struct {
	Status  int
	Message string
	Details []Detail
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// statuses maps domain errors to HTTP statuses, in one place. The first
// match wins.
var statuses = []struct {
	target error
	status int
}{
	{store.ErrNotFound, http.StatusNotFound},
	{store.ErrConflict, http.StatusConflict},
	{store.ErrInUse, http.StatusConflict},
	{store.ErrInvalid, http.StatusBadRequest},
	{store.ErrUnavailable, http.StatusServiceUnavailable},
	{context.DeadlineExceeded, http.StatusServiceUnavailable},
}

// retryAfter is the Retry-After of a 503, in seconds: long enough not to
// hammer a store that is restarting, short enough to notice it is back.
const retryAfter = "5"

// syncStatuses maps the reasons a sync refuses a write.
var syncStatuses = map[string]int{
	sync.ReasonValidationFailed: http.StatusBadRequest,
	sync.ReasonConflict:         http.StatusConflict,
	sync.ReasonTypeInUse:        http.StatusConflict,
	sync.ReasonNotApprovable:    http.StatusConflict,
	// As Kubernetes answers a refusal by an admission webhook; a hook that
	// could not answer is a failed upstream.
	sync.ReasonAdmissionDenied: http.StatusForbidden,
	sync.ReasonAdmissionFailed: http.StatusBadGateway,
}

// statusOf classifies err. Unknown errors are 500s, whose message is not
// shown to clients (it may name internals) but logged.
func statusOf(err error) (int, bool) {
	var apiErr *Error
	var maxErr *http.MaxBytesError
	var serr *sync.Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr.Status, true
	case errors.As(err, &maxErr):
		return http.StatusRequestEntityTooLarge, true
	case errors.Is(err, errBodyTimeout):
		return http.StatusRequestTimeout, true
	case errors.As(err, &serr):
		if st, ok := syncStatuses[serr.Reason]; ok {
			return st, true
		}
		return http.StatusUnprocessableEntity, true
	}
	for _, s := range statuses {
		if errors.Is(err, s.target) {
			return s.status, true
		}
	}
	return http.StatusInternalServerError, false
}

// writeError answers with err as JSON. fields rewrites the pointers of
// manifest problems into the request's own field names.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error, fields fieldMapper) {
	status, known := statusOf(err)
	body := ErrorBody{Error: err.Error(), Details: []Detail{}}
	var apiErr *Error
	var maxErr *http.MaxBytesError
	var serr *sync.Error
	switch {
	case !known:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		body.Error = "internal error; the agent's log has the details"
	case errors.As(err, &apiErr):
		body.Error = apiErr.Message
		if apiErr.Details != nil {
			body.Details = apiErr.Details
		}
	case errors.As(err, &maxErr):
		body.Error = fmt.Sprintf("request body is larger than %d bytes", maxErr.Limit)
	case errors.Is(err, errBodyTimeout):
		body.Error = err.Error()
	case errors.Is(err, store.ErrUnavailable):
		// The error may name the database's host and user: logged, not shown.
		s.log.Warn("store unavailable", "method", r.Method, "path", r.URL.Path, "error", err)
		body.Error = "the store is unavailable; retry later"
	case errors.As(err, &serr):
		body.Error = serr.Message
		for _, p := range serr.Problems {
			body.Details = append(body.Details, detailOf(p, fields))
		}
		if len(body.Details) > 0 {
			body.Error = body.Details[0].Message
			if len(body.Details) > 1 {
				body.Error = fmt.Sprintf("%s (and %d more problems)", body.Error, len(body.Details)-1)
			}
		}
	}
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="no8s"`)
	}
	writeJSON(w, status, newErrorBody(body.Error, body.Details))
}

// fieldMapper turns a manifest document's JSON pointer into the pointer of
// the request field it came from; nil keeps pointers as they are.
type fieldMapper func(pointer string) string

// detailOf describes a manifest problem in the request's terms.
func detailOf(p manifest.Problem, fields fieldMapper) Detail {
	d := Detail{Pointer: p.Pointer, Message: p.Message}
	if fields != nil && p.Pointer != "" {
		d.Pointer = fields(p.Pointer)
		// Messages start with the manifest's field path; name the request's.
		if old := manifest.FieldPath(p.Pointer) + ": "; strings.HasPrefix(d.Message, old) {
			d.Message = manifest.FieldPath(d.Pointer) + ": " + strings.TrimPrefix(d.Message, old)
		}
	} else {
		d.File, d.Line = p.File, p.Line
	}
	d.Field = manifest.FieldPath(d.Pointer)
	return d
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		slog.Debug("writing a response failed", "error", err)
	}
}
