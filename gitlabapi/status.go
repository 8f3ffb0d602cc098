package gitlabapi

import (
	"context"
	"errors"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// maxStatusPages bounds the pages of a commit's statuses read to find the
// newest of one name; a commit holds a few statuses of a name, one per ref.
const maxStatusPages = 10

// SetStatus sets the commit status named opt.Name on commit sha of the
// project to opt.State, with opt's description and target URL, without
// doubling it: the commit's newest status of that name is looked up
// first, and when it already says the same nothing is posted. GitLab's
// 400 for a status posted again in the state it is in ("Cannot transition
// status via :run from :running") counts as done too: the status is as
// asked.
//
// Running is not posted over a finished status (success, failed, canceled,
// skipped): GitLab would start another status, and another external
// pipeline, for a commit already judged, as on every restart of the agent
// that judges it again; the outcome posted next says what changed, if
// anything did.
//
// A status left running, by an agent killed before it posted the outcome,
// moves on to the state asked: GitLab updates the running record in place.
//
// The post itself is not retried on a server error, which may have taken
// effect: the newest status is looked up again before another try (see
// Retrier.CallOnce).
func SetStatus(ctx context.Context, c *gitlab.Client, r Retrier, project, sha string, opt gitlab.SetCommitStatusOptions) error {
	if opt.Name == nil || *opt.Name == "" {
		return errors.New("a commit status needs a name")
	}
	err := r.CallOnce(ctx, func() (bool, error) {
		cur, err := newestStatus(ctx, c, r, project, sha, *opt.Name)
		return cur != nil && (same(cur, opt) || opt.State == gitlab.Running && finished(cur.Status)), err
	}, func() (*gitlab.Response, error) {
		_, resp, err := c.Commits.SetCommitStatus(project, sha, &opt, gitlab.WithContext(ctx))
		return resp, err
	})
	if IsUnchangedStatus(err) {
		return nil
	}
	return err
}

// Commit states in GitHub's words, which the agent's notifiers and
// previews speak.
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
)

// CommitState maps a commit state in GitHub's words, and its description,
// to GitLab's. pending is GitLab's running: the agent posts it while it
// works (previewing, reconciling), and GitLab's own pending means queued,
// waiting for a runner. failure is failed; so is error, which GitLab has
// no word for, and the description says so. Anything else is failed too,
// saying what it was.
func CommitState(state, desc string) (gitlab.BuildStateValue, string) {
	switch state {
	case StatePending:
		return gitlab.Running, desc
	case StateSuccess:
		return gitlab.Success, desc
	case StateFailure:
		return gitlab.Failed, desc
	case StateError:
		return gitlab.Failed, "error: " + desc
	}
	return gitlab.Failed, state + ": " + desc
}

// finished reports whether a commit status is in one of GitLab's final
// states.
func finished(status string) bool {
	switch gitlab.BuildStateValue(status) {
	case gitlab.Success, gitlab.Failed, gitlab.Canceled, gitlab.Skipped:
		return true
	}
	return false
}

// same reports whether a status already says what opt asks.
func same(cur *gitlab.CommitStatus, opt gitlab.SetCommitStatusOptions) bool {
	return cur.Status == string(opt.State) && cur.Description == deref(opt.Description) &&
		(opt.TargetURL == nil || cur.TargetURL == *opt.TargetURL)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// newestStatus returns the commit's newest status named name, on any ref,
// or nil.
func newestStatus(ctx context.Context, c *gitlab.Client, r Retrier, project, sha, name string) (*gitlab.CommitStatus, error) {
	opt := &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr(name), ListOptions: gitlab.ListOptions{PerPage: 100, Page: 1}}
	var newest *gitlab.CommitStatus
	for range maxStatusPages {
		var page []*gitlab.CommitStatus
		var next int64
		err := r.Call(ctx, func() (*gitlab.Response, error) {
			var resp *gitlab.Response
			var err error
			page, resp, err = c.Commits.GetCommitStatuses(project, sha, opt, gitlab.WithContext(ctx))
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		for _, st := range page {
			// GitLab filters by name; the check keeps a server that does
			// not from handing over another status.
			if st.Name == name && (newest == nil || newer(st, newest)) {
				newest = st
			}
		}
		if next == 0 {
			break
		}
		opt.Page = next
	}
	return newest, nil
}

// newer orders statuses by creation, then id.
func newer(a, b *gitlab.CommitStatus) bool {
	ta, tb := timeOf(a.CreatedAt), timeOf(b.CreatedAt)
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.ID > b.ID
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
