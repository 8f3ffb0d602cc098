package gitlabapi

import (
	"cmp"
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
// A status left running, by an agent killed before it posted the outcome,
// moves on to the state asked: GitLab updates the running record in place.
//
// The post itself is not retried on a server error, which may have taken
// effect: the newest status is looked up again before another try, up to
// r.ServerErrors times.
func SetStatus(ctx context.Context, c *gitlab.Client, r Retrier, project, sha string, opt gitlab.SetCommitStatusOptions) error {
	if opt.Name == nil || *opt.Name == "" {
		return errors.New("a commit status needs a name")
	}
	backoff := cmp.Or(r.Backoff, defaultBackoff)
	maxBackoff := max(cmp.Or(r.MaxBackoff, defaultMaxBackoff), backoff)
	limit := cmp.Or(r.ServerErrors, maxServerErrors)
	post := r
	post.NoServerRetry = true
	for attempt := 1; ; attempt++ {
		cur, err := newestStatus(ctx, c, r, project, sha, *opt.Name)
		if err != nil {
			return err
		}
		if cur != nil && same(cur, opt) {
			return nil
		}
		err = post.Call(ctx, func() (*gitlab.Response, error) {
			_, resp, err := c.Commits.SetCommitStatus(project, sha, &opt, gitlab.WithContext(ctx))
			return resp, err
		})
		switch {
		case err == nil || IsUnchangedStatus(err):
			return nil
		case IsTransient(err) && (limit < 0 || attempt <= limit):
			if err := Sleep(ctx, backoff); err != nil {
				return err
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		return err
	}
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
