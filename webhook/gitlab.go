package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	gosync "sync"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// Headers of a GitLab delivery. The webhook-* ones are those of the
// Standard Webhooks signature scheme, which GitLab's signed webhooks use.
const (
	gitlabTokenHeader      = "X-Gitlab-Token"
	gitlabEventHeader      = "X-Gitlab-Event"
	webhookIDHeader        = "webhook-id"
	webhookTimestampHeader = "webhook-timestamp"
	webhookSignatureHeader = "webhook-signature"
	idempotencyKeyHeader   = "Idempotency-Key"
	gitlabEventUUIDHeader  = "X-Gitlab-Event-UUID"
)

// A signing key is "whsec_" and the base64 of 24 to 64 bytes, as the
// Standard Webhooks specification says (GitLab's are 32).
const (
	signingKeyPrefix = "whsec_"
	minSigningKey    = 24
	maxSigningKey    = 64
)

// SignatureTolerance is how far a signed delivery's webhook-timestamp may
// be from the agent's clock, either way, as the Standard Webhooks libraries
// allow. A replayed delivery older than that is refused for its timestamp;
// a younger one for its webhook-id.
const SignatureTolerance = 5 * time.Minute

// maxSeenIDs bounds the webhook-ids remembered against replays. GitLab
// sends far fewer signed deliveries within SignatureTolerance; should more
// arrive, those closest to expiring are forgotten first.
const maxSeenIDs = 10000

// Event labels GitLab deliveries are reported to OnDelivery with. GitHub's
// events keep their own names (push, pull_request, ping) and GitLab's are
// prefixed, so that the two hosts never share a metric series.
const (
	// GitLabEventPush is a Push Hook.
	GitLabEventPush = "gitlab_push"
	// GitLabEventTagPush is a Tag Push Hook.
	GitLabEventTagPush = "gitlab_tag_push"
	// GitLabEventMergeRequest is a Merge Request Hook.
	GitLabEventMergeRequest = "gitlab_merge_request"
	// GitLabEventOther is an authenticated delivery whose X-Gitlab-Event
	// names no event GitLab documents.
	GitLabEventOther = "gitlab_other"
	// GitLabUnknownEvent is the event of deliveries not authenticated.
	GitLabUnknownEvent = "gitlab_unknown"
)

// gitlabEventLabels maps the event types GitLab documents to their labels:
// "Note Hook" is gitlab_note. The set is bounded, so that an authenticated
// sender cannot add series with made-up event names either.
var gitlabEventLabels = func() map[gitlab.EventType]string {
	m := map[gitlab.EventType]string{}
	for _, e := range []gitlab.EventType{
		gitlab.EventConfidentialIssue, gitlab.EventConfidentialNote, gitlab.EventTypeBuild, gitlab.EventTypeDeployment,
		gitlab.EventTypeEmoji, gitlab.EventTypeFeatureFlag, gitlab.EventTypeIssue, gitlab.EventTypeJob,
		gitlab.EventTypeMember, gitlab.EventTypeMergeRequest, gitlab.EventTypeMilestone, gitlab.EventTypeNote,
		gitlab.EventTypePipeline, gitlab.EventTypeProject, gitlab.EventTypePush, gitlab.EventTypeRelease,
		gitlab.EventTypeResourceAccessToken, gitlab.EventTypeServiceHook, gitlab.EventTypeSubGroup,
		gitlab.EventTypeSystemHook, gitlab.EventTypeTagPush, gitlab.EventTypeVulnerability, gitlab.EventTypeWikiPage,
	} {
		name := strings.ToLower(strings.TrimSuffix(string(e), " Hook"))
		m[e] = "gitlab_" + strings.ReplaceAll(name, " ", "_")
	}
	return m
}()

// gitlabEventLabel is the label of an authenticated delivery's event.
func gitlabEventLabel(event string) string {
	if l, ok := gitlabEventLabels[gitlab.EventType(event)]; ok {
		return l
	}
	return GitLabEventOther
}

