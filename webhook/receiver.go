package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// DefaultMaxBodyBytes is the largest payload GitHub sends (it drops
// deliveries above 25 MiB), so a bigger body is not from GitHub. GitLab's
// deliveries are held to the same bound: a push payload lists at most 20
// commits.
const DefaultMaxBodyBytes int64 = 25 << 20

// Results passed to OnDelivery (of GitHubOptions and GitLabOptions). The
// set is fixed so that it can be used as a metric label.
const (
	// ResultTriggered: a push matched sources and the runner accepted at
	// least one trigger.
	ResultTriggered = "triggered"
	// ResultUnmatched: a push was verified but no configured source follows
	// the pushed ref (or it deleted the ref).
	ResultUnmatched = "unmatched"
	// ResultHandled: OnPullRequest handled a pull_request event, or
	// OnMergeRequest a merge request event.
	ResultHandled = "handled"
	// ResultPong: a ping, which GitHub sends when the webhook is created.
	ResultPong = "pong"
	// ResultIgnored: a verified event the agent does not act on.
	ResultIgnored = "ignored"
	// ResultUnauthorized: the signature or token is missing or does not
	// match, or a signature's timestamp is too old or too far ahead.
	ResultUnauthorized = "unauthorized"
	// ResultInvalid: the request is malformed: wrong method or content type,
	// too large, no event type, or a payload that is not the event's JSON.
	ResultInvalid = "invalid"
	// ResultUnconfigured: no secret (or, for GitLab, no token and no
	// signing key) is configured, so nothing is accepted.
	ResultUnconfigured = "unconfigured"
	// ResultFailed: OnPullRequest or OnMergeRequest returned an error.
	ResultFailed = "failed"
	// ResultDuplicate: a signed delivery whose webhook-id was already
	// accepted; nothing is done again.
	ResultDuplicate = "duplicate"
)

// Source is a Git source as configured. When several of Commit, SemVer, Tag
// and Branch are set the first of them in that order wins, as in Flux; with
// none set the source follows the repository's default branch.
type Source struct {
	Name   string
	URL    string
	Branch string
	Tag    string
	SemVer string
	Commit string
}

// source is a Source with what every push compares against computed once.
type source struct {
	Source
	repo       string              // normalizeRepoURL(URL); "" never matches
	constraint *semver.Constraints // parsed SemVer; nil if it does not parse
}

// receiver is what the handlers of every Git host share: the sources a
// push is matched against, the trigger, and how a delivery is answered,
// logged and reported. It holds no mutable state.
type receiver struct {
	host       string // "GitHub", "GitLab": names the host in log lines
	sources    []source
	trigger    func(string) bool
	log        *slog.Logger
	onDelivery func(event, result string)
	maxBody    int64
	secrets    [][]byte // redacted from logged errors
}

// newReceiver fills in the defaults and prepares the sources, warning
// about those a push cannot trigger when warn is set. secrets are what
// logged errors must never show.
func newReceiver(host string, sources []Source, trigger func(string) bool, log *slog.Logger,
	onDelivery func(event, result string), maxBody int64, warn bool, secrets ...[]byte) receiver {
	rc := receiver{host: host, trigger: trigger, log: log, onDelivery: onDelivery, maxBody: maxBody}
	for _, s := range secrets {
		if len(s) > 0 {
			rc.secrets = append(rc.secrets, s)
		}
	}
	if rc.log == nil {
		rc.log = slog.New(slog.DiscardHandler)
	}
	if rc.maxBody <= 0 {
		rc.maxBody = DefaultMaxBodyBytes
	}
	if rc.trigger == nil {
		rc.trigger = func(string) bool { return false }
	}
	for _, s := range sources {
		src := source{Source: s, repo: normalizeRepoURL(s.URL)}
		if src.repo == "" && warn {
			// Logged without the URL, which may hold credentials.
			rc.log.Warn(host+" webhooks cannot match the URL of this source; it is synced on its interval only",
				"source", s.Name)
		}
		if s.Commit == "" && s.SemVer != "" {
			c, err := semver.NewConstraint(s.SemVer)
			if err != nil && warn {
				rc.log.Warn("semver range does not parse; tag pushes will not trigger this source",
					"source", s.Name, "error", rc.redact(fmt.Errorf("semver range %q: %w", s.SemVer, err)))
			}
			src.constraint = c
		}
		rc.sources = append(rc.sources, src)
	}
	return rc
}

// delivery is what is known about one request, for the log line and
// OnDelivery.
type delivery struct {
	event string // the event header as sent (logged, not reported before verification)
	// label, when set, is reported to OnDelivery instead of event (or
	// instead of "" before verification).
	label      string
	id         string
	verified   bool
	repository string
	triggered  []string
	result     string
	status     int
	err        error
}

