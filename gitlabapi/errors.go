package gitlabapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// ConfigError is a failure that retrying cannot mend: a token GitLab does not
// accept, a token without the scope or role a call needs, a project that
// does not exist or that the token cannot see, a request GitLab refuses as
// invalid (a ref that does not exist, pipeline variables a project forbids).
type ConfigError struct {
	// Status is the HTTP status of GitLab's answer.
	Status int
	// Err is the client's error: an *gitlab.ErrorResponse, or
	// gitlab.ErrNotFound for a 404.
	Err error
	// Hint says what to fix; when empty, Error gives generic advice for
	// the status.
	Hint string
}

// Error implements error.
func (e *ConfigError) Error() string {
	hint := e.Hint
	if hint == "" {
		hint = statusHint(e.Status, "", "")
	}
	return fmt.Sprintf("%s: %v", hint, e.Err)
}

// Unwrap returns the client's error, so that errors.Is(err,
// gitlab.ErrNotFound) holds for a 404.
func (e *ConfigError) Unwrap() error { return e.Err }

// IsConfig reports whether err is, or wraps, a *ConfigError.
func IsConfig(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

// Messages GitLab answers with that the agent acts on.
const (
	// MsgVariablesForbidden is why GitLab refuses a pipeline with
	// variables in a project whose pipeline-variables role is "no one
	// allowed", the default of new gitlab.com projects since 17.7.
	MsgVariablesForbidden = "Insufficient permissions to set pipeline variables"
	// msgNoTransition starts GitLab's 400 for a commit status posted again
	// in the state it is in.
	msgNoTransition = "Cannot transition status via"
)

// HintVariablesForbidden is the ConfigError hint for MsgVariablesForbidden.
const HintVariablesForbidden = "pipeline variables are not allowed in this project: use inputs (the default) instead of variables"

func newConfigError(answer *http.Response, err error) *ConfigError {
	status, method := http.StatusNotFound, ""
	if answer != nil {
		status = answer.StatusCode
		if answer.Request != nil {
			method = answer.Request.Method
		}
	}
	var body []byte
	if er := (*gitlab.ErrorResponse)(nil); errors.As(err, &er) {
		body = er.Body
	}
	return &ConfigError{Status: status, Err: err, Hint: statusHint(status, method, string(body))}
}

// statusHint says what to fix for a status, the request's method and
// GitLab's answer body.
func statusHint(status int, method, body string) string {
	switch status {
	case http.StatusUnauthorized:
		return "GitLab does not accept the token: it is invalid, expired or revoked (a personal, project or group access token is needed)"
	case http.StatusForbidden:
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(body), &e) == nil && e.Error == "insufficient_scope" {
			return "the token lacks the scope this call needs: give it the api scope (read_api only reads)"
		}
		if method == http.MethodGet || method == http.MethodHead {
			return "the token may not read this: it needs the read_api or api scope and at least the Reporter role in the project"
		}
		return "the token may not do this: it needs the api scope and at least the Developer role in the project (Developer runs pipelines and sets commit statuses; Reporter only reads)"
	case http.StatusNotFound:
		return "the project path or id is wrong, or the token cannot see the project (GitLab answers 404, not 403, for a private project the token has no access to), or the object asked for does not exist"
	case http.StatusBadRequest:
		msg := bodyMessage([]byte(body))
		if strings.Contains(msg, MsgVariablesForbidden) {
			return HintVariablesForbidden
		}
		if msg != "" {
			return "GitLab refused the request: " + msg
		}
		return "GitLab refused the request as invalid"
	}
	return fmt.Sprintf("GitLab answered %d %s", status, http.StatusText(status))
}

// Message returns GitLab's message from an error answer's body, flattened:
// {"message":"X"} gives X; {"message":{"base":["X"],"ref":["is invalid"]}}
// gives "X; ref is invalid"; {"error":"X"} gives X. It is "" when err holds
// no *gitlab.ErrorResponse (a 404, whose body client-go drops) or the body
// is not GitLab's JSON. client-go's own ErrorResponse.Message reformats
// these shapes into "{message: {base: [X]}}", which is no use to match on.
func Message(err error) string {
	var er *gitlab.ErrorResponse
	if !errors.As(err, &er) {
		return ""
	}
	return bodyMessage(er.Body)
}

func bodyMessage(body []byte) string {
	var v struct {
		Message          json.RawMessage `json:"message"`
		Error            string          `json:"error"`
		ErrorDescription string          `json:"error_description"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if len(v.Message) > 0 {
		var s string
		if json.Unmarshal(v.Message, &s) == nil {
			return s
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(v.Message, &fields) == nil {
			return flattenFields(fields)
		}
	}
	if v.ErrorDescription != "" {
		return v.ErrorDescription
	}
	return v.Error
}

// flattenFields renders Rails validation errors the way GitLab's UI shows
// them: base messages alone, others after their field's name.
func flattenFields(fields map[string]json.RawMessage) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { // base first, then by name
		if (keys[i] == "base") != (keys[j] == "base") {
			return keys[i] == "base"
		}
		return keys[i] < keys[j]
	})
	var out []string
	for _, k := range keys {
		var msgs []string
		if json.Unmarshal(fields[k], &msgs) != nil {
			var one string
			if json.Unmarshal(fields[k], &one) != nil {
				continue
			}
			msgs = []string{one}
		}
		for _, m := range msgs {
			if k != "base" {
				m = k + " " + m
			}
			out = append(out, m)
		}
	}
	return strings.Join(out, "; ")
}

// IsUnchangedStatus reports whether err is GitLab's 400 for a commit status
// posted again in the state it already is in ("Cannot transition status
// via :run from :running"): the status is as asked, so a notifier counts it
// a success.
func IsUnchangedStatus(err error) bool {
	return gitlab.HasStatusCode(err, http.StatusBadRequest) && strings.HasPrefix(Message(err), msgNoTransition)
}
