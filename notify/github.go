package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/githubapi"
)

// GitHubStatuses posts commit statuses on GitHub or GitHub Enterprise
// Server.
type GitHubStatuses struct {
	Client *github.Client
	Retry  githubapi.Retrier
	// Repository is owner/name; empty takes it from the source's URL.
	Repository string
}

// PostStatus creates the status; GitHub keeps the newest per context.
func (g *GitHubStatuses) PostStatus(ctx context.Context, remote, sha string, s Status) error {
	owner, repo, ok := ownerRepo(remote)
	if g.Repository != "" {
		owner, repo, ok = strings.Cut(g.Repository, "/")
	}
	if !ok {
		return &PermanentError{fmt.Errorf("%s is not a GitHub repository", remote)}
	}
	status := &github.RepoStatus{State: github.String(s.State), Description: github.String(s.Description),
		Context: github.String(s.Name)}
	if s.TargetURL != "" {
		status.TargetURL = github.String(s.TargetURL)
	}
	err := g.Retry.Call(ctx, func() (*github.Response, error) {
		_, resp, err := g.Client.Repositories.CreateStatus(ctx, owner, repo, sha, status)
		return resp, err
	})
	var cfg *githubapi.ConfigError
	if errors.As(err, &cfg) {
		return &PermanentError{err}
	}
	return err
}

// OnGitHub reports whether a Git remote URL names a repository whose
// owner and name a commit status can address.
func OnGitHub(remote string) bool {
	_, _, ok := ownerRepo(remote)
	return ok
}

// ownerRepo reads owner and repository from a GitHub remote URL.
func ownerRepo(remote string) (owner, repo string, ok bool) {
	u, err := url.Parse(remote)
	if err != nil || u.Host == "" {
		// scp-like git@github.com:owner/repo.git
		if at := strings.Index(remote, "@"); at >= 0 {
			if colon := strings.Index(remote[at:], ":"); colon > 0 {
				u = &url.URL{Host: remote[at+1 : at+colon], Path: remote[at+colon+1:]}
			}
		}
		if u == nil || u.Host == "" {
			return "", "", false
		}
	}
	parts := strings.Split(strings.Trim(strings.TrimSuffix(u.Path, ".git"), "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}
