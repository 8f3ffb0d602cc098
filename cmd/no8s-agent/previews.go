package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/sync"
	"github.com/no8s/no8s-agent/webhook"
)

// previewSources lists the Git sources with pull-request previews on, each
// with its Git host (GitHub or GitLab) and a way to fetch a pull or merge
// request's head. Clones of
// pull requests live in cacheDir/<name>-pulls, apart from the source's own.
func previewSources(cfg *config.Config, jobs []sync.Job, cacheDir string, applied appliedFunc, log *slog.Logger) ([]*preview.Source, error) {
	targets := map[string]sync.Target{}
	for _, j := range jobs {
		targets[j.Target.Name] = j.Target
	}
	var out []*preview.Source
	for _, s := range cfg.Sources {
		if s.Git == nil || !s.PullRequests.Enabled {
			continue
		}
		host, ref, err := previewHost(s)
		if err != nil {
			return nil, fmt.Errorf("sources %s: %w", s.Name, err)
		}
		branch := s.Git.Branch
		if branch == "" {
			branch = git.DefaultBranch
		}
		g, name := s.Git, s.Name
		// Pull requests are held to the branch's signature policy: a preview
		// says what merging would be refused for.
		verify, err := gitVerify(name, g.Verify, applied)
		if err != nil {
			return nil, fmt.Errorf("sources %s: %w", name, err)
		}
		out = append(out, &preview.Source{
			Target: targets[name], Branch: branch, Host: host, DashboardURL: s.PullRequests.DashboardURL,
			Interval: s.PullRequests.Interval.Duration,
			Fetch: func(ctx context.Context, number int) (*source.Snapshot, error) {
				src, err := git.New(git.Config{
					Name: name, URL: g.URL, Path: g.Path, Timeout: g.Timeout.Duration, Logger: log,
					Ref:      ref(number),
					CacheDir: filepath.Join(cacheDir, name+config.PullRequestCacheSuffix),
					Auth: git.Auth{Username: g.Auth.Username(), Password: g.Auth.Password(), Token: g.Auth.Token(),
						SSHKeyFile: g.Auth.SSHKeyFile, KnownHostsFile: g.Auth.KnownHostsFile, SSHKeyPassphrase: g.Auth.SSHKeyPassphrase()},
					Verify: verify,
					Load:   loadOptions(s),
				})
				if err != nil {
					return nil, err
				}
				return src.Fetch(ctx)
			},
		})
	}
	return out, nil
}

// previewHost is the Git host of a source's pull requests, and the ref
// that follows one of them.
func previewHost(s config.Source) (preview.Host, func(number int) git.Ref, error) {
	if s.PullRequests.Provider == config.HostGitLab {
		host, err := gitlabPreviewHost(s)
		return host, func(iid int) git.Ref { return git.Ref{MergeRequest: iid} }, err
	}
	host, err := githubPreviewHost(s)
	return host, func(n int) git.Ref { return git.Ref{PullRequest: n} }, err
}

// githubPreviewHost is the GitHub repository the source's URL names.
func githubPreviewHost(s config.Source) (*preview.GitHub, error) {
	parts := strings.Split(webhook.RepoKey(s.Git.URL), "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("pull-request previews need a GitHub repository URL (https://HOST/OWNER/REPO), not %q", s.Git.URL)
	}
	client, err := githubapi.NewClient(s.PullRequests.APIURL, s.PullRequests.Token())
	if err != nil {
		return nil, fmt.Errorf("pullRequests.apiURL: %w", err)
	}
	return &preview.GitHub{Client: client, Owner: parts[1], Repo: parts[2]}, nil
}

// gitlabPreviewHost is the GitLab project the source's URL names, on the
// instance at pullRequests.apiURL.
func gitlabPreviewHost(s config.Source) (*preview.GitLab, error) {
	project, err := gitlabapi.ProjectPath(s.Git.URL, s.PullRequests.APIURL)
	if err != nil {
		return nil, fmt.Errorf("merge-request previews need a GitLab project URL (https://HOST/GROUP/PROJECT): %w", err)
	}
	client, err := gitlabapi.NewClient(s.PullRequests.APIURL, s.PullRequests.Token())
	if err != nil {
		return nil, fmt.Errorf("pullRequests.apiURL: %w", err)
	}
	return &preview.GitLab{Client: client, Project: project}, nil
}

// gitlabPreviews reports whether a source previews GitLab merge requests:
// only then are Merge Request Hooks acted on.
func gitlabPreviews(cfg *config.Config) bool {
	return slices.ContainsFunc(cfg.Sources, func(s config.Source) bool {
		return s.Git != nil && s.PullRequests.Enabled && s.PullRequests.Provider == config.HostGitLab
	})
}
