package preview

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/webhook"
)

// maxGitHubComment is GitHub's limit on a comment's length.
const maxGitHubComment = 65536

// GitHub is a Host on GitHub or GitHub Enterprise Server.
type GitHub struct {
	// Client talks to GitHub with the token for previews.
	Client *github.Client
	// Owner and Repo name the repository.
	Owner, Repo string
	// Retry tunes the retries of calls; the zero value retries after a
	// second, growing to a minute.
	Retry githubapi.Retrier
}

func (g *GitHub) retrier() githubapi.Retrier {
	if g.Retry.Backoff == 0 {
		return githubapi.Retrier{Backoff: time.Second, MaxBackoff: time.Minute}
	}
	return g.Retry
}

// Open lists the open pull requests against branch, up to a thousand.
func (g *GitHub) Open(ctx context.Context, branch string) ([]Pull, error) {
	var open []Pull
	opts := &github.PullRequestListOptions{State: "open", Base: branch, ListOptions: github.ListOptions{PerPage: 100}}
	for page := 1; page <= 10; page++ {
		opts.Page = page
		var prs []*github.PullRequest
		err := g.retrier().Call(ctx, func() (resp *github.Response, err error) {
			prs, resp, err = g.Client.PullRequests.List(ctx, g.Owner, g.Repo, opts)
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		for _, pr := range prs {
			open = append(open, Pull{Number: pr.GetNumber(), HeadSHA: pr.GetHead().GetSHA(), BaseRef: pr.GetBase().GetRef()})
		}
		if len(prs) < opts.PerPage {
			break
		}
	}
	return open, nil
}

// SetStatus creates the commit status; GitHub keeps the newest per context.
func (g *GitHub) SetStatus(ctx context.Context, sha, state, desc string) error {
	return g.retrier().Call(ctx, func() (*github.Response, error) {
		_, resp, err := g.Client.Repositories.CreateStatus(ctx, g.Owner, g.Repo, sha, &github.RepoStatus{
			State: github.String(state), Description: github.String(desc), Context: github.String(StatusContext)})
		return resp, err
	})
}

// Comment edits the pull request's comment that starts with marker, or
// creates it.
func (g *GitHub) Comment(ctx context.Context, number int, marker, body string) error {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for page := 1; page <= 30; page++ {
		opts.Page = page
		var comments []*github.IssueComment
		err := g.retrier().Call(ctx, func() (resp *github.Response, err error) {
			comments, resp, err = g.Client.Issues.ListComments(ctx, g.Owner, g.Repo, number, opts)
			return resp, err
		})
		if err != nil {
			return fmt.Errorf("list the comments of #%d: %w", number, err)
		}
		for _, c := range comments {
			if !strings.HasPrefix(c.GetBody(), marker) {
				continue
			}
			if c.GetBody() == body {
				return nil
			}
			return g.retrier().Call(ctx, func() (*github.Response, error) {
				_, resp, err := g.Client.Issues.EditComment(ctx, g.Owner, g.Repo, c.GetID(), &github.IssueComment{Body: github.String(body)})
				return resp, err
			})
		}
		if len(comments) < opts.PerPage {
			break
		}
	}
	return g.retrier().Call(ctx, func() (*github.Response, error) {
		_, resp, err := g.Client.Issues.CreateComment(ctx, g.Owner, g.Repo, number, &github.IssueComment{Body: github.String(body)})
		return resp, err
	})
}

// MaxComment is GitHub's limit.
func (g *GitHub) MaxComment() int { return maxGitHubComment }

// Name is "pull request #N".
func (g *GitHub) Name(number int) string { return fmt.Sprintf("pull request #%d", number) }

// OnPullRequest handles a verified pull_request webhook: opened,
// synchronize and reopened previews the pull request for every source of
// that repository whose branch it targets; closed stops previewing it.
func (p *Previewer) OnPullRequest(ctx context.Context, ev *github.PullRequestEvent) error {
	pr := ev.GetPullRequest()
	repo := ev.GetRepo()
	keys := map[string]bool{}
	for _, u := range []string{repo.GetCloneURL(), repo.GetHTMLURL(), repo.GetSSHURL(), repo.GetGitURL()} {
		if k := webhook.RepoKey(u); k != "" {
			keys[k] = true
		}
	}
	for name, w := range p.sources {
		if !keys[webhook.RepoKey(w.src.Target.URL)] || pr.GetBase().GetRef() != w.src.Branch {
			continue
		}
		switch ev.GetAction() {
		case "opened", "synchronize", "reopened":
			p.Request(name, Pull{Number: pr.GetNumber(), HeadSHA: pr.GetHead().GetSHA(), BaseRef: pr.GetBase().GetRef()})
		case "closed":
			p.Forget(name, pr.GetNumber())
		}
	}
	return nil
}