// GitLabOutcomes lists, by event label, the results GitLab deliveries end
// with, for counters to start their series from at 0; events the agent
// ignores are counted as they come.
func GitLabOutcomes() map[string][]string {
	return map[string][]string{
		GitLabEventPush:         {ResultTriggered, ResultUnmatched, ResultDuplicate},
		GitLabEventTagPush:      {ResultTriggered, ResultUnmatched, ResultDuplicate},
		GitLabEventMergeRequest: {ResultHandled, ResultFailed, ResultIgnored, ResultDuplicate},
		GitLabUnknownEvent:      {ResultUnauthorized, ResultInvalid},
	}
}

// ParseSigningKey decodes a Standard Webhooks signing secret, "whsec_"
// followed by the standard base64 of 24 to 64 bytes, into its HMAC key.
// Its errors never quote the secret.
func ParseSigningKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, signingKeyPrefix)
	if !ok {
		return nil, errors.New(`a signing key starts with "` + signingKeyPrefix + `"`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		// Not wrapped: the error would say where the base64 goes wrong.
		return nil, errors.New("what follows " + signingKeyPrefix + " is not standard base64")
	}
	if len(key) < minSigningKey || len(key) > maxSigningKey {
		return nil, fmt.Errorf("the key is %d bytes once decoded, want %d to %d", len(key), minSigningKey, maxSigningKey)
	}
	return key, nil
}

