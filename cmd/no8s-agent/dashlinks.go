package main

import (
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/dashboard"
)

// dashboardSourceLinks returns what the configuration says of each
// source's Git host, for the dashboard's links to commits: its commitURL,
// and the provider its pull-request previews name.
func dashboardSourceLinks(cfg *config.Config) func(name string) dashboard.SourceLinks {
	links := make(map[string]dashboard.SourceLinks, len(cfg.Sources))
	for _, s := range cfg.Sources {
		links[s.Name] = dashboard.SourceLinks{CommitURL: s.CommitURL, Provider: s.PullRequests.Provider}
	}
	return func(name string) dashboard.SourceLinks { return links[name] }
}
