package config

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
)

// Provider types of notifications.
const (
	ProviderWebhook = "webhook"
	ProviderSlack   = "slack"
	ProviderGitHub  = "github"
	ProviderGitLab  = "gitlab"
)

// NotificationEvents are the events an alert may name.
var NotificationEvents = []string{"ResourceFailed", "ResourceRecovered", "DriftDetected", "DestroyFailed",
	"SourceFailed", "SourceStalled", "SourceRecovered", "RevisionApplied", "RevisionRefused"}

// Notifications configures who is told what: providers by name, and the
// alerts that route events to them.
type Notifications struct {
	Providers map[string]NotificationProvider `json:"providers,omitempty"`
	Alerts    []Alert                         `json:"alerts,omitempty"`
}

// NotificationProvider is one place notifications go.
type NotificationProvider struct {
	// Type is webhook, slack, github or gitlab.
	Type string `json:"type"`
	// URL (webhook) or URLEnv (webhook, slack: the URL is a secret) is
	// where to post.
	URL    string `json:"url,omitempty"`
	URLEnv string `json:"urlEnv,omitempty"`
	// SecretEnv (webhook) names the HMAC key of the signature.
	SecretEnv string `json:"secretEnv,omitempty"`
	// TokenEnv (github, gitlab) names a token allowed to write commit
	// statuses; APIURL is the REST API (default https://api.github.com/),
	// or GitLab's address (https://HOST, default https://gitlab.com).
	TokenEnv string `json:"tokenEnv,omitempty"`
	APIURL   string `json:"apiURL,omitempty"`
	// Repository (github, gitlab) is owner/name on GitHub, the project's
	// path (group/sub/project) on GitLab; by default each Git source's own.
	Repository string `json:"repository,omitempty"`
	// Sources (github, gitlab) are the sources whose commits get statuses;
	// by default every Git source on the host: GitHub for github; for
	// gitlab, gitlab.com, or the host of APIURL.
	Sources []string `json:"sources,omitempty"`
	// DashboardURL is the agent's dashboard as people reach it, linked to
	// from messages and statuses.
	DashboardURL string `json:"dashboardURL,omitempty"`

	url, secretValue, token *secret
}

// Endpoint returns the URL to post to: URL, or the value URLEnv names.
func (p NotificationProvider) Endpoint() string {
	if p.URL != "" {
		return p.URL
	}
	return p.url.get()
}

// Secret returns the webhook's HMAC key, or "".
func (p NotificationProvider) Secret() string { return p.secretValue.get() }

// Token returns the GitHub or GitLab token, or "".
func (p NotificationProvider) Token() string { return p.token.get() }