// GitLabOptions configures the handler NewGitLab returns.
type GitLabOptions struct {
	// Token is the webhook's secret token, which GitLab sends as is in
	// X-Gitlab-Token. When set, every delivery must carry it.
	Token string
	// SigningKey is the webhook's signing token, whsec_ and base64 (see
	// ParseSigningKey). When set, every delivery must carry a valid
	// Standard Webhooks signature no older than SignatureTolerance, and a
	// webhook-id already accepted is not acted on again. When neither
	// Token nor SigningKey is set, or SigningKey does not parse, every
	// delivery is refused.
	SigningKey string
	// Sources are matched against the project and ref of each push.
	Sources []Source
	// Trigger asks for a fetch and sync of the named source now and reports
	// whether the source is known. It must not block.
	Trigger func(name string) bool
	// Logger receives one line per delivery; nil discards them.
	Logger *slog.Logger
	// OnDelivery, when set, is called once per request with one of the
	// Result constants (for metrics). event is a GitLabEvent* label (or
	// another gitlab_ one, such as gitlab_note) once the delivery is
	// authenticated, and GitLabUnknownEvent before.
	OnDelivery func(event, result string)
	// OnMergeRequest handles Merge Request Hook deliveries; when nil they
	// are answered 202 and ignored. A returned error is logged and answered
	// 500, so that GitLab shows the delivery as failed, and its webhook-id
	// is forgotten so that it can be resent.
	OnMergeRequest func(ctx context.Context, ev *gitlab.MergeEvent) error
	// MaxBodyBytes limits the request body; zero or less means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// gitLab serves GitLab webhook deliveries. Its only mutable state is the
// set of webhook-ids seen, which has its own lock.
type gitLab struct {
	receiver
	// tokenSum is the SHA-256 of the token: X-Gitlab-Token is hashed too
	// and the digests compared, so that the comparison takes as long
	// whatever the lengths.
	tokenSum [sha256.Size]byte
	hasToken bool
	key      []byte // HMAC key; nil when signatures are not required
	keyErr   error  // SigningKey does not parse: everything is refused
	onMR     func(context.Context, *gitlab.MergeEvent) error
	seen     *seenIDs
	now      func() time.Time
}

// NewGitLab returns a handler for GitLab webhook deliveries, meant to be
// mounted at /hooks/gitlab. Authenticated Push Hook and Tag Push Hook
// deliveries trigger the sources that follow the pushed ref; Merge Request
// Hook deliveries go to OnMergeRequest; everything else is acknowledged
// without acting on it.
func NewGitLab(opts GitLabOptions) http.Handler {
	h := &gitLab{
		// Sources a push cannot trigger are worth a warning only where
		// GitLab webhooks are set up.
		receiver: newReceiver("GitLab", opts.Sources, opts.Trigger, opts.Logger, opts.OnDelivery, opts.MaxBodyBytes,
			opts.Token != "" || opts.SigningKey != "", []byte(opts.Token), []byte(opts.SigningKey)),
		hasToken: opts.Token != "",
		onMR:     opts.OnMergeRequest,
		seen:     &seenIDs{max: maxSeenIDs, until: map[[sha256.Size]byte]time.Time{}},
		now:      time.Now,
	}
	if h.hasToken {
		h.tokenSum = sha256.Sum256([]byte(opts.Token))
	}
	if opts.SigningKey != "" {
		h.key, h.keyErr = ParseSigningKey(opts.SigningKey)
		if h.keyErr != nil {
			h.key = nil
			h.log.Error("GitLab webhooks are disabled: the signing key does not parse", "error", h.keyErr)
		}
	}
	return h
}

// ServeHTTP authenticates the delivery, then dispatches it on its event
// type.
func (h *gitLab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := &delivery{
		event: clip(r.Header.Get(gitlabEventHeader)),
		label: GitLabUnknownEvent,
		id:    clip(firstHeader(r.Header, webhookIDHeader, idempotencyKeyHeader, gitlabEventUUIDHeader)),
	}
	h.serve(w, r, d)
	h.record(r.Context(), d)
}

func (h *gitLab) serve(w http.ResponseWriter, r *http.Request, d *delivery) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, d, http.StatusMethodNotAllowed, ResultInvalid, "only POST is allowed")
		return
	}
	if h.keyErr != nil {
		d.err = fmt.Errorf("signing key: %w", h.keyErr)
		h.fail(w, d, http.StatusForbidden, ResultUnconfigured,
			"GitLab webhooks are disabled: webhooks.gitlabSigningKeyEnv does not hold a valid signing key")
		return
	}
	if !h.hasToken && h.key == nil {
		h.fail(w, d, http.StatusForbidden, ResultUnconfigured,
			"GitLab webhooks are disabled: set webhooks.gitlabTokenEnv (the secret token) or webhooks.gitlabSigningKeyEnv (the signing token)")
		return
	}
	// The token does not depend on the body: a wrong one is refused before
	// the body is read.
	if h.hasToken {
		sent := r.Header.Get(gitlabTokenHeader)
		if sent == "" {
			h.fail(w, d, http.StatusUnauthorized, ResultUnauthorized, gitlabTokenHeader+" is required")
			return
		}
		sum := sha256.Sum256([]byte(sent))
		if subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) != 1 {
			h.fail(w, d, http.StatusUnauthorized, ResultUnauthorized, gitlabTokenHeader+" does not match")
			return
		}
	}
	var sig signature
	if h.key != nil {
		sig = signature{
			id:        r.Header.Get(webhookIDHeader),
			timestamp: r.Header.Get(webhookTimestampHeader),
			list:      r.Header.Get(webhookSignatureHeader),
		}
		if sig.id == "" || sig.timestamp == "" || sig.list == "" {
			h.fail(w, d, http.StatusUnauthorized, ResultUnauthorized,
				"a signed webhook is required: webhook-id, webhook-timestamp and webhook-signature must be set")
			return
		}
	}
	if r.ContentLength > h.maxBody {
		h.fail(w, d, http.StatusRequestEntityTooLarge, ResultInvalid,
			fmt.Sprintf("request body is larger than %d bytes", h.maxBody))
		return
	}
	// GitLab sends JSON only.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		h.fail(w, d, http.StatusUnsupportedMediaType, ResultInvalid, "Content-Type must be application/json")
		return
	}
	payload, err := readBody(w, r, h.maxBody)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.fail(w, d, http.StatusRequestEntityTooLarge, ResultInvalid,
				fmt.Sprintf("request body is larger than %d bytes", h.maxBody))
			return
		}
		d.err = fmt.Errorf("read body: %w", err)
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "cannot read the request body")
		return
	}
	now := h.now()
	var replayUntil time.Time
	if h.key != nil {
		replayUntil, err = sig.verify(h.key, payload, now)
		if err != nil {
			d.err = err
			h.fail(w, d, http.StatusUnauthorized, ResultUnauthorized, err.Error())
			return
		}
	}
	d.verified = true
	d.label = gitlabEventLabel(d.event)
	if d.event == "" {
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "missing "+gitlabEventHeader+" header")
		return
	}
	if !json.Valid(payload) {
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not valid JSON")
		return
	}
	d.repository = projectPath(payload)
	if h.key != nil {
		// Claimed before acting, so that of two deliveries of one id at
		// once only one acts; forgotten again if this one fails, so that a
		// resend is not taken for a replay.
		if !h.seen.claim(sig.id, replayUntil, now) {
			d.result, d.status = ResultDuplicate, http.StatusOK
			writeJSON(w, d.status, map[string]any{"event": d.event, "duplicate": true})
			return
		}
		defer func() {
			if d.result == ResultInvalid || d.result == ResultFailed {
				h.seen.release(sig.id)
			}
		}()
	}

	switch gitlab.EventType(d.event) {
	case gitlab.EventTypePush, gitlab.EventTypeTagPush:
		h.push(w, d, payload)
	case gitlab.EventTypeMergeRequest:
		if h.onMR == nil {
			h.ignore(w, d, http.StatusAccepted)
			return
		}
		h.mergeRequest(r.Context(), w, d, payload)
	default:
		h.ignore(w, d, http.StatusOK)
	}
}

