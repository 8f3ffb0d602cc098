package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/no8s/no8s-agent/manifest"
	nosync "github.com/no8s/no8s-agent/sync"
)

// Secret values used by the tests; none may ever appear in output.
const (
	githubToken   = "ghp_s3cr3ttoken0123456789"
	apiToken      = "api-s3cr3t-write-token"
	webhookSecret = "whsec-s3cr3t-webhook"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

var designEnv = env(map[string]string{
	"GITHUB_TOKEN":               githubToken,
	"NO8S_API_TOKEN":             apiToken,
	"NO8S_GITHUB_WEBHOOK_SECRET": webhookSecret,
})

func dur(d time.Duration) Duration { return Duration{d} }

func ptr[T any](v T) *T { return &v }

// clearSecrets drops the resolved secrets so that configurations can be
// compared with reflect.DeepEqual; the accessors are checked separately.
func clearSecrets(c *Config) {
	for i := range c.Sources {
		if g := c.Sources[i].Git; g != nil {
			g.Auth.token, g.Auth.username, g.Auth.password, g.Auth.passphrase = nil, nil, nil, nil
		}
		c.Sources[i].PullRequests.token = nil
	}
	c.API.writeToken, c.API.readToken, c.Webhooks.githubSecret = nil, nil, nil
	c.Webhooks.gitlabToken, c.Webhooks.gitlabSigningKey = nil, nil
}

// normalizeActions rewrites the raw action settings to a canonical form so
// that equal settings compare equal whatever their spacing or key order.
func normalizeActions(t *testing.T, c *Config) {
	t.Helper()
	for name, a := range c.Actions {
		if a.Config == nil {
			continue
		}
		var v any
		if err := json.Unmarshal(a.Config, &v); err != nil {
			t.Fatalf("actions.%s.config: %v", name, err)
		}
		a.Config, _ = json.Marshal(v)
		c.Actions[name] = a
	}
}

func designConfig() *Config {
	return &Config{
		Database: "postgres://no8s@localhost:5432/no8s",
		Listen:   "127.0.0.1:8080",
		Sources: []Source{
			{
				Name: "infra",
				Git: &GitSource{
					URL: "https://github.com/acme/infra.git", Branch: "main", Path: "manifests",
					Interval: dur(time.Minute), Timeout: dur(60 * time.Second),
					Auth: GitAuth{TokenEnv: "GITHUB_TOKEN"},
				},
				Prune:        Prune{Enabled: ptr(true), MaxDeletes: MaxDeletes{Percent: 25, Set: true}},
				PullRequests: PullRequests{Enabled: true, Provider: HostGitHub, Interval: dur(5 * time.Minute), APIURL: "https://api.github.com/"},
				Interval:     dur(time.Minute),
				MaxFileSize:  DefaultMaxFileSize,
			},
			{Name: "local", Dir: "./examples/repo", Prune: Prune{Enabled: ptr(true)}, Interval: dur(time.Minute), MaxFileSize: DefaultMaxFileSize},
		},
		MaxFileSize: DefaultMaxFileSize,
		Actions: map[string]Action{
			"provision-db": {Plugin: "github_actions", Config: json.RawMessage(`{"apiURL":"https://api.github.com/",` +
				`"owner":"acme","pollInterval":"10s","ref":"main","repo":"pipelines","timeout":"1h",` +
				`"tokenEnv":"GITHUB_TOKEN","workflow":"db.yml"}`)},
			"echo": {Plugin: "exec", Config: json.RawMessage(`{"command":["./examples/scripts/echo-action.sh"],"timeout":"5m"}`)},
		},
		Reconcile: Reconcile{Workers: 8, LeaseDuration: dur(30 * time.Second),
			Backoff: Backoff{Initial: dur(time.Minute), Max: dur(17 * time.Hour)}},
		History:   History{MaxPerResource: 100, MaxAge: dur(720 * time.Hour)},
		Metrics:   Metrics{ResourceSeriesLimit: 1000},
		API:       API{WriteTokenEnv: "NO8S_API_TOKEN"},
		Webhooks:  Webhooks{GitHubSecretEnv: "NO8S_GITHUB_WEBHOOK_SECRET"},
		LogFormat: "text",
		LogLevel:  "info",
	}
}

func loadDesign(t *testing.T) *Config {
	t.Helper()
	c, err := Load(filepath.Join("testdata", "design.yaml"), designEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadDesignExample(t *testing.T) {
	t.Parallel()
	c := loadDesign(t)
	if got := c.Sources[0].Git.Auth.Token(); got != githubToken {
		t.Errorf("Token() = %q", got)
	}
	if got := c.Sources[0].PullRequests.Token(); got != githubToken {
		t.Errorf("previews' Token() = %q, want the source's git token", got)
	}
	if c.API.WriteToken() != apiToken || c.API.ReadToken() != "" || c.Webhooks.GitHubSecret() != webhookSecret {
		t.Errorf("API/webhook secrets not resolved: %q %q %q", c.API.WriteToken(), c.API.ReadToken(), c.Webhooks.GitHubSecret())
	}
	clearSecrets(c)
	normalizeActions(t, c)
	want := designConfig()
	normalizeActions(t, want)
	if !reflect.DeepEqual(c, want) {
		gotJSON, _ := json.MarshalIndent(c, "", "  ")
		wantJSON, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("got\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	c := loadDesign(t)
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(y, designEnv)
	if err != nil {
		t.Fatalf("parse of the marshalled config: %v\n%s", err, y)
	}
	clearSecrets(c)
	clearSecrets(again)
	normalizeActions(t, c)
	normalizeActions(t, again)
	if !reflect.DeepEqual(again, c) {
		t.Errorf("round trip changed the config:\n%s", y)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("sources:\n- name: infra\n  git: {url: 'git@github.com:acme/infra.git'}\n- name: local\n  dir: .\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Listen: DefaultListen,
		Sources: []Source{
			{Name: "infra", Git: &GitSource{URL: "git@github.com:acme/infra.git", Interval: dur(DefaultInterval), Timeout: dur(DefaultGitTimeout)},
				Prune: Prune{Enabled: ptr(true)}, Interval: dur(DefaultInterval), MaxFileSize: 3 << 19},
			{Name: "local", Dir: ".", Prune: Prune{Enabled: ptr(true)}, Interval: dur(DefaultInterval), MaxFileSize: 3 << 19},
		},
		MaxFileSize: 3 << 19, // 1.5 MiB
		Reconcile: Reconcile{Workers: 8, LeaseDuration: dur(30 * time.Second),
			Backoff: Backoff{Initial: dur(time.Minute), Max: dur(1024 * time.Minute)}},
		History:   History{MaxPerResource: DefaultHistoryPerResource, MaxAge: dur(DefaultHistoryMaxAge)},
		Metrics:   Metrics{ResourceSeriesLimit: DefaultResourceSeriesLimit},
		LogFormat: "text", LogLevel: "info",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	if !c.Sources[0].Prune.IsEnabled() || c.Sources[0].Prune.MaxDeletes.Set {
		t.Error("prune should default to enabled with no limit")
	}

	empty, err := Parse(nil, env(nil))
	if err != nil {
		t.Fatalf("empty file: %v", err)
	}
	if empty.Listen != DefaultListen || empty.Reconcile.Workers != DefaultWorkers {
		t.Errorf("empty file: defaults not applied: %+v", empty)
	}
}

// TestPullRequestHostDefaults checks which Git host previews talk to
// when the file does not say: GitLab for a repository on gitlab.com, over
// https or ssh, GitHub for the rest; and that a file that says keeps it.
func TestPullRequestHostDefaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url, provider, apiURL    string
		wantProvider, wantAPIURL string
	}{
		{"https://github.com/acme/infra.git", "", "", HostGitHub, DefaultGitHubAPIURL},
		{"https://gitlab.com/acme/platform/infra.git", "", "", HostGitLab, DefaultGitLabURL},
		{"git@gitlab.com:acme/infra.git", "", "", HostGitLab, DefaultGitLabURL},
		{"ssh://git@GitLab.com:22/acme/infra.git", "", "", HostGitLab, DefaultGitLabURL},
		{"https://gitlab.com.evil.example/acme/infra.git", "", "", HostGitHub, DefaultGitHubAPIURL},
		{"https://git.example.com/acme/infra.git", "gitlab", "https://git.example.com", HostGitLab, "https://git.example.com"},
		{"https://ghe.example.com/acme/infra.git", "github", "https://ghe.example.com/api/v3/", HostGitHub, "https://ghe.example.com/api/v3/"},
	} {
		doc := fmt.Sprintf("sources:\n- name: s\n  git: {url: '%s'}\n  pullRequests: {enabled: true, tokenEnv: T, provider: '%s', apiURL: '%s'}\n",
			c.url, c.provider, c.apiURL)
		cfg, err := Parse([]byte(doc), func(string) (string, bool) { return "tok", true })
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		pr := cfg.Sources[0].PullRequests
		if pr.Provider != c.wantProvider || pr.APIURL != c.wantAPIURL {
			t.Errorf("%s: provider %q, apiURL %q; want %q, %q", c.url, pr.Provider, pr.APIURL, c.wantProvider, c.wantAPIURL)
		}
	}
}

func TestIntervalSpellings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"git: {url: 'https://x/r.git', interval: 5m}", "5m0s"},
		{"interval: 5m\n  git: {url: 'https://x/r.git'}", "5m0s"},
		{"interval: 5m\n  git: {url: 'https://x/r.git', interval: 5m}", "5m0s"},
		{"interval: 2m\n  dir: .", "2m0s"},
	} {
		c, err := Parse([]byte("sources:\n- name: s\n  "+tc.yaml+"\n"), env(nil))
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		s := c.Sources[0]
		if s.Interval.String() != tc.want || (s.Git != nil && s.Git.Interval != s.Interval) {
			t.Errorf("%s: interval %s (git %v), want %s", tc.yaml, s.Interval, s.Git, tc.want)
		}
	}
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	const (
		git = "sources:\n- name: infra\n  git: {url: 'https://github.com/acme/infra.git'"
		dir = "sources:\n- name: local\n  dir: .\n"
	)
	tests := []struct {
		name, yaml, key, msg string
	}{
		{"unknown top-level key", "lisen: 1.2.3.4:80\n", "lisen", "unknown key"},
		{"unknown nested key", git + ", brnch: main}\n", "sources[0].git.brnch", "unknown key"},
		{"unknown key in a map value", "actions:\n  echo: {plugin: exec, settings: {}}\n", "actions.echo.settings", "unknown key"},
		{"bad duration", dir + "- name: infra\n  git: {url: 'https://x/r.git', interval: 1 minute}\n",
			"sources[1].git.interval", `invalid duration "1 minute"`},
		{"duration without unit", "reconcile: {leaseDuration: 30}\n", "reconcile.leaseDuration", "invalid duration 30"},
		{"missing token variable", git + ", auth: {tokenEnv: GITHUB_TOKEN}}\n",
			"sources[0].git.auth.tokenEnv", "environment variable GITHUB_TOKEN is not set"},
		{"missing password variable", git + ", auth: {usernameEnv: GIT_USER, passwordEnv: GIT_PASS}}\n",
			"sources[0].git.auth.passwordEnv", "GIT_PASS is not set"},
		{"missing passphrase variable", "sources:\n- name: s\n  git: {url: 'ssh://git@h/r.git', auth: {sshKeyFile: k, knownHostsFile: kh, sshKeyPassphraseEnv: PASS}}\n",
			"sources[0].git.auth.sshKeyPassphraseEnv", "PASS is not set"},
		{"empty variable", "api: {writeTokenEnv: EMPTY}\n", "api.writeTokenEnv", "EMPTY is empty"},
		{"missing read token", "api: {readTokenEnv: NOPE}\n", "api.readTokenEnv", "NOPE is not set"},
		{"missing webhook secret", "webhooks: {githubSecretEnv: NOPE}\n", "webhooks.githubSecretEnv", "NOPE is not set"},
		{"duplicate source names", dir + "- name: local\n  dir: other\n", "sources[1].name", `duplicate source name "local"`},
		{"upper-case source name", "sources:\n- name: Infra\n  dir: .\n", "sources[0].name", "invalid source name"},
		{"underscore in source name", "sources:\n- name: my_infra\n  dir: .\n", "sources[0].name", "invalid source name"},
		{"source name ending in a dash", "sources:\n- name: infra-\n  dir: .\n", "sources[0].name", "invalid source name"},
		{"long source name", "sources:\n- name: " + strings.Repeat("a", 64) + "\n  dir: .\n", "sources[0].name", "invalid source name"},
		{"reserved source name", "sources:\n- name: api\n  dir: .\n", "sources[0].name", "reserved"},
		// infra's pull requests are cloned into <cache-dir>/infra-pulls.
		{"source name of another's pull-request clones", "sources:\n- name: infra-pulls\n  git: {url: 'https://github.com/acme/other.git'}\n" +
			"- name: infra\n  git: {url: 'https://github.com/acme/infra.git'}\n  pullRequests: {enabled: true, tokenEnv: T}\n",
			"sources[0].name", `source infra keeps the clones of its pull requests in the cache folder "infra-pulls"`},
		{"source without name", "sources:\n- dir: .\n", "sources[0].name", "required"},
		{"git and dir", git + "}\n  dir: .\n", "sources[0]", "not both"},
		{"neither git nor dir", "sources:\n- name: x\n", "sources[0]", "set either git or dir"},
		{"git without url", "sources:\n- name: x\n  git: {branch: main}\n", "sources[0].git.url", "required"},
		{"ftp url", "sources:\n- name: x\n  git: {url: 'ftp://h/r.git'}\n", "sources[0].git.url", `unsupported URL scheme "ftp"`},
		{"url without scheme", "sources:\n- name: x\n  git: {url: github.com/acme/infra}\n", "sources[0].git.url", "not a URL"},
		{"url without host", "sources:\n- name: x\n  git: {url: 'https:///r.git'}\n", "sources[0].git.url", "no host"},
		{"password in url", "sources:\n- name: x\n  git: {url: 'https://u:p@h/r.git'}\n", "sources[0].git.url", "password"},
		{"short commit", git + ", commit: abc1234}\n", "sources[0].git.commit", "full commit hash"},
		{"path leaving the repository", git + ", path: ../other}\n", "sources[0].git.path", "inside the repository"},
		{"absolute path", git + ", path: /etc}\n", "sources[0].git.path", "inside the repository"},
		{"zero git timeout", git + ", timeout: 0s}\n", "sources[0].git.timeout", "must be positive"},
		{"negative interval", git + ", interval: -1m}\n", "sources[0].git.interval", "must be positive"},
		{"conflicting intervals", "sources:\n- name: s\n  interval: 1m\n  git: {url: 'https://h/r.git', interval: 2m}\n",
			"sources[0].git.interval", "set only one"},
		{"two auth methods", git + ", auth: {tokenEnv: T, sshKeyFile: k, knownHostsFile: kh}}\n", "sources[0].git.auth", "only one"},
		{"token over ssh", "sources:\n- name: s\n  git: {url: 'git@github.com:a/b.git', auth: {tokenEnv: T}}\n", "sources[0].git.auth", "http(s) URL"},
		{"ssh key over https", git + ", auth: {sshKeyFile: k, knownHostsFile: kh}}\n", "sources[0].git.auth.sshKeyFile", "ssh URL"},
		{"ssh key without known hosts", "sources:\n- name: s\n  git: {url: 'ssh://git@h/r.git', auth: {sshKeyFile: k}}\n",
			"sources[0].git.auth.knownHostsFile", "required"},
		{"username without password", git + ", auth: {usernameEnv: U}}\n", "sources[0].git.auth.passwordEnv", "required"},
		{"pull requests without a token", git + "}\n  pullRequests: {enabled: true}\n", "sources[0].pullRequests.tokenEnv", "token of the Git host"},
		{"pull requests of an unknown host", git + "}\n  pullRequests: {enabled: true, tokenEnv: T, provider: gitea}\n",
			"sources[0].pullRequests.provider", `must be github or gitlab, not "gitea"`},
		{"self-managed GitLab without its address", git + "}\n  pullRequests: {enabled: true, tokenEnv: T, provider: gitlab}\n",
			"sources[0].pullRequests.apiURL", "self-managed GitLab"},
		{"pull requests with a bad dashboard URL", git + "}\n  pullRequests: {enabled: true, tokenEnv: T, dashboardURL: 'no8s.local'}\n",
			"sources[0].pullRequests.dashboardURL", "not an http or https URL"},
		{"pull requests with a bad API URL", git + "}\n  pullRequests: {enabled: true, tokenEnv: T, apiURL: 'ftp://x'}\n",
			"sources[0].pullRequests.apiURL", "http(s) URL"},
		{"pull requests on a folder", "sources:\n- name: s\n  dir: .\n  pullRequests: {enabled: true, tokenEnv: T}\n",
			"sources[0].pullRequests.enabled", "git source"},
		{"maxDeletes over 100%", dir + "  prune: {maxDeletes: 150%}\n", "sources[0].prune.maxDeletes", "between 0% and 100%"},
		{"negative maxDeletes", dir + "  prune: {maxDeletes: -1}\n", "sources[0].prune.maxDeletes", "negative"},
		{"negative maxDeletes percent", dir + "  prune: {maxDeletes: -5%}\n", "sources[0].prune.maxDeletes", "negative"},
		{"garbage maxDeletes", dir + "  prune: {maxDeletes: lots}\n", "sources[0].prune.maxDeletes", `invalid value "lots"`},
		{"fractional maxDeletes", dir + "  prune: {maxDeletes: 2.5}\n", "sources[0].prune.maxDeletes", "invalid value"},
		{"prune enabled not boolean", dir + "  prune: {enabled: sometimes}\n", "sources[0].prune.enabled", "must be true or false"},
		{"unknown fields mode", dir + "  unknownFields: ignore\n", "sources[0].unknownFields", `must be strict, warn or prune, not "ignore"`},
		{"api unknown fields mode", "api: {unknownFields: Strict}\n", "api.unknownFields", `must be strict, warn or prune, not "Strict"`},
		{"commit URL without its hash", git + "}\n  commitURL: 'https://git.example.com/infra/commit/'\n", "sources[0].commitURL",
			"does not say where the commit's hash goes: put {sha} there"},
		{"commit URL of another scheme", git + "}\n  commitURL: 'javascript:alert({sha})'\n", "sources[0].commitURL",
			"not an http(s) URL"},
		{"commit URL with credentials", git + "}\n  commitURL: 'https://u:p@git.example.com/c/{sha}'\n", "sources[0].commitURL",
			"not an http(s) URL without credentials"},
		{"zero workers", "reconcile: {workers: 0}\n", "reconcile.workers", "at least 1"},
		{"negative workers", "reconcile: {workers: -2}\n", "reconcile.workers", "at least 1"},
		{"workers not a number", "reconcile: {workers: eight}\n", "reconcile.workers", "whole number"},
		{"notification type", "notifications: {providers: {x: {type: pager}}}\n", "notifications.providers.x.type", `unknown type "pager"`},
		{"webhook without url", "notifications: {providers: {x: {type: webhook}}}\n", "notifications.providers.x", "url or urlEnv"},
		{"slack url in the file", "notifications: {providers: {x: {type: slack, url: \"https://hooks.slack.com/services/T/B/C\"}}}\n",
			"notifications.providers.x.url", "is a secret"},
		{"github without token", "notifications: {providers: {x: {type: github}}}\n", "notifications.providers.x.tokenEnv", "required"},
		{"gitlab without token", "notifications: {providers: {x: {type: gitlab}}}\n", "notifications.providers.x.tokenEnv", "required"},
		{"gitlab project without group", "notifications: {providers: {x: {type: gitlab, tokenEnv: T, repository: infra}}}\n",
			"notifications.providers.x.repository", "group/project"},
		{"gitlab project with an empty part", "notifications: {providers: {x: {type: gitlab, tokenEnv: T, repository: 'acme//infra'}}}\n",
			"notifications.providers.x.repository", "group/project"},
		{"repository on a slack provider", "notifications: {providers: {x: {type: slack, urlEnv: U, repository: a/b}}}\n",
			"notifications.providers.x", "github or gitlab provider"},
		{"alert to unknown provider", "notifications: {providers: {x: {type: webhook, url: \"https://h.example.com/\"}}, alerts: [{providers: [chat]}]}\n",
			"notifications.alerts[0].providers", `no provider "chat"`},
		{"alert of unknown event", "notifications: {providers: {x: {type: webhook, url: \"https://h.example.com/\"}}, alerts: [{providers: [x], events: [Boom]}]}\n",
			"notifications.alerts[0].events", `unknown event "Boom"`},
		{"alert of a namespace that is no label", "notifications: {providers: {x: {type: webhook, url: \"https://h.example.com/\"}}, alerts: [{providers: [x], namespaces: [team.a]}]}\n",
			"notifications.alerts[0].namespaces[0]", `Invalid value: "team.a"`},
		{"notification secret unset", "notifications: {providers: {x: {type: webhook, url: \"https://h.example.com/\", secretEnv: NO8S_TEST_UNSET_HOOK}}}\n",
			"notifications.providers.x.secretEnv", "is not set"},
		{"token without name", "api: {tokens: [{tokenEnv: X, allow: [{verbs: [get]}]}]}\n", "api.tokens[0].name", "required"},
		{"token named write", "api: {writeTokenEnv: NO8S_TEST_UNSET_W, tokens: [{name: write, tokenEnv: X, allow: [{verbs: [get]}]}]}\n",
			"api.tokens[0].name", `"write" is taken`},
		{"token of unknown verb", "api: {tokens: [{name: ci, tokenEnv: X, allow: [{verbs: [destroy]}]}]}\n", "api.tokens[0].allow[0].verbs",
			`unknown verb "destroy"`},
		{"oidc without audience", "api: {oidc: {issuerURL: \"https://id.example.com\"}}\n", "api.oidc.audience", "required"},
		{"token allowed nothing", "api: {tokens: [{name: ci, tokenEnv: X}]}\n", "api.tokens[0].allow", "required"},
		{"verify mode", git + ", verify: {mode: some, sshAllowedSignersFile: /etc/hostname}}\n", "sources[0].git.verify.mode", "must be head or all"},
		{"verify without keys", git + ", verify: {mode: all}}\n", "sources[0].git.verify", "name the trusted keys"},
		{"verify rollback", git + ", verify: {rollback: sometimes, sshAllowedSignersFile: /etc/hostname}}\n", "sources[0].git.verify.rollback",
			`must be refuse (the default: a head older than the applied commit waits for an approval) or allow, not "sometimes"`},
		{"verify keys missing", git + ", verify: {openpgpKeysFile: /nonexistent/keys.asc}}\n", "sources[0].git.verify.openpgpKeysFile", "cannot read /nonexistent/keys.asc"},
		{"admission hook type", "admission: [{name: h, url: \"https://h.example.com/\", type: auditing}]\n", "admission[0].type", "auditing"},
		{"admission hook url", "admission: [{name: h, url: \"ftp://h\", type: validating}]\n", "admission[0].url", ""},
		{"admission hook timeout", "admission: [{name: h, url: \"https://h.example.com/\", type: validating, timeout: 1m}]\n", "admission[0].timeout", ""},
		{"admission secret unset", "admission: [{name: h, url: \"https://h.example.com/\", type: validating, secretEnv: NO8S_TEST_UNSET_ADM}]\n",
			"admission[0].secretEnv", "is not set"},
		{"negative resource series", "metrics: {resourceSeriesLimit: -1}\n", "metrics.resourceSeriesLimit", "0 (no per-resource series) or more"},
		{"unknown metrics key", "metrics: {resourceSeries: 5}\n", "metrics.resourceSeries", "unknown"},
		{"negative history count", "history: {maxPerResource: -1}\n", "history.maxPerResource", "0 (keep all) or more"},
		{"negative history age", "history: {maxAge: -5m}\n", "history.maxAge", "0 (keep all) or a positive duration"},
		{"history age not a duration", "history: {maxAge: forever}\n", "history.maxAge", "duration"},
		{"unknown history key", "history: {maxPerResrouce: 5}\n", "history.maxPerResrouce", "unknown"},
		{"zero lease", "reconcile: {leaseDuration: 0s}\n", "reconcile.leaseDuration", "must be positive"},
		{"negative backoff", "reconcile: {backoff: {initial: -1s}}\n", "reconcile.backoff.initial", "must be positive"},
		{"zero backoff max", "reconcile: {backoff: {max: 0s}}\n", "reconcile.backoff.max", "must be positive"},
		{"backoff max below initial", "reconcile: {backoff: {initial: 2h, max: 1h}}\n", "reconcile.backoff.max", "less than backoff.initial"},
		{"action without plugin", "actions:\n  echo: {config: {command: [echo]}}\n", "actions.echo.plugin", "required"},
		{"bad action name", "actions:\n  Echo Action: {plugin: exec}\n", "actions.Echo Action", "invalid action name"},
		{"action config not a mapping", "actions:\n  echo: {plugin: exec, config: [a]}\n", "actions.echo.config", "must be a mapping"},
		{"bad log format", "logFormat: xml\n", "logFormat", `not "xml"`},
		{"bad log level", "logLevel: trace\n", "logLevel", `not "trace"`},
		{"listen without port", "listen: localhost\n", "listen", "host:port"},
		{"listen with named port", "listen: 'localhost:http'\n", "listen", "invalid port"},
		{"empty listen", "listen: ''\n", "listen", "host:port"},
		{"sources not a list", "sources: {name: x}\n", "sources", "must be a list, not a mapping"},
		{"string read as boolean", "sources:\n- name: s\n  git: {url: 'https://h/r.git', branch: yes}\n",
			"sources[0].git.branch", "quote the value"},
		{"not a mapping", "- a\n- b\n", "", "must be a mapping"},
		{"duplicate key", "listen: a:1\nlisten: b:2\n", "", "already set"},
		{"bad YAML", "sources: [\n", "", "invalid YAML"},
		{"file size too small", "maxFileSize: 100\n", "maxFileSize", "must be between 1024 bytes (1 KiB) and 67108864 bytes (64 MiB), not 100 bytes"},
		{"file size too large", "maxFileSize: 1Gi\n", "maxFileSize", "not 1073741824 bytes (1024 MiB)"},
		{"source file size too large", "sources: [{name: s, dir: ., maxFileSize: 65Mi}]\n", "sources[0].maxFileSize", "must be between"},
		{"file size unit", "maxFileSize: 2MB\n", "maxFileSize", `invalid size "2MB": must be a number of bytes like 1572864, or a size like "1.5Mi" or "512Ki"`},
		{"file size negative", "maxFileSize: -1\n", "maxFileSize", "must not be negative"},
		{"file size fraction of a byte", "maxFileSize: 1.5\n", "maxFileSize", "a fraction of a byte"},
		{"file size a list", "maxFileSize: [1]\n", "maxFileSize", "invalid size"},
		{"default namespace not a label", "defaultNamespace: team.a\n", "defaultNamespace", `Invalid value: "team.a": a lowercase RFC 1123 label`},
		{"default namespace upper case", "defaultNamespace: Team\n", "defaultNamespace", `Invalid value: "Team"`},
		{"default namespace too long", "defaultNamespace: " + strings.Repeat("a", 64) + "\n", "defaultNamespace", "must be no more than 63 characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml), env(map[string]string{"EMPTY": " ", "T": "x", "U": "u"}))
			if err == nil {
				t.Fatalf("no error for\n%s", tc.yaml)
			}
			want := tc.msg
			if tc.key != "" {
				want = tc.key + ": "
			}
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error\n%s\ndoes not contain %q and %q", err, want, tc.msg)
			}
			var ce *Error
			if tc.key != "" && !errors.As(err, &ce) {
				t.Errorf("error %T is not a *Error", err)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	data := `
lisen: x
sources:
- name: Infra
  git: {url: 'ftp://h/r.git', interval: 1 minute}
- name: local
  dir: .
  prune: {maxDeletes: 150%}
reconcile: {workers: 0, backoff: {initial: 2m, max: 1m}}
actions: {echo: {}}
logLevel: trace
`
	_, err := Parse([]byte(data), env(nil))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *Error", err)
	}
	keys := []string{"lisen", "sources[0].name", "sources[0].git.url", "sources[0].git.interval",
		"sources[1].prune.maxDeletes", "reconcile.workers", "reconcile.backoff.max", "actions.echo.plugin", "logLevel"}
	if len(ce.Problems) != len(keys) {
		t.Errorf("got %d problems, want %d:\n%s", len(ce.Problems), len(keys), err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(ce.Problems) {
		t.Errorf("%d lines for %d problems", len(lines), len(ce.Problems))
	}
	for _, k := range keys {
		if !strings.Contains(err.Error(), "\n"+k+": ") && !strings.HasPrefix(err.Error(), k+": ") {
			t.Errorf("no line for %s in\n%s", k, err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.yaml"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(bad, []byte("listen: nope\nlogLevel: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad, nil)
	want := bad + ": listen: must be host:port"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "\n"+bad+": logLevel: ") {
		t.Errorf("error %q: want every line prefixed with the file", err)
	}
	if err := os.WriteFile(bad, []byte("sources: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, nil); err == nil || !strings.HasPrefix(err.Error(), bad+": invalid YAML") {
		t.Errorf("syntax error %q: want it prefixed with the file", err)
	}
}

func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	data := `
sources:
- name: https
  git: {url: 'https://h/r.git', auth: {usernameEnv: GIT_USER, passwordEnv: GIT_PASS}}
- name: ssh
  git: {url: 'git@h:r.git', auth: {sshKeyFile: k, knownHostsFile: kh, sshKeyPassphraseEnv: KEY_PASS}}
- name: token
  git: {url: 'https://h/t.git', auth: {tokenEnv: GITHUB_TOKEN}}
api: {writeTokenEnv: NO8S_API_TOKEN, readTokenEnv: READ}
webhooks: {githubSecretEnv: NO8S_GITHUB_WEBHOOK_SECRET}
`
	secrets := map[string]string{
		"GIT_USER": "user-s3cr3t", "GIT_PASS": "pass-s3cr3t", "KEY_PASS": "phrase-s3cr3t", "READ": "read-s3cr3t",
		"GITHUB_TOKEN": githubToken, "NO8S_API_TOKEN": apiToken, "NO8S_GITHUB_WEBHOOK_SECRET": webhookSecret,
	}
	c, err := Parse([]byte(data), env(secrets))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Sources[0].Git.Auth
	if a.Username() != "user-s3cr3t" || a.Password() != "pass-s3cr3t" || c.Sources[1].Git.Auth.SSHKeyPassphrase() != "phrase-s3cr3t" ||
		c.API.ReadToken() != "read-s3cr3t" {
		t.Fatal("secrets not resolved")
	}
	var outputs []string
	for _, v := range []any{c, *c, c.Sources, *c.Sources[0].Git, c.Sources[0].Git.Auth, &c.Sources[1].Git.Auth, c.API, &c.Webhooks,
		c.Secrets(), c.Secrets()[0], &c.Secrets()[1]} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			outputs = append(outputs, fmt.Sprintf(verb, v))
		}
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(js))
	}
	// Nor may logging the configuration, in either format.
	var logs strings.Builder
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", c, "auth", c.Sources[0].Git.Auth, "secrets", c.Secrets(), "secret", c.Secrets()[0])
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c, "auth", c.Sources[0].Git.Auth, "secrets", c.Secrets(), "secret", c.Secrets()[0])
	outputs = append(outputs, logs.String())
	// A configuration error must not show them either.
	c.LogLevel = "loud"
	outputs = append(outputs, c.Validate().Error())
	for _, out := range outputs {
		if strings.Contains(out, "s3cr3t") {
			t.Errorf("secret shown in %s", out)
		}
	}
}

func TestSecretsListed(t *testing.T) {
	t.Parallel()
	data := `
sources:
- name: https
  git: {url: 'https://h/r.git', auth: {usernameEnv: GIT_USER, passwordEnv: GIT_PASS}}
  pullRequests: {enabled: true, tokenEnv: PR_TOKEN}
- name: ssh
  git: {url: 'git@h:r.git', auth: {sshKeyFile: k, knownHostsFile: kh, sshKeyPassphraseEnv: KEY_PASS}}
- name: token
  git: {url: 'https://h/t.git', auth: {tokenEnv: GITHUB_TOKEN}}
  pullRequests: {enabled: true}
- name: folder
  dir: ./x
api: {writeTokenEnv: NO8S_API_TOKEN, readTokenEnv: READ}
webhooks: {githubSecretEnv: NO8S_GITHUB_WEBHOOK_SECRET}
actions:
  a: {plugin: http, config: {tokenEnv: NOT_READ_HERE}}
`
	c, err := Parse([]byte(data), env(map[string]string{
		"GIT_USER": "u", "GIT_PASS": "p", "PR_TOKEN": "pr", "KEY_PASS": "k", "READ": "r",
		"GITHUB_TOKEN": "gh", "NO8S_API_TOKEN": "w", "NO8S_GITHUB_WEBHOOK_SECRET": "wh", "NOT_READ_HERE": "x",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.Secrets() {
		got = append(got, s.Setting+" "+s.Env+"="+s.Value())
	}
	want := []string{
		"sources[0].git.auth.usernameEnv GIT_USER=u",
		"sources[0].git.auth.passwordEnv GIT_PASS=p",
		"sources[0].pullRequests.tokenEnv PR_TOKEN=pr",
		"sources[1].git.auth.sshKeyPassphraseEnv KEY_PASS=k",
		// The pull-request token of source 2 is its Git token: listed once.
		"sources[2].git.auth.tokenEnv GITHUB_TOKEN=gh",
		"api.writeTokenEnv NO8S_API_TOKEN=w",
		"api.readTokenEnv READ=r",
		"webhooks.githubSecretEnv NO8S_GITHUB_WEBHOOK_SECRET=wh",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Secrets() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := (&Config{}).Secrets(); len(s) != 0 {
		t.Errorf("an empty configuration lists secrets: %v", s)
	}
}

func TestMaxDeletes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    MaxDeletes
		str     string
		deletes int
		owned   int
		allowed bool
	}{
		{`25`, MaxDeletes{Count: 25, Set: true}, "25", 25, 1000, true},
		{`25`, MaxDeletes{Count: 25, Set: true}, "25", 26, 1000, false},
		{`"25"`, MaxDeletes{Count: 25, Set: true}, "25", 26, 1000, false},
		{`"25%"`, MaxDeletes{Percent: 25, Set: true}, "25%", 2, 10, true},
		{`"25%"`, MaxDeletes{Percent: 25, Set: true}, "25%", 3, 10, false},
		{`" 100% "`, MaxDeletes{Percent: 100, Set: true}, "100%", 10, 10, true},
		{`"0%"`, MaxDeletes{Set: true}, "0", 1, 10, false},
		{`0`, MaxDeletes{Set: true}, "0", 0, 10, true},
		{`null`, MaxDeletes{}, "default (10 or 25%, whichever is larger)", 1000, 1000, false},
		{`null`, MaxDeletes{}, "default (10 or 25%, whichever is larger)", 10, 12, true},
		{`null`, MaxDeletes{}, "default (10 or 25%, whichever is larger)", 11, 12, false},
		{`null`, MaxDeletes{}, "default (10 or 25%, whichever is larger)", 250, 1000, true},
		{`null`, MaxDeletes{}, "default (10 or 25%, whichever is larger)", 251, 1000, false},
	} {
		var m MaxDeletes
		if err := json.Unmarshal([]byte(tc.in), &m); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if m != tc.want || m.String() != tc.str {
			t.Errorf("%s: got %+v %q, want %+v %q", tc.in, m, m, tc.want, tc.str)
		}
		if got := m.Allows(tc.deletes, tc.owned); got != tc.allowed {
			t.Errorf("%s: Allows(%d, %d) = %v", tc.in, tc.deletes, tc.owned, got)
		}
		js, _ := json.Marshal(m)
		var back MaxDeletes
		if err := json.Unmarshal(js, &back); err != nil || back != m {
			t.Errorf("%s: marshalled as %s, read back as %+v (%v)", tc.in, js, back, err)
		}
	}
}

func TestValidateProgrammatic(t *testing.T) {
	t.Parallel()
	c := designConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("design config: %v", err)
	}
	c.Sources[1].Prune.MaxDeletes = MaxDeletes{Count: 3, Percent: 5, Set: true}
	c.Sources[0].Git.Timeout = Duration{}
	err := c.Validate()
	for _, k := range []string{"sources[1].prune.maxDeletes: ", "sources[0].git.timeout: "} {
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("error %v does not name %s", err, k)
		}
	}
}

func TestApplyFlags(t *testing.T) {
	t.Parallel()
	c := loadDesign(t)
	err := c.ApplyFlags(Flags{
		Database:  "postgres://other/db",
		Listen:    ":9090",
		LogFormat: "json",
		LogLevel:  "debug",
		Sources: []string{
			"./examples/repo",
			"https://github.com/acme/infra.git#main:manifests",
			"git@github.com:acme/infra.git",
			"file:///srv/git/infra#:deploy",
			"/srv/API",
			".",
		},
	}, designEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Database != "postgres://other/db" || c.Listen != ":9090" || c.LogFormat != "json" || c.LogLevel != "debug" {
		t.Errorf("flags not applied: %+v", c)
	}
	cwd, _ := os.Getwd()
	here := filepath.Base(cwd) // "config"
	want := []struct{ name, dir, url, branch, path string }{
		{"repo", "./examples/repo", "", "", ""},
		{"infra", "", "https://github.com/acme/infra.git", "main", "manifests"},
		{"infra-2", "", "git@github.com:acme/infra.git", "", ""},
		{"infra-3", "", "file:///srv/git/infra", "", "deploy"},
		{"api-source", "/srv/API", "", "", ""},
		{here, ".", "", "", ""},
	}
	if len(c.Sources) != len(want) {
		t.Fatalf("got %d sources, want %d", len(c.Sources), len(want))
	}
	for i, w := range want {
		s := c.Sources[i]
		if s.Name != w.name || s.Dir != w.dir || s.Interval.Duration != DefaultInterval || !s.Prune.IsEnabled() {
			t.Errorf("sources[%d] = %+v, want name %q dir %q with defaults", i, s, w.name, w.dir)
		}
		if w.url == "" {
			if s.Git != nil {
				t.Errorf("sources[%d]: unexpected git %+v", i, s.Git)
			}
			continue
		}
		if s.Git == nil || s.Git.URL != w.url || s.Git.Branch != w.branch || s.Git.Path != w.path || s.Git.Timeout.Duration != DefaultGitTimeout {
			t.Errorf("sources[%d].git = %+v, want %+v", i, s.Git, w)
		}
	}
	// Settings the flags leave alone keep the file's values.
	if c.Reconcile.Backoff.Max.Duration != 17*time.Hour || c.API.WriteToken() != apiToken {
		t.Error("settings without a flag changed")
	}
}

func TestApplyFlagsOnEmptyConfig(t *testing.T) {
	t.Parallel()
	var c Config
	if err := c.ApplyFlags(Flags{Sources: []string{"../examples/repo"}}, nil); err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.Reconcile.Workers != DefaultWorkers || len(c.Sources) != 1 || c.Sources[0].Name != "repo" {
		t.Errorf("got %+v", c)
	}
}

func TestApplyFlagsProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flags Flags
		want  []string
	}{
		{Flags{Sources: []string{"ftp://h/r.git"}}, []string{`--source "ftp://h/r.git": git.url: unsupported URL scheme`}},
		{Flags{Sources: []string{"https://h/r.git#main:../up"}}, []string{`--source "https://h/r.git#main:../up": git.path: `}},
		// Every problem is reported, the flag sources' and the others'.
		{Flags{Sources: []string{"git@h:r.git#x:/abs", "."}, LogLevel: "loud"},
			[]string{`--source "git@h:r.git#x:/abs": git.path: `, "\n--log-level: "}},
		{Flags{Listen: "nope"}, []string{"--listen: must be host:port"}},
		{Flags{LogFormat: "xml"}, []string{"--log-format: "}},
		{Flags{LogLevel: "loud"}, []string{"--log-level: "}},
	} {
		var c Config
		err := c.ApplyFlags(tc.flags, nil)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%+v: error %v, want %q", tc.flags, err, want)
			}
		}
	}
}

