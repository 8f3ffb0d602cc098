// Package webhook receives webhooks from Git hosts so that sources are
// synced as soon as they change instead of at their next poll.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-github/v60/github"
)

// DefaultMaxBodyBytes is the largest payload GitHub sends (it drops
// deliveries above 25 MiB), so a bigger body is not from GitHub.
const DefaultMaxBodyBytes int64 = 25 << 20

// Results passed to GitHubOptions.OnDelivery. The set is fixed so that it
// can be used as a metric label.
const (
	// ResultTriggered: a push matched sources and the runner accepted at
	// least one trigger.
	ResultTriggered = "triggered"
	// ResultUnmatched: a push was verified but no configured source follows
	// the pushed ref (or it deleted the ref).
	ResultUnmatched = "unmatched"
	// ResultHandled: OnPullRequest handled a pull_request event.
	ResultHandled = "handled"
	// ResultPong: a ping, which GitHub sends when the webhook is created.
	ResultPong = "pong"
	// ResultIgnored: a verified event the agent does not act on.
	ResultIgnored = "ignored"
	// ResultUnauthorized: the signature is missing or does not match.
	ResultUnauthorized = "unauthorized"
	// ResultInvalid: the request is malformed: wrong method or content type,
	// too large, no event type, or a payload that is not the event's JSON.
	ResultInvalid = "invalid"
	// ResultUnconfigured: no secret is configured, so nothing is accepted.
	ResultUnconfigured = "unconfigured"
	// ResultFailed: OnPullRequest returned an error.
	ResultFailed = "failed"
)

// Outcomes lists, by event type, the results deliveries of it end with;
// unknown stands for the event of deliveries not authenticated. Counters
// start their series from it at 0.
func Outcomes(unknown string) map[string][]string {
	return map[string][]string{
		"push":         {ResultTriggered, ResultUnmatched},
		"pull_request": {ResultHandled, ResultFailed},
		"ping":         {ResultPong},
		unknown:        {ResultUnauthorized, ResultInvalid},
	}
}

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