// push triggers the sources that follow the ref a Push Hook or Tag Push
// Hook updated.
func (h *gitLab) push(w http.ResponseWriter, d *delivery, payload []byte) {
	v, err := gitlab.ParseWebhook(gitlab.EventType(d.event), payload)
	if err != nil {
		d.err = fmt.Errorf("parse %s payload: %w", d.event, err)
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not a "+d.event+" event", d.err.Error())
		return
	}
	var (
		kind, ref, after, defaultBranch string
		wantKind, refPrefix             string
		urls                            []string
		repo                            *gitlab.Repository
	)
	switch ev := v.(type) {
	case *gitlab.PushEvent:
		p := ev.Project
		kind, ref, after, defaultBranch, repo = ev.ObjectKind, ev.Ref, ev.After, p.DefaultBranch, ev.Repository
		wantKind, refPrefix = "push", "refs/heads/"
		urls = []string{p.GitHTTPURL, p.GitSSHURL, p.WebURL, p.HTTPURL, p.SSHURL, p.URL}
	case *gitlab.TagEvent:
		p := ev.Project
		kind, ref, after, defaultBranch, repo = ev.ObjectKind, ev.Ref, ev.After, p.DefaultBranch, ev.Repository
		wantKind, refPrefix = "tag_push", "refs/tags/"
		urls = []string{p.GitHTTPURL, p.GitSSHURL, p.WebURL, p.HTTPURL, p.SSHURL, p.URL}
	default:
		d.err = fmt.Errorf("parse %s payload: got %T", d.event, v)
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not a "+d.event+" event")
		return
	}
	if !h.kindIs(w, d, kind, wantKind) {
		return
	}
	if repo != nil {
		urls = append(urls, repo.GitHTTPURL, repo.GitSSHURL, repo.URL, repo.Homepage)
	}
	var names []string
	// A deleted branch or tag leaves nothing to sync: the source's next
	// poll reports the missing ref. A Push Hook is about branches and a
	// Tag Push Hook about tags; GitLab sends no other refs in them.
	if !zeroSHA(after) && strings.HasPrefix(ref, refPrefix) {
		names = h.match(urls, ref, defaultBranch)
	}
	h.triggerAll(w, d, names)
}

func (h *gitLab) mergeRequest(ctx context.Context, w http.ResponseWriter, d *delivery, payload []byte) {
	v, err := gitlab.ParseWebhook(gitlab.EventTypeMergeRequest, payload)
	ev, ok := v.(*gitlab.MergeEvent)
	if err == nil && !ok {
		err = fmt.Errorf("got %T", v)
	}
	if err != nil {
		d.err = fmt.Errorf("parse %s payload: %w", d.event, err)
		h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not a "+d.event+" event", d.err.Error())
		return
	}
	if !h.kindIs(w, d, ev.ObjectKind, "merge_request") {
		return
	}
	if err := h.onMR(ctx, ev); err != nil {
		// The error stays in the log: it may name internals GitLab's
		// delivery page should not show.
		d.err = fmt.Errorf("handle merge request: %w", err)
		h.fail(w, d, http.StatusInternalServerError, ResultFailed, "handling the merge request event failed")
		return
	}
	d.result, d.status = ResultHandled, http.StatusOK
	writeJSON(w, d.status, map[string]any{"event": d.event, "handled": true})
}

