package notify

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
)

// GitLabStatuses posts commit statuses on gitlab.com or a self-managed
// GitLab. States are mapped as gitlabapi.CommitState says: pending is
// GitLab's running (the resources are reconciling; GitLab's own pending
// means queued for a runner), failure and error are failed, the
// description of an error saying so. A status is moved in place rather
// than doubled, and one that already says what is asked is not posted
// again (see gitlabapi.SetStatus).
type GitLabStatuses struct {
	// Client talks to the GitLab instance with a token of the api scope
	// and the Developer role in the project.
	Client *gitlab.Client
	Retry  gitlabapi.Retrier
	// Repository is the project's path, group/sub/project; empty takes it
	// from the source's Git remote URL.
	Repository string
}

// PostStatus sets the status on commit sha of the source's project.
func (g *GitLabStatuses) PostStatus(ctx context.Context, remote, sha string, s Status) error {
	project := g.Repository
	if project == "" {
		p, err := gitlabapi.ProjectPath(remote, g.Client.BaseURL().String())
		if err != nil {
			return &PermanentError{fmt.Errorf("no GitLab project to post statuses to (set the provider's repository): %w", err)}
		}
		project = p
	}
	state, desc := gitlabapi.CommitState(s.State, s.Description)
	opt := gitlab.SetCommitStatusOptions{State: state, Name: gitlab.Ptr(s.Name), Description: gitlab.Ptr(desc)}
	if s.TargetURL != "" {
		opt.TargetURL = gitlab.Ptr(s.TargetURL)
	}
	err := gitlabapi.SetStatus(ctx, g.Client, g.Retry, project, sha, opt)
	if gitlabapi.IsConfig(err) {
		return &PermanentError{err}
	}
	return err
}

// FollowsGitLab reports whether a GitLab provider without a list of
// sources posts statuses for a source whose Git remote URL is remote: one
// on the GitLab instance at apiURL (gitlab.com when empty), by host name
// (the port of an SSH remote says nothing of the web's).
func FollowsGitLab(remote, apiURL string) bool {
	if strings.TrimSpace(apiURL) == "" {
		return gitlabapi.OnGitLab(remote)
	}
	base, err := gitlabapi.ParseBaseURL(apiURL)
	if err != nil {
		return false
	}
	p, err := gitlabapi.ParseRemote(remote)
	if err != nil {
		return false
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Hostname(), base.Hostname()) ||
		gitlabapi.OnGitLab(base.String()) && gitlabapi.OnGitLab(remote)
}