func TestUniqueName(t *testing.T) {
	t.Parallel()
	taken := map[string]bool{}
	for _, tc := range []struct{ in, want string }{
		{"My_Repo.v2", "my-repo-v2"},
		{"my-repo-v2", "my-repo-v2-2"},
		{"---", "source"},
		{"api", "api-source"},
		{strings.Repeat("x", 80), strings.Repeat("x", 55)},
	} {
		got := uniqueName(tc.in, taken)
		if got != tc.want || !sourceNameRE.MatchString(got) {
			t.Errorf("uniqueName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../examples/no8s.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sources) != 1 || cfg.Sources[0].Dir != "./examples/repo" || !cfg.Sources[0].Prune.MaxDeletes.Set {
		t.Errorf("example config: %+v", cfg.Sources)
	}
}

// TestPostgresExampleMatches checks that the PostgreSQL example is the
// embedded one with a database named, nothing else.
func TestPostgresExampleMatches(t *testing.T) {
	t.Parallel()
	noEnv := func(string) (string, bool) { return "", false }
	embedded, err := Load("../examples/no8s.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := Load("../examples/no8s-postgres.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if embedded.Database != "" || !strings.HasPrefix(pg.Database, "postgres://") {
		t.Errorf("databases: %q and %q", embedded.Database, pg.Database)
	}
	pg.Database = ""
	if !reflect.DeepEqual(embedded, pg) {
		t.Errorf("the examples differ beyond the database:\n%+v\n%+v", embedded, pg)
	}
}

// TestUnknownFieldsModes: the modes the configuration takes are those the
// validation knows, and a source or the API left without one is strict.
func TestUnknownFieldsModes(t *testing.T) {
	t.Parallel()
	for _, m := range append([]string{""}, unknownFieldsModes...) {
		got, err := manifest.ParseUnknownFields(m)
		if err != nil || (m != "" && string(got) != m) || (m == "" && got != manifest.UnknownFieldsStrict) {
			t.Errorf("mode %q reads as %q, %v", m, got, err)
		}
	}
	c, err := Parse([]byte("sources:\n- {name: a, dir: ., unknownFields: prune}\n- {name: b, dir: .}\napi: {unknownFields: warn}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].UnknownFields != UnknownFieldsPrune || c.Sources[1].UnknownFields != "" || c.API.UnknownFields != UnknownFieldsWarn {
		t.Errorf("sources %+v, api %+v", c.Sources, c.API)
	}
}

// TestCommitURL reads a source's commitURL as written.
func TestCommitURL(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("sources:\n- {name: a, git: {url: 'ssh://git@git.example.com/infra.git'}, commitURL: 'https://git.example.com/infra/commit/{sha}'}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sources[0].CommitURL; got != "https://git.example.com/infra/commit/{sha}" {
		t.Errorf("commitURL = %q", got)
	}
}

// TestDefaultMaxDeletesMatchesSync keeps the documented default the one the
// sync applies when maxDeletes is left out.
func TestDefaultMaxDeletesMatchesSync(t *testing.T) {
	t.Parallel()
	if DefaultMaxDeletes != nosync.DefaultMaxDeletes || DefaultMaxDeletesPercent != nosync.DefaultMaxDeletesPercent {
		t.Errorf("config default %d or %d%%, sync default %d or %d%%", DefaultMaxDeletes, DefaultMaxDeletesPercent,
			nosync.DefaultMaxDeletes, nosync.DefaultMaxDeletesPercent)
	}
}

// TestMaxFileSize: the agent's maxFileSize is the default of every source,
// which may set its own; sizes are written in bytes or with a binary unit.
func TestMaxFileSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml  string
		agent       int64
		first, next int64
	}{
		{"defaults", "sources: [{name: a, dir: .}, {name: b, dir: .}]\n", 1572864, 1572864, 1572864},
		{"zero is the default", "maxFileSize: 0\nsources: [{name: a, dir: ., maxFileSize: 0}, {name: b, dir: .}]\n", 1572864, 1572864, 1572864},
		{"agent-wide in bytes", "maxFileSize: 2097152\nsources: [{name: a, dir: .}, {name: b, dir: .}]\n", 2 << 20, 2 << 20, 2 << 20},
		{"agent-wide with a unit", "maxFileSize: 3Mi\nsources: [{name: a, dir: .}, {name: b, dir: .}]\n", 3 << 20, 3 << 20, 3 << 20},
		{"per source", "maxFileSize: 1Mi\nsources: [{name: a, dir: ., maxFileSize: 1.5Mi}, {name: b, dir: .}]\n", 1 << 20, 3 << 19, 1 << 20},
		{"string of bytes", "sources: [{name: a, dir: ., maxFileSize: '2048'}, {name: b, dir: ., maxFileSize: 512Ki}]\n", 1572864, 2048, 512 << 10},
		{"the bounds themselves", "maxFileSize: 1Ki\nsources: [{name: a, dir: ., maxFileSize: 64Mi}, {name: b, dir: .}]\n", 1 << 10, 64 << 20, 1 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tc.yaml), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.FileSizeLimit(); got != tc.agent {
				t.Errorf("agent-wide limit %d, want %d", got, tc.agent)
			}
			if got := []int64{c.Sources[0].FileSizeLimit(), c.Sources[1].FileSizeLimit()}; got[0] != tc.first || got[1] != tc.next {
				t.Errorf("source limits %v, want [%d %d]", got, tc.first, tc.next)
			}
		})
	}
	// A source built in code without one reads up to the default.
	if got := (Source{Name: "x", Dir: "."}).FileSizeLimit(); got != 1572864 {
		t.Errorf("zero source limit %d, want the default", got)
	}
}

// TestDefaultNamespace: left out, the default namespace is Kubernetes'
// "default"; set, it is a DNS-1123 label.
func TestDefaultNamespace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"listen: 127.0.0.1:8080\n", "default"},
		{"defaultNamespace: ''\n", "default"},
		{"defaultNamespace: team-a\n", "team-a"},
		{"defaultNamespace: " + strings.Repeat("a", 63) + "\n", strings.Repeat("a", 63)},
	} {
		c, err := Parse([]byte(tc.yaml), env(nil))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Namespace(); got != tc.want {
			t.Errorf("%q: default namespace %q, want %q", tc.yaml, got, tc.want)
		}
	}
}