// kindIs refuses a payload whose object_kind is not want, the kind of
// the event X-Gitlab-Event names. The header is not signed: a signed
// payload of one kind must not be acted on as another (a tag push as a
// push, a push as a merge request).
func (h *gitLab) kindIs(w http.ResponseWriter, d *delivery, kind, want string) bool {
	if kind == want {
		return true
	}
	d.err = fmt.Errorf("%s payload has object_kind %q, want %q", d.event, clip(kind), want)
	h.fail(w, d, http.StatusBadRequest, ResultInvalid, "payload is not a "+d.event+" event", d.err.Error())
	return false
}

// signature is a delivery's Standard Webhooks headers.
type signature struct {
	id, timestamp, list string
}

// verify checks that one of the list's v1 signatures is the key's HMAC of
// the delivery and that its timestamp is within SignatureTolerance of now.
// It returns when a replay of the delivery will be refused for its
// timestamp, until which its id must be remembered.
func (s signature) verify(key, body []byte, now time.Time) (time.Time, error) {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(s.id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(s.timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	match := false
	// A space-separated list, so that a key can be rotated; entries of
	// other schemes (v1a is Ed25519) are skipped.
	for _, entry := range strings.Fields(s.list) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			match = true
		}
	}
	if !match {
		return time.Time{}, errors.New("webhook-signature does not match the payload")
	}
	secs, err := strconv.ParseInt(s.timestamp, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("webhook-timestamp is not a Unix time in seconds")
	}
	ts := time.Unix(secs, 0)
	if ts.Before(now.Add(-SignatureTolerance)) || ts.After(now.Add(SignatureTolerance)) {
		return time.Time{}, fmt.Errorf("webhook-timestamp is more than %s from the agent's clock", SignatureTolerance)
	}
	return ts.Add(SignatureTolerance), nil
}

// seenIDs remembers the webhook-ids of accepted deliveries until a replay
// of them would be refused for its timestamp anyway. Ids are kept as
// digests, so that each takes the same room whatever its length.
type seenIDs struct {
	mu    gosync.Mutex
	max   int
	until map[[sha256.Size]byte]time.Time
}

// claim records id until the given time and reports whether it is new: not
// accepted before, or accepted so long ago that it has expired.
func (s *seenIDs) claim(id string, until, now time.Time) bool {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.until[k]; ok && !now.After(t) {
		return false
	}
	if len(s.until) >= s.max {
		for k, t := range s.until {
			if now.After(t) {
				delete(s.until, k)
			}
		}
	}
	for len(s.until) >= s.max {
		var oldest [sha256.Size]byte
		first := true
		for k, t := range s.until {
			if first || t.Before(s.until[oldest]) {
				oldest, first = k, false
			}
		}
		delete(s.until, oldest)
	}
	s.until[k] = until
	return true
}

// release forgets id, whose delivery failed, so that a resend is acted on.
func (s *seenIDs) release(id string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.until, k)
}

// readBody reads the request body, refusing more than limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, limit)
	defer body.Close()
	return io.ReadAll(body)
}

// zeroSHA reports whether sha is the all-zero object name GitLab sends as
// the new value of a deleted ref (40 zeros, or 64 in a SHA-256
// repository).
func zeroSHA(sha string) bool {
	return sha != "" && strings.Trim(sha, "0") == ""
}

// projectPath returns project.path_with_namespace, which every project
// event carries, for the log line.
func projectPath(payload []byte) string {
	var p struct {
		Project struct {
			PathWithNamespace string `json:"path_with_namespace"`
		} `json:"project"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	return clip(p.Project.PathWithNamespace)
}

// firstHeader returns the first of the named headers that is set.
func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}