// Alert sends events to providers; empty filters match everything.
type Alert struct {
	Providers []string `json:"providers"`
	// Events default to the failures and recoveries.
	Events  []string `json:"events,omitempty"`
	Sources []string `json:"sources,omitempty"`
	Kinds   []string `json:"kinds,omitempty"`
	// Namespaces select events about resources in these namespaces (events
	// about sources and cluster-scoped resources never match).
	Namespaces []string          `json:"namespaces,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ProviderNames returns the providers' names, sorted.
func (n Notifications) ProviderNames() []string {
	names := make([]string, 0, len(n.Providers))
	for name := range n.Providers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// validate checks the providers and alerts.
func (n Notifications) validate(ps *problems) {
	for _, name := range n.ProviderNames() {
		p := n.Providers[name]
		key := "notifications.providers." + name
		switch p.Type {
		case ProviderWebhook:
			if (p.URL == "") == (p.URLEnv == "") {
				ps.add(key, "a webhook needs url or urlEnv (one of them)")
			}
			if p.URL != "" {
				checkHTTPURL(ps, key+".url", p.URL)
			}
		case ProviderSlack:
			if p.URLEnv == "" {
				ps.add(key+".urlEnv", "required: the incoming webhook's URL is a secret, so it comes from the environment")
			}
			if p.URL != "" {
				ps.add(key+".url", "a Slack webhook URL is a secret: name its variable in urlEnv instead")
			}
		case ProviderGitHub:
			if p.TokenEnv == "" {
				ps.add(key+".tokenEnv", "required: a token allowed to write commit statuses")
			}
			if p.APIURL != "" {
				checkHTTPURL(ps, key+".apiURL", p.APIURL)
			}
			if p.Repository != "" {
				if o, r, ok := strings.Cut(p.Repository, "/"); !ok || o == "" || r == "" || strings.Contains(r, "/") {
					ps.add(key+".repository", "must be owner/name, not %q", p.Repository)
				}
			}
		case ProviderGitLab:
			if p.TokenEnv == "" {
				ps.add(key+".tokenEnv", "required: a token allowed to write commit statuses (Developer role, api scope)")
			}
			if p.APIURL != "" {
				checkHTTPURL(ps, key+".apiURL", p.APIURL)
			}
			if p.Repository != "" {
				if parts := strings.Split(p.Repository, "/"); len(parts) < 2 || slices.Contains(parts, "") {
					ps.add(key+".repository", "must be the project's path, group/project or group/sub/project, not %q", p.Repository)
				}
			}
		case "":
			ps.add(key+".type", "required: webhook, slack, github or gitlab")
		default:
			ps.add(key+".type", "unknown type %q: webhook, slack, github or gitlab", p.Type)
		}
		if p.Type != ProviderWebhook && p.SecretEnv != "" {
			ps.add(key+".secretEnv", "only a webhook signs its requests")
		}
		if p.Type != ProviderGitHub && p.Type != ProviderGitLab && (p.TokenEnv != "" || p.APIURL != "" || p.Repository != "" || len(p.Sources) > 0) {
			ps.add(key, "tokenEnv, apiURL, repository and sources are settings of a github or gitlab provider")
		}
		if p.DashboardURL != "" {
			checkHTTPURL(ps, key+".dashboardURL", p.DashboardURL)
		}
	}
	for i, a := range n.Alerts {
		key := fmt.Sprintf("notifications.alerts[%d]", i)
		if len(a.Providers) == 0 {
			ps.add(key+".providers", "required: the providers to send to")
		}
		for _, p := range a.Providers {
			if _, ok := n.Providers[p]; !ok {
				ps.add(key+".providers", "no provider %q in notifications.providers (have %s)", p, strings.Join(n.ProviderNames(), ", "))
			}
		}
		for _, e := range a.Events {
			if !slices.Contains(NotificationEvents, e) {
				ps.add(key+".events", "unknown event %q (known: %s)", e, strings.Join(NotificationEvents, ", "))
			}
		}
		for j, ns := range a.Namespaces {
			for _, msg := range manifest.NamespaceProblems(ns) {
				ps.add(fmt.Sprintf("%s.namespaces[%d]", key, j), "Invalid value: %q: %s", ns, msg)
			}
		}
	}
}

func checkHTTPURL(ps *problems, key, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps.add(key, "%q is not an http or https URL", raw)
	}
}

// resolve reads the providers' secrets.
func (n *Notifications) resolve(get func(key, name string) *secret) {
	for _, name := range n.ProviderNames() {
		p := n.Providers[name]
		key := "notifications.providers." + name + "."
		p.url = get(key+"urlEnv", p.URLEnv)
		p.secretValue = get(key+"secretEnv", p.SecretEnv)
		p.token = get(key+"tokenEnv", p.TokenEnv)
		n.Providers[name] = p
	}
}

// secrets lists the providers' secrets for Config.Secrets.
func (n Notifications) secrets(add func(setting, env string, v *secret)) {
	for _, name := range n.ProviderNames() {
		p := n.Providers[name]
		key := "notifications.providers." + name + "."
		add(key+"urlEnv", p.URLEnv, p.url)
		add(key+"secretEnv", p.SecretEnv, p.secretValue)
		add(key+"tokenEnv", p.TokenEnv, p.token)
	}
}