// match returns the sources that follow ref in the repository any of urls
// names. defaultBranch is the repository's, for sources that follow it.
func (rc *receiver) match(urls []string, ref, defaultBranch string) []string {
	keys := map[string]bool{}
	for _, u := range urls {
		if n := normalizeRepoURL(u); n != "" {
			keys[n] = true
		}
	}
	var names []string
	for _, s := range rc.sources {
		if s.repo != "" && keys[s.repo] && s.follows(ref, defaultBranch) {
			names = append(names, s.Name)
		}
	}
	return names
}

// triggerAll asks for a sync of each named source and answers the push.
func (rc *receiver) triggerAll(w http.ResponseWriter, d *delivery, names []string) {
	d.triggered = []string{}
	for _, name := range names {
		if rc.trigger(name) {
			d.triggered = append(d.triggered, name)
		} else {
			rc.log.Warn("push matched a source the sync runner does not know", "source", name, "delivery", d.id)
		}
	}
	d.result, d.status = ResultUnmatched, http.StatusOK
	if len(d.triggered) > 0 {
		d.result = ResultTriggered
	}
	writeJSON(w, d.status, map[string]any{"event": d.event, "triggered": d.triggered})
}

// ignore acknowledges an event the agent does not act on.
func (rc *receiver) ignore(w http.ResponseWriter, d *delivery, status int) {
	d.result, d.status = ResultIgnored, status
	writeJSON(w, d.status, map[string]any{"event": d.event, "ignored": true})
}

// follows reports whether a push to ref can change what the source checks
// out, applying the same precedence as the Git source.
func (s source) follows(ref, defaultBranch string) bool {
	switch {
	case s.Commit != "":
		return false
	case s.SemVer != "":
		tag, ok := strings.CutPrefix(ref, "refs/tags/")
		if !ok || s.constraint == nil {
			return false
		}
		v, err := semver.NewVersion(tag)
		return err == nil && s.constraint.Check(v)
	case s.Tag != "":
		tag, ok := strings.CutPrefix(ref, "refs/tags/")
		return ok && tag == s.Tag
	default:
		branch, ok := strings.CutPrefix(ref, "refs/heads/")
		want := s.Branch
		if want == "" {
			want = defaultBranch
		}
		return ok && want != "" && branch == want
	}
}

// fail records the outcome and answers with an errorBody.
func (rc *receiver) fail(w http.ResponseWriter, d *delivery, status int, result, msg string, details ...string) {
	d.result, d.status = result, status
	body := errorBody{Error: msg, Details: make([]errorDetail, len(details))}
	for i, m := range details {
		body.Details[i] = errorDetail{Message: m}
	}
	writeJSON(w, status, body)
}

// record logs the delivery and reports it to OnDelivery.
func (rc *receiver) record(ctx context.Context, d *delivery) {
	attrs := []any{"event", d.event, "delivery", d.id, "result", d.result, "status", d.status}
	if d.repository != "" {
		attrs = append(attrs, "repository", d.repository)
	}
	if d.triggered != nil {
		attrs = append(attrs, "triggered", d.triggered)
	}
	if d.err != nil {
		attrs = append(attrs, "error", rc.redact(d.err))
	}
	level := slog.LevelInfo
	switch d.result {
	case ResultUnauthorized, ResultInvalid, ResultUnconfigured, ResultFailed:
		level = slog.LevelWarn
	}
	rc.log.Log(ctx, level, rc.host+" webhook delivery", attrs...)
	if rc.onDelivery != nil {
		event := d.label
		if event == "" && d.verified {
			event = d.event
		}
		rc.onDelivery(event, d.result)
	}
}

// redact returns the error's text without the secrets. Errors come from
// configuration and from the event callbacks, which the handler does not
// control.
func (rc *receiver) redact(err error) string {
	msg := err.Error()
	for _, s := range rc.secrets {
		msg = strings.ReplaceAll(msg, string(s), "[redacted]")
	}
	return msg
}

// errorBody is the JSON body of every error answer, in the shape of the
// agent's API errors.
type errorBody struct {
	Error   string        `json:"error"`
	Details []errorDetail `json:"details"`
}

// errorDetail is one problem with a delivery.
type errorDetail struct {
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The status is sent; a failed write means the client is gone.
	_ = json.NewEncoder(w).Encode(v)
}

// readRecorder keeps the body's read error, which a library may return
// unwrapped and indistinguishable from a signature mismatch.
type readRecorder struct {
	r   io.ReadCloser
	err error
}

func (b *readRecorder) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func (b *readRecorder) Close() error { return b.r.Close() }

// clip bounds header and payload values before they are logged, since
// unauthenticated callers choose them.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