// GitHubOptions configures the handler NewGitHub returns.
type GitHubOptions struct {
	// Secret is the webhook secret GitHub signs payloads with. When empty
	// every delivery is refused: go-github would otherwise skip the check
	// and let anyone trigger syncs.
	Secret string
	// Sources are matched against the repository and ref of each push.
	Sources []Source
	// Trigger asks for a fetch and sync of the named source now and reports
	// whether the source is known. It must not block.
	Trigger func(name string) bool
	// Logger receives one line per delivery; nil discards them.
	Logger *slog.Logger
	// OnDelivery, when set, is called once per request with one of the
	// Result constants (for metrics). event is the X-GitHub-Event header
	// only once the signature has been verified, and "" before, so that
	// unauthenticated callers cannot add label values.
	OnDelivery func(event, result string)
	// OnPullRequest handles pull_request events; when nil they are answered
	// 202 and ignored. A returned error is logged and answered 500, so that
	// GitHub shows the delivery as failed and it can be redelivered.
	OnPullRequest func(ctx context.Context, ev *github.PullRequestEvent) error
	// MaxBodyBytes limits the request body; zero or less means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// gitHub serves GitHub webhook deliveries. It holds no mutable state, so
// deliveries are served concurrently without locks.
type gitHub struct {
	secret     []byte
	sources    []source
	trigger    func(string) bool
	log        *slog.Logger
	onDelivery func(event, result string)
	onPR       func(context.Context, *github.PullRequestEvent) error
	maxBody    int64
}

// source is a Source with what every push compares against computed once.
type source struct {
	Source
	repo       string              // normalizeRepoURL(URL); "" never matches
	constraint *semver.Constraints // parsed SemVer; nil if it does not parse
}

// NewGitHub returns a handler for GitHub webhook deliveries, meant to be
// mounted at /hooks/github. Verified pushes trigger the sources that follow
// the pushed ref; everything else is acknowledged without acting on it.
func NewGitHub(opts GitHubOptions) http.Handler {
	h := &gitHub{
		secret:     []byte(opts.Secret),
		trigger:    opts.Trigger,
		log:        opts.Logger,
		onDelivery: opts.OnDelivery,
		onPR:       opts.OnPullRequest,
		maxBody:    opts.MaxBodyBytes,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.trigger == nil {
		h.trigger = func(string) bool { return false }
	}
	for _, s := range opts.Sources {
		src := source{Source: s, repo: normalizeRepoURL(s.URL)}
		if src.repo == "" {
			// Logged without the URL, which may hold credentials.
			h.log.Warn("GitHub webhooks cannot match the URL of this source; it is synced on its interval only",
				"source", s.Name)
		}
		if s.Commit == "" && s.SemVer != "" {
			c, err := semver.NewConstraint(s.SemVer)
			if err != nil {
				h.log.Warn("semver range does not parse; tag pushes will not trigger this source",
					"source", s.Name, "error", h.redact(fmt.Errorf("semver range %q: %w", s.SemVer, err)))
			}
			src.constraint = c
		}
		h.sources = append(h.sources, src)
	}
	return h
}

// delivery is what is known about one request, for the log line and
// OnDelivery.
type delivery struct {
	event      string // X-GitHub-Event as sent (logged, not reported before verification)
	id         string
	verified   bool
	repository string
	triggered  []string
	result     string
	status     int
	err        error
}

// ServeHTTP verifies the delivery, then dispatches it on its event type.
func (h *gitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := &delivery{event: clip(github.WebHookType(r)), id: clip(github.DeliveryID(r))}
	h.serve(w, r, d)
	h.record(r.Context(), d)
}

func (h *gitHub) serve(w http.ResponseWriter, r *http.Request, d *delivery) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, d, http.StatusMethodNotAllowed, ResultInvalid, "only POST is allowed")
		return
	}
	if len(h.secret) == 0 {
		h.fail(w, d, http.StatusForbidden, ResultUnconfigured,
			"GitHub webhooks are disabled: set webhooks.githubSecretEnv to the environment variable holding the webhook secret")
		return
	}
	// go-github falls back to the SHA-1 header and accepts any hash prefix:
	// insist on the SHA-256 signature GitHub always sends.
	if sig := r.Header.Get(github.SHA256SignatureHeader); !strings.HasPrefix(sig, "sha256=") {
		h.fail(w, d, http.StatusUnauthorized, ResultUnauthorized, github.SHA256SignatureHeader+" with a sha256= signature is required")
		return
	}
	if r.ContentLength > h.maxBody {
		h.fail(w, d, http.StatusRequestEntityTooLarge, ResultInvalid,
			fmt.Sprintf("request body is larger than %d bytes", h.maxBody))
		return
	}
	// Checked here because go-github reports a wrong content type like a
	// wrong signature.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil ||
		(mt != "application/json" && mt != "application/x-www-form-urlencoded") {
		h.fail(w, d, http.StatusUnsupportedMediaType, ResultInvalid,
			"Content-Type must be application/json or application/x-www-form-urlencoded")
		return
	}
	body := &readRecorder{r: http.MaxBytesReader(w, r.Body, h.maxBody)}
	r.Body = body
	payload, err := github.ValidatePayload(r, h.secret)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(body.err, &tooLarge):
			h.fail(w, d, http.StatusRequestEntityTooLarge, ResultInvalid,
				fmt.Sprintf("request body is larger than %d bytes", h.maxBody))
		case body.err != nil:
			d.err = fmt.Errorf("read body: %w", body.err)
			h.fail(w, d, http.StatusBadRequest, ResultInvalid, "cannot read the request body")
		default:
			d.err = fmt.Errorf("validate payload: %w", err)
			h.fail(w, d, http.StatusUnauthorized, ResultUnauthorized, "signature does not match the payload")
		}
		return
	}
	d.verified = true
	if d.event == "" {
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "missing X-GitHub-Event header")
		return
	}
	if !json.Valid(payload) {
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not valid JSON")
		return
	}
	d.repository = repositoryName(payload)

	switch d.event {
	case "ping":
		d.result, d.status = ResultPong, http.StatusOK
		writeJSON(w, d.status, map[string]any{"event": d.event})
	case "push":
		h.push(w, d, payload)
	case "pull_request":
		if h.onPR == nil {
			h.ignore(w, d)
			return
		}
		h.pullRequest(r.Context(), w, d, payload)
	default:
		h.ignore(w, d)
	}
}

func (h *gitHub) push(w http.ResponseWriter, d *delivery, payload []byte) {
	ev, err := parse[*github.PushEvent](d.event, payload)
	if err != nil {
		d.err = err
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not a push event", err.Error())
		return
	}
	d.triggered = []string{}
	for _, name := range h.match(ev) {
		if h.trigger(name) {
			d.triggered = append(d.triggered, name)
		} else {
			h.log.Warn("push matched a source the sync runner does not know", "source", name, "delivery", d.id)
		}
	}
	d.result, d.status = ResultUnmatched, http.StatusOK
	if len(d.triggered) > 0 {
		d.result = ResultTriggered
	}
	writeJSON(w, d.status, map[string]any{"event": d.event, "triggered": d.triggered})
}

