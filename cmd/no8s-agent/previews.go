package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/sync"
	"github.com/no8s/no8s-agent/webhook"
)

// previewSources lists the Git sources with pull-request previews on, each
// with a GitHub client and a way to fetch a pull request's head. Clones of
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
		host, err := previewHost(s)
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
					Ref:      git.Ref{PullRequest: number},
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

// previewHost is the Git host of a source's pull requests.
func previewHost(s config.Source) (preview.Host, error) {
	switch s.PullRequests.Provider {
	case config.HostGitLab:
		return nil, fmt.Errorf("pullRequests.provider: previews of GitLab merge requests are not available yet")
	default:
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
}
