package notify

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// Commit states, in GitHub's words; a StatusHost maps them to its own.
const (
	statePending = "pending"
	stateSuccess = "success"
	stateFailure = "failure"
	stateError   = "error"
)

// maxDescription is GitHub's limit on a commit status's description, kept
// on GitLab too: a status line is read at a glance.
const maxDescription = 140

// noticeMessageCut is the length, in characters, the store cuts a
// notice's message to.
const noticeMessageCut = 2000

// CommitStatus sets a status no8s/<source> on each commit a source
// applies: pending while the resources of the source reconcile, then
// success or failure once every one of them settled (ready or failed at
// its current generation), with a description that counts them and names
// the failed ones, and a link to the source's dashboard page. A commit the
// source refuses gets failure, or error when the agent could not judge it
// (see RefusalState), with the refusal's reason, once per revision.
type CommitStatus struct {
	// Host is where the statuses are posted.
	Host StatusHost
	// Store is read for the source's URL and its resources.
	Store        store.Store
	DashboardURL string
	// Settle is how often the resources are looked at until they settle;
	// zero means 3s. Timeout is how long they may take; zero means an hour.
	Settle, Timeout time.Duration
	// Masker hides secrets in the description, before it is cut to
	// GitHub's length; nil leaves them as they are.
	Masker *redact.Masker
}

// StatusHost is the Git host commit statuses are posted to: GitHub or
// GitLab.
type StatusHost interface {
	// PostStatus sets status on commit sha of the repository the source's
	// Git remote URL names. An error no retry mends (a remote on another
	// host, a token without access) is a *PermanentError.
	PostStatus(ctx context.Context, remote, sha string, status Status) error
}

// Status is a commit status.
type Status struct {
	// Name is the status's name: GitHub's context, GitLab's name.
	Name string
	// State is one of pending, success, failure and error.
	State       string
	Description string
	// TargetURL, when set, is where the status links to.
	TargetURL string
}

// Deliver posts pending the first time, then looks at the resources until
// they settle and posts the outcome.
func (c *CommitStatus) Deliver(ctx context.Context, n *store.Notice, prev store.Delivery) (bool, time.Duration, error) {
	settle := c.Settle
	if settle <= 0 {
		settle = 3 * time.Second
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	sha, ok := commitOf(string(n.Revision))
	if !ok {
		return false, 0, &PermanentError{fmt.Errorf("revision %q names no commit", n.Revision)}
	}
	src, err := c.Store.GetSource(ctx, n.Source)
	if err != nil {
		return false, 0, err
	}
	if n.Event == store.EventRevisionRefused {
		if src.LastAppliedRevision == n.Revision {
			// Applied since (approved, or let through by a change
			// elsewhere): its RevisionApplied tells the outcome, which a
			// late failure must not overwrite.
			return true, 0, nil
		}
		state, desc := RefusalState(n.Message), firstLine(n.Message)
		if desc == n.Message && utf8.RuneCountInString(desc) >= noticeMessageCut {
			// The store cut the message: a secret may straddle the cut.
			desc = c.Masker.MaskCut(desc, false, true)
		}
		if err := c.post(ctx, src.URL, sha, n.Source, state, desc); err != nil {
			return false, 0, err
		}
		return true, 0, nil
	}
	state, desc, err := c.outcome(ctx, n, src)
	if err != nil {
		return false, 0, err
	}
	if state == statePending && time.Since(n.CreatedAt) > timeout {
		state, desc = stateError, "not settled after "+timeout.String()+": "+desc
	}
	if state == statePending && prev.Result == store.DeliveryWaiting {
		return false, settle, nil // pending is posted already
	}
	if err := c.post(ctx, src.URL, sha, n.Source, state, desc); err != nil {
		return false, 0, err
	}
	return state != statePending, settle, nil
}

// Reasons of refusals that say the agent could not judge the commit, not
// that the commit is wrong: an admission hook that did not answer, agents
// that disagree on the default namespace. They are the sync package's;
// notify does not import it.
var judgeErrors = []string{"AdmissionFailed", "DefaultNamespaceMismatch"}

// RefusalState is the commit state of a refused revision whose refusal
// message (the source's, "Reason: what happened") is msg. A commit that
// is wrong or waits for a person (invalid manifests, a refused signature,
// a conflict with another source, the prune guard, a rollback) fails:
// GitHub's failure is a check that ran and did not pass, which branch
// protection and people read as "this commit broke it". A refusal for
// which the commit is not to blame is error: the check could not run.
func RefusalState(msg string) string {
	reason, _, _ := strings.Cut(msg, ":")
	if slices.Contains(judgeErrors, reason) {
		return stateError
	}
	return stateFailure
}

// firstLine is msg up to its first line break: a notice's message lists
// the problems on the lines that follow, which the description has no
// room for.
func firstLine(msg string) string {
	line, _, _ := strings.Cut(msg, "\n")
	return line
}

// outcome counts the source's resources: pending while some have not
// settled at their current generation, else success or failure. Once the
// source applied a newer revision, this one is judged as things stand.
func (c *CommitStatus) outcome(ctx context.Context, n *store.Notice, src *store.Source) (state, desc string, err error) {
	rs, err := c.Store.ListResources(ctx, store.ResourceFilter{Source: n.Source})
	if err != nil {
		return "", "", err
	}
	var ready, waiting int
	var failed []string
	for _, r := range rs {
		switch {
		case r.Phase == manifest.PhaseFailed:
			failed = append(failed, r.Ref().String())
		case r.Phase == manifest.PhaseReady && r.ObservedGeneration == r.Generation:
			ready++
		case r.Suspended():
			// A suspended resource waits for a person, not for the agent.
			ready++
		default:
			waiting++
		}
	}
	slices.Sort(failed)
	desc = fmt.Sprintf("%d ready", ready)
	if len(failed) > 0 {
		desc += fmt.Sprintf(", %d failed: %s", len(failed), strings.Join(failed, ", "))
	}
	superseded := src.LastAppliedRevision != n.Revision
	switch {
	case waiting > 0 && !superseded:
		return statePending, fmt.Sprintf("%d of %d resources reconciling", waiting, len(rs)), nil
	case waiting > 0:
		desc = fmt.Sprintf("superseded; %d reconciling, %s", waiting, desc)
	}
	if len(failed) > 0 {
		return stateFailure, desc, nil
	}
	return stateSuccess, desc, nil
}

// post sets the status.
func (c *CommitStatus) post(ctx context.Context, remote, sha, source, state, desc string) error {
	status := Status{Name: "no8s/" + source, State: state, Description: Truncate(c.Masker.Mask(desc), maxDescription)}
	if c.DashboardURL != "" {
		status.TargetURL = strings.TrimSuffix(c.DashboardURL, "/") + "/sources/" + url.PathEscape(source)
	}
	return c.Host.PostStatus(ctx, remote, sha, status)
}

// commitOf returns the commit of a revision such as main@sha1:<hash>.
func commitOf(rev string) (string, bool) {
	_, sha, ok := strings.Cut(rev, "@sha1:")
	if !ok {
		_, sha, ok = strings.Cut(rev, "sha1:")
	}
	return sha, ok && len(sha) >= 7
}

// Truncate cuts s to at most limit characters (code points, as GitHub
// counts a status's description), ending it with "..." when it was cut.
// It cuts between characters, never inside one.
func Truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit-3 {
			return s[:i] + "..."
		}
		n++
	}
	return s
}