func (h *gitHub) pullRequest(ctx context.Context, w http.ResponseWriter, d *delivery, payload []byte) {
	ev, err := parse[*github.PullRequestEvent](d.event, payload)
	if err != nil {
		d.err = err
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not a pull_request event", err.Error())
		return
	}
	if err := h.onPR(ctx, ev); err != nil {
		// The error stays in the log: it may name internals GitHub's
		// delivery page should not show.
		d.err = fmt.Errorf("handle pull_request: %w", err)
		h.fail(w, d, http.StatusInternalServerError, ResultFailed, "handling the pull_request event failed")
		return
	}
	d.result, d.status = ResultHandled, http.StatusOK
	writeJSON(w, d.status, map[string]any{"event": d.event, "handled": true})
}

func (h *gitHub) ignore(w http.ResponseWriter, d *delivery) {
	d.result, d.status = ResultIgnored, http.StatusAccepted
	writeJSON(w, d.status, map[string]any{"event": d.event, "ignored": true})
}

// match returns the sources that follow the ref a push updated.
func (h *gitHub) match(ev *github.PushEvent) []string {
	if ev.GetDeleted() {
		return nil
	}
	repo := ev.GetRepo()
	urls := map[string]bool{}
	for _, u := range []string{repo.GetCloneURL(), repo.GetHTMLURL(), repo.GetSSHURL(), repo.GetGitURL(), repo.GetURL()} {
		if n := normalizeRepoURL(u); n != "" {
			urls[n] = true
		}
	}
	defaultBranch := repo.GetDefaultBranch()
	if defaultBranch == "" {
		defaultBranch = repo.GetMasterBranch()
	}
	var names []string
	for _, s := range h.sources {
		if s.repo != "" && urls[s.repo] && s.follows(ev.GetRef(), defaultBranch) {
			names = append(names, s.Name)
		}
	}
	return names
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

// parse decodes payload as the event type's go-github struct.
func parse[T any](event string, payload []byte) (T, error) {
	var zero T
	v, err := github.ParseWebHook(event, payload)
	if err != nil {
		return zero, fmt.Errorf("parse %s payload: %w", event, err)
	}
	ev, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("parse %s payload: got %T", event, v)
	}
	return ev, nil
}

// repositoryName returns repository.full_name, which most events carry, for
// the log line.
func repositoryName(payload []byte) string {
	var p struct {
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	return clip(p.Repository.FullName)
}

// fail records the outcome and answers with an errorBody.
func (h *gitHub) fail(w http.ResponseWriter, d *delivery, status int, result, msg string, details ...string) {
	d.result, d.status = result, status
	body := errorBody{Error: msg, Details: make([]errorDetail, len(details))}
	for i, m := range details {
		body.Details[i] = errorDetail{Message: m}
	}
	writeJSON(w, status, body)
}

// record logs the delivery and reports it to OnDelivery.
func (h *gitHub) record(ctx context.Context, d *delivery) {
	attrs := []any{"event", d.event, "delivery", d.id, "result", d.result, "status", d.status}
	if d.repository != "" {
		attrs = append(attrs, "repository", d.repository)
	}
	if d.triggered != nil {
		attrs = append(attrs, "triggered", d.triggered)
	}
	if d.err != nil {
		attrs = append(attrs, "error", h.redact(d.err))
	}
	level := slog.LevelInfo
	switch d.result {
	case ResultUnauthorized, ResultInvalid, ResultUnconfigured, ResultFailed:
		level = slog.LevelWarn
	}
	h.log.Log(ctx, level, "GitHub webhook delivery", attrs...)
	if h.onDelivery != nil {
		event := ""
		if d.verified {
			event = d.event
		}
		h.onDelivery(event, d.result)
	}
}

// redact returns the error's text without the secret. Errors come from
// configuration and from OnPullRequest, which the handler does not control.
func (h *gitHub) redact(err error) string {
	msg := err.Error()
	if len(h.secret) > 0 {
		msg = strings.ReplaceAll(msg, string(h.secret), "[redacted]")
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

// readRecorder keeps the body's read error, which go-github returns
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
