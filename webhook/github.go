// Package webhook receives webhooks from Git hosts so that sources are
// synced as soon as they change instead of at their next poll.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/google/go-github/v60/github"
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
	receiver
	secret []byte
	onPR   func(context.Context, *github.PullRequestEvent) error
}

// NewGitHub returns a handler for GitHub webhook deliveries, meant to be
// mounted at /hooks/github. Verified pushes trigger the sources that follow
// the pushed ref; everything else is acknowledged without acting on it.
func NewGitHub(opts GitHubOptions) http.Handler {
	return &gitHub{
		receiver: newReceiver("GitHub", opts.Sources, opts.Trigger, opts.Logger, opts.OnDelivery, opts.MaxBodyBytes,
			true, []byte(opts.Secret)),
		secret: []byte(opts.Secret),
		onPR:   opts.OnPullRequest,
	}
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
			h.ignore(w, d, http.StatusAccepted)
			return
		}
		h.pullRequest(r.Context(), w, d, payload)
	default:
		h.ignore(w, d, http.StatusAccepted)
	}
}

func (h *gitHub) push(w http.ResponseWriter, d *delivery, payload []byte) {
	ev, err := parse[*github.PushEvent](d.event, payload)
	if err != nil {
		d.err = err
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not a push event", err.Error())
		return
	}
	h.triggerAll(w, d, h.match(ev))
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

// match returns the sources that follow the ref a push updated.
func (h *gitHub) match(ev *github.PushEvent) []string {
	if ev.GetDeleted() {
		return nil
	}
	repo := ev.GetRepo()
	defaultBranch := repo.GetDefaultBranch()
	if defaultBranch == "" {
		defaultBranch = repo.GetMasterBranch()
	}
	return h.receiver.match([]string{repo.GetCloneURL(), repo.GetHTMLURL(), repo.GetSSHURL(), repo.GetGitURL(), repo.GetURL()},
		ev.GetRef(), defaultBranch)
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
