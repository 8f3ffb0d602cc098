package main

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/metrics"
	"github.com/no8s/no8s-agent/notify"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// newDispatcher builds the notification providers the configuration names
// and the dispatcher that routes and delivers notices. It runs without
// providers too: notices are then marked done as they come, and trimmed.
func newDispatcher(cfg *config.Config, st store.Store, masker *redact.Masker, m *metrics.Metrics, owner string,
	log *slog.Logger) (*notify.Dispatcher, error) {
	providers := map[string]notify.Provider{}
	var commits []string
	urls := map[string]string{}
	for _, s := range cfg.Sources {
		if s.Git != nil {
			urls[s.Name] = s.Git.URL
		}
	}
	for _, name := range cfg.Notifications.ProviderNames() {
		p := cfg.Notifications.Providers[name]
		switch p.Type {
		case config.ProviderWebhook:
			providers[name] = &notify.Webhook{URL: p.Endpoint(), Secret: p.Secret(), Masker: masker}
		case config.ProviderSlack:
			providers[name] = &notify.Slack{URL: p.Endpoint(), DashboardURL: p.DashboardURL, Masker: masker}
		case config.ProviderGitHub, config.ProviderGitLab:
			host, err := statusHost(p)
			if err != nil {
				return nil, fmt.Errorf("notifications.providers.%s.apiURL: %w", name, err)
			}
			providers[name] = &notify.CommitStatus{Store: st, DashboardURL: p.DashboardURL, Masker: masker, Host: host}
			commits = append(commits, name)
		}
	}
	follows := func(provider, source string) bool {
		p := cfg.Notifications.Providers[provider]
		if len(p.Sources) > 0 {
			return slices.Contains(p.Sources, source)
		}
		url, git := urls[source]
		switch {
		case !git:
			return false
		case p.Repository != "":
			return true
		case p.Type == config.ProviderGitLab:
			return notify.FollowsGitLab(url, p.APIURL)
		}
		// A repository on gitlab.com is not GitHub's.
		return notify.OnGitHub(url) && !gitlabapi.OnGitLab(url)
	}
	alerts := make([]notify.Alert, len(cfg.Notifications.Alerts))
	for i, a := range cfg.Notifications.Alerts {
		alerts[i] = notify.Alert{Providers: a.Providers, Events: a.Events, Sources: a.Sources, Kinds: a.Kinds,
			Namespaces: a.Namespaces, Labels: a.Labels}
	}
	return notify.New(st, notify.Options{Owner: owner, Providers: providers, Alerts: alerts, Commits: commits,
		Follows: follows, OnDelivery: m.ObserveNotification, Masker: masker, Logger: log}), nil
}

// statusHost is the Git host a commit-status provider posts to.
func statusHost(p config.NotificationProvider) (notify.StatusHost, error) {
	if p.Type == config.ProviderGitLab {
		client, err := gitlabapi.NewClient(p.APIURL, p.Token())
		if err != nil {
			return nil, err
		}
		return &notify.GitLabStatuses{Client: client, Repository: p.Repository, Retry: gitlabapi.Retrier{ServerErrors: 2}}, nil
	}
	client, err := githubapi.NewClient(p.APIURL, p.Token())
	if err != nil {
		return nil, err
	}
	return &notify.GitHubStatuses{Client: client, Repository: p.Repository, Retry: githubapi.Retrier{ServerErrors: 2}}, nil
}
