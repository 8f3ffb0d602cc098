// Package config is the agent's configuration file (no8s.yaml) and the
// command-line flags that override it.
//
// The file is YAML, converted to JSON with sigs.k8s.io/yaml and decoded
// strictly: an unknown key is an error, so a misspelt setting is reported
// instead of silently ignored. Every problem in a file is reported at once,
// each naming its key path (sources[1].git.interval), so one edit fixes them
// all.
//
// Secrets are never written in the file: settings ending in Env name an
// environment variable that Load reads. The values are kept in unexported
// fields, reached through accessor methods, so that printing, logging or
// marshalling a Config cannot reveal them.
package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/webhook"
)

// Defaults applied to settings that the file leaves out.
const (
	DefaultListen   = "127.0.0.1:8080"
	DefaultInterval = time.Minute
	// DefaultPullRequestInterval is how often open pull requests are listed.
	DefaultPullRequestInterval = 5 * time.Minute
	// DefaultGitHubAPIURL is the REST API previews talk to.
	DefaultGitHubAPIURL = "https://api.github.com/"
	// DefaultGitLabURL is the GitLab previews of gitlab.com repositories
	// talk to.
	DefaultGitLabURL      = "https://gitlab.com"
	DefaultGitTimeout     = 60 * time.Second
	DefaultWorkers        = 8
	DefaultLeaseDuration  = 30 * time.Second
	DefaultBackoffInitial = time.Minute
	DefaultBackoffMax     = 1024 * time.Minute
	DefaultLogFormat      = "text"
	DefaultLogLevel       = "info"
	// DefaultHistoryPerResource and DefaultHistoryMaxAge bound the history
	// kept: reconcile attempts per resource and sync attempts per source.
	DefaultHistoryPerResource = 100
	DefaultHistoryMaxAge      = 30 * 24 * time.Hour
	// DefaultResourceSeriesLimit is how many resources get metric series
	// of their own.
	DefaultResourceSeriesLimit = 1000
	// DefaultMaxFileSize is the largest manifest file read: 1.5 MiB,
	// etcd's request limit, so that the large CRDs projects publish (about
	// 1.4 MB for Kyverno's ClusterPolicy) load as they are.
	DefaultMaxFileSize = ByteSize(manifest.DefaultMaxFileSize)
	// MinMaxFileSize and MaxMaxFileSize bound maxFileSize: below 1 KiB
	// hardly a manifest fits; above 64 MiB one file, held several times
	// over while it is decoded and validated, and an API request body of
	// its size, would cost more memory than an agent should risk on one.
	MinMaxFileSize = ByteSize(1 << 10)
	MaxMaxFileSize = ByteSize(64 << 20)
)

// Config is the whole agent configuration.
type Config struct {
	// Database is the store's connection string; empty means the default
	// store chosen by the command.
	Database string `json:"database,omitempty"`
	// Listen is the host:port of the HTTP API.
	Listen string `json:"listen"`
	// Sources are the Git repositories and folders that hold manifests.
	Sources []Source `json:"sources,omitempty"`
	// MaxFileSize is the largest manifest file the agent reads, for every
	// source that does not set its own; the API's request-body limit
	// follows it. Zero or left out: DefaultMaxFileSize.
	MaxFileSize ByteSize `json:"maxFileSize,omitempty"`
	// DefaultNamespace is the namespace of resources of namespaced kinds
	// declared without metadata.namespace, from every source and the API.
	// Empty or left out: "default", as Kubernetes, so that manifests
	// copied from a cluster land where kubectl would put them, and so that
	// a store made before namespaces, whose resources were all moved to
	// "default", keeps them where they are.
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	// Actions are the action instances, by name; resource types refer to them.
	Actions map[string]Action `json:"actions,omitempty"`
	// Reconcile tunes the reconcilers.
	Reconcile Reconcile `json:"reconcile"`
	// History bounds the reconcile and sync history kept in the store.
	History History `json:"history"`
	// Metrics configures what /metrics shows.
	Metrics Metrics `json:"metrics"`
	// Notifications configures who is told of failures, recoveries and
	// applied revisions.
	Notifications Notifications `json:"notifications"`
	// API configures the HTTP API's tokens.
	API API `json:"api"`
	// Dashboard configures signing in to the dashboard.
	Dashboard Dashboard `json:"dashboard"`
	// Webhooks configures the incoming webhooks.
	Webhooks Webhooks `json:"webhooks"`
	// Admission are the hooks every change passes before it is accepted,
	// in order.
	Admission []admission.Hook `json:"admission,omitempty"`
	// LogFormat is "text" or "json".
	LogFormat string `json:"logFormat"`
	// LogLevel is "debug", "info", "warn" or "error".
	LogLevel string `json:"logLevel"`

	// admissionSecrets are the hooks' signing keys, by hook.
	admissionSecrets []*secret
	// lazySecrets, set by LoadSettings, leaves a secret whose variable is
	// unset or empty unresolved instead of refusing the file; unresolved
	// lists each such setting.
	lazySecrets bool
	unresolved  []Secret
}

// Source is one place manifests come from: exactly one of Git and Dir is set.
type Source struct {
	// Name identifies the source in the store, the API and the CLI.
	Name string `json:"name"`
	// Git is set for a Git repository.
	Git *GitSource `json:"git,omitempty"`
	// Dir is set for a local folder; a relative path is taken from the
	// agent's working directory and kept as written.
	Dir string `json:"dir,omitempty"`
	// MaxFileSize is the largest manifest file read from the source; a
	// larger one is a problem of that file. Zero or left out: the
	// agent's maxFileSize.
	MaxFileSize ByteSize `json:"maxFileSize,omitempty"`
	// Prune controls the deletion of resources that left the source.
	Prune Prune `json:"prune"`
	// PullRequests enables previews of pull requests (Git sources only).
	PullRequests PullRequests `json:"pullRequests"`
	// Interval is how often the source is fetched when nothing signals a
	// change: for Git the polling interval, for a folder a rescan in case
	// file events were lost. For Git sources it may be written as
	// git.interval instead; after Load both hold the same value.
	Interval Duration `json:"interval"`
	// Suspend stops fetching and syncing the source until it is set back to
	// false: nothing it declares changes meanwhile. The API cannot resume
	// a source suspended here.
	Suspend bool `json:"suspend,omitempty"`
	// UnknownFields says what a sync does with the fields of a spec that
	// its schema does not declare: UnknownFieldsStrict (the default, also
	// when empty) refuses the revision, UnknownFieldsWarn keeps them and
	// warns, UnknownFieldsPrune drops them and says so.
	UnknownFields string `json:"unknownFields,omitempty"`
	// CommitURL is the address of a commit on the Git host, for the
	// dashboard's links to commits: an http(s) URL in which {sha} stands
	// for the commit's hash, as in https://git.example.com/infra/commit/{sha}.
	// Empty: GitHub and GitLab are recognised from the remote's URL (and
	// from pullRequests.provider), and commits elsewhere are not linked.
	CommitURL string `json:"commitURL,omitempty"`
}

// CommitSHA is what a source's commitURL says for the commit's hash.
const CommitSHA = "{sha}"

// Namespace returns the default namespace: DefaultNamespace, or
// manifest.DefaultNamespace when it is not set.
func (c *Config) Namespace() string { return cmp.Or(c.DefaultNamespace, manifest.DefaultNamespace) }

// FileSizeLimit is the largest manifest file the agent reads from a
// source that does not set its own, and what the API's request-body limit
// follows.
func (c *Config) FileSizeLimit() int64 { return int64(cmp.Or(c.MaxFileSize, DefaultMaxFileSize)) }

// FileSizeLimit is the largest manifest file read from the source.
func (s Source) FileSizeLimit() int64 { return int64(cmp.Or(s.MaxFileSize, DefaultMaxFileSize)) }

// What a sync or an API write does with the fields of a spec that its
// schema does not declare (sources[].unknownFields, api.unknownFields).
const (
	// UnknownFieldsStrict refuses them, naming each with its line.
	UnknownFieldsStrict = "strict"
	// UnknownFieldsWarn keeps them in the stored spec, with a warning.
	UnknownFieldsWarn = "warn"
	// UnknownFieldsPrune drops them before the spec is stored, with a
	// warning, as an API server asked for fieldValidation=Ignore does.
	UnknownFieldsPrune = "prune"
)

// unknownFieldsModes are the values sources[].unknownFields and
// api.unknownFields take; empty means strict.
var unknownFieldsModes = []string{UnknownFieldsStrict, UnknownFieldsWarn, UnknownFieldsPrune}

// Kind returns "git" or "dir", or "" when neither is set.
func (s Source) Kind() string {
	switch {
	case s.Git != nil:
		return "git"
	case s.Dir != "":
		return "dir"
	}
	return ""
}

// GitSource is a Git repository. When several of Commit, SemVer, Tag and
// Branch are set the first of them in that order wins, as in Flux; when none
// is, the remote's default branch is used.
type GitSource struct {
	// URL is an http(s)://, ssh:// or file:// URL, or scp-like user@host:path.
	URL string `json:"url"`
	// Branch to follow.
	Branch string `json:"branch,omitempty"`
	// Tag to check out.
	Tag string `json:"tag,omitempty"`
	// SemVer is a version range; the highest matching tag is checked out.
	SemVer string `json:"semver,omitempty"`
	// Commit is a full commit hash to check out.
	Commit string `json:"commit,omitempty"`
	// Path is the folder in the repository that holds the manifests.
	Path string `json:"path,omitempty"`
	// Interval is the polling interval; see Source.Interval.
	Interval Duration `json:"interval"`
	// Timeout bounds each remote operation.
	Timeout Duration `json:"timeout"`
	// Auth selects the credentials, if any.
	Auth GitAuth `json:"auth"`
	// Verify, when set, requires commits to carry a good signature by a
	// trusted key before they are applied.
	Verify *GitVerify `json:"verify,omitempty"`
}

// Signature verification modes.
const (
	// VerifyHead checks the commit to apply.
	VerifyHead = "head"
	// VerifyAll checks every commit since the last one applied.
	VerifyAll = "all"
)

// What a source with verify does with a head that is an ancestor of the
// commit last applied (a force-push back to older history).
const (
	// RollbackRefuse refuses it until that revision is approved.
	RollbackRefuse = "refuse"
	// RollbackAllow checks it like any other head.
	RollbackAllow = "allow"
)

// GitVerify names the trusted keys of a Git source's commits. The files are
// read again whenever they change, so keys rotate without a restart.
type GitVerify struct {
	// Mode is head (the default) or all.
	Mode string `json:"mode,omitempty"`
	// Rollback is refuse (the default) or allow: whether a head that is an
	// ancestor of the commit last applied waits for an approval. A
	// signature proves who made a commit, not that it is the newest.
	Rollback string `json:"rollback,omitempty"`
	// OpenPGPKeysFile holds trusted OpenPGP public keys, armored
	// (gpg --export --armor).
	OpenPGPKeysFile string `json:"openpgpKeysFile,omitempty"`
	// SSHAllowedSignersFile lists trusted SSH keys in the allowed-signers
	// format of git and ssh-keygen.
	SSHAllowedSignersFile string `json:"sshAllowedSignersFile,omitempty"`
}

// GitAuth names where the credentials of a Git remote come from: a token,
// a username and password, or an SSH key checked against known hosts.
type GitAuth struct {
	// TokenEnv names the variable holding a token for http(s) remotes.
	TokenEnv string `json:"tokenEnv,omitempty"`
	// UsernameEnv names the variable holding the basic-auth username.
	UsernameEnv string `json:"usernameEnv,omitempty"`
	// PasswordEnv names the variable holding the basic-auth password.
	PasswordEnv string `json:"passwordEnv,omitempty"`
	// SSHKeyFile is the private key file for ssh remotes.
	SSHKeyFile string `json:"sshKeyFile,omitempty"`
	// KnownHostsFile lists the host keys that ssh remotes must present.
	KnownHostsFile string `json:"knownHostsFile,omitempty"`
	// SSHKeyPassphraseEnv names the variable holding the key's passphrase.
	SSHKeyPassphraseEnv string `json:"sshKeyPassphraseEnv,omitempty"`

	token, username, password, passphrase *secret
}

// Token returns the resolved token, or "".
func (a GitAuth) Token() string { return a.token.get() }

// Username returns the resolved basic-auth username, or "".
func (a GitAuth) Username() string { return a.username.get() }

// Password returns the resolved basic-auth password, or "".
func (a GitAuth) Password() string { return a.password.get() }

// SSHKeyPassphrase returns the resolved SSH key passphrase, or "".
func (a GitAuth) SSHKeyPassphrase() string { return a.passphrase.get() }

// Prune controls the deletion of resources that are no longer declared.
type Prune struct {
	// Enabled turns pruning on; nil means true.
	Enabled *bool `json:"enabled,omitempty"`
	// MaxDeletes caps the deletions of one sync; more need approval. Unset,
	// the cap is DefaultMaxDeletes (10) or DefaultMaxDeletesPercent (25%) of
	// the resources the source owns, whichever is larger; "100%" lifts it.
	MaxDeletes MaxDeletes `json:"maxDeletes"`
	// AllowEmpty lets an empty snapshot delete everything the source owns.
	AllowEmpty bool `json:"allowEmpty"`
}

// IsEnabled reports whether pruning is on.
func (p Prune) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// Git hosts whose pull (merge) requests are previewed.
const (
	HostGitHub = "github"
	HostGitLab = "gitlab"
)

// PullRequests configures previews of pull requests (merge requests on
// GitLab).
type PullRequests struct {
	// Enabled turns previews on.
	Enabled bool `json:"enabled"`
	// Provider is the Git host: github or gitlab. Default gitlab for a
	// repository on gitlab.com, else github; a self-managed GitLab says
	// gitlab, with its APIURL.
	Provider string `json:"provider,omitempty"`
	// TokenEnv names the variable holding the token that reads pull
	// requests and writes commit statuses and comments; default the
	// source's git.auth.tokenEnv.
	TokenEnv string `json:"tokenEnv,omitempty"`
	// APIURL is the host's API: GitHub's REST API (GitHub Enterprise
	// Server: https://HOST/api/v3/; default https://api.github.com/), or
	// GitLab's address (https://HOST; default https://gitlab.com).
	APIURL string `json:"apiURL,omitempty"`
	// DashboardURL is the agent's dashboard as people reach it: a preview
	// too long for a comment points to the source's page there.
	DashboardURL string `json:"dashboardURL,omitempty"`
	// Interval is how often open pull requests are listed, in case a
	// webhook was missed. Default 5m.
	Interval Duration `json:"interval,omitempty"`

	token *secret
}

// Token returns the resolved token for previews, or "".
func (p PullRequests) Token() string { return p.token.get() }

// RemoteHost is the host name of a Git remote URL, https://HOST/...,
// ssh://user@HOST:port/... or scp-like user@HOST:path, lower-cased; "" when
// it names none.
func RemoteHost(remote string) string {
	if u, err := url.Parse(remote); err == nil && u.Host != "" {
		return strings.ToLower(u.Hostname())
	}
	if at := strings.Index(remote, "@"); at >= 0 && !strings.Contains(remote[:at], "/") {
		if host, _, ok := strings.Cut(remote[at+1:], ":"); ok && host != "" && !strings.Contains(host, "/") {
			return strings.ToLower(host)
		}
	}
	return ""
}

// PullRequestCacheSuffix ends the name of the cache folder that holds a
// source's clones of pull requests, <cache-dir>/<name>-pulls: no other
// source may have that name, whose own clone is <cache-dir>/<name>.
const PullRequestCacheSuffix = "-pulls"

// Action is one action instance: a plugin and its settings.
type Action struct {
	// Plugin names the plugin, e.g. "exec" or "github_actions".
	Plugin string `json:"plugin"`
	// Config is kept as written (as JSON): only the plugin knows its
	// settings, and it decodes and checks them itself.
	Config json.RawMessage `json:"config,omitempty"`
}

// Reconcile tunes the reconcilers.
type Reconcile struct {
	// Workers is how many resources are reconciled at once.
	Workers int `json:"workers"`
	// LeaseDuration is how long a worker holds a resource before another
	// agent may take it over.
	LeaseDuration Duration `json:"leaseDuration"`
	// Backoff spaces the retries of a failing resource.
	Backoff Backoff `json:"backoff"`
}

// History bounds the reconcile and sync history kept in the store; a
// background task trims what is beyond. Zero keeps everything by that
// measure.
type History struct {
	// MaxPerResource is how many reconcile attempts are kept per resource,
	// and sync attempts per source.
	MaxPerResource int `json:"maxPerResource"`
	// MaxAge is how long an attempt is kept after it finished.
	MaxAge Duration `json:"maxAge"`
}

// Metrics configures what /metrics shows.
type Metrics struct {
	// ResourceSeriesLimit is how many resources get no8s_resource_info and
	// no8s_resource_ready series, those not ready first; 0 means none.
	ResourceSeriesLimit int `json:"resourceSeriesLimit"`
}

// Backoff is an exponential backoff's first and largest delay.
type Backoff struct {
	// Initial is the delay after the first failure.
	Initial Duration `json:"initial"`
	// Max caps the delay.
	Max Duration `json:"max"`
}

// API names the tokens of the HTTP API.
type API struct {
	// WriteTokenEnv names the variable holding the token for write
	// endpoints; unset, they answer 403.
	WriteTokenEnv string `json:"writeTokenEnv,omitempty"`
	// ReadTokenEnv names the variable holding the token for reads; unset,
	// reads need no token.
	ReadTokenEnv string `json:"readTokenEnv,omitempty"`
	// Tokens are scoped tokens: each may do the verbs its grants allow, on
	// the kinds and sources they name. writeTokenEnv and readTokenEnv are
	// shorthands for a token allowed everything and one allowed get and
	// list.
	Tokens []APIToken `json:"tokens,omitempty"`
	// OIDC takes OpenID Connect ID tokens as bearer tokens: the claim it
	// names (default sub) holds the name of the entry in Tokens whose
	// grants apply, among those without tokenEnv, which are for ID tokens
	// only.
	OIDC *OIDC `json:"oidc,omitempty"`
	// AllowedHosts are the host names (or addresses), each with a port or
	// not, that the API answers to besides loopback names: an agent
	// listening on a loopback address answers no other Host (against DNS
	// rebinding); one listening elsewhere checks the Host only when this
	// list is set.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// ReadsWhileWorking paces the reads of resources, sources and types
	// while the agent syncs or reconciles: that many reads by id per
	// second (a page of resources counts a tenth of its limit), so that
	// clients that never back off take a bounded share from the work.
	// Omitted or 0: 500; -1: reads are never paced.
	ReadsWhileWorking int `json:"readsWhileWorking,omitempty"`
	// UnknownFields is what resource writes through the API do with the
	// fields of a spec that its schema does not declare, as a source's
	// unknownFields: strict (the default, also when empty), warn (kept,
	// with a Warning header) or prune (dropped, with a Warning header).
	UnknownFields string `json:"unknownFields,omitempty"`

	writeToken, readToken *secret
}

// OIDC is an identity provider whose ID tokens the API takes.
type OIDC struct {
	IssuerURL string `json:"issuerURL"`
	Audience  string `json:"audience"`
	Claim     string `json:"claim,omitempty"`
}

// APIToken is a named API token and what it may do.
type APIToken struct {
	Name     string     `json:"name"`
	TokenEnv string     `json:"tokenEnv"`
	Allow    []APIGrant `json:"allow"`

	value *secret
}

// Value returns the resolved token.
func (t APIToken) Value() string { return t.value.get() }

// APIGrant allows verbs on the kinds and in the sources it names; none
// named means all. Actions narrows it to writes to resources whose action
// instance is one of those named. Namespaces narrows it to resources in
// those namespaces: such a grant covers no cluster-scoped resource, no
// source and no write of a resource type, and lists and event streams
// that name no namespace show only those.
type APIGrant struct {
	Verbs      []string `json:"verbs"`
	Kinds      []string `json:"kinds,omitempty"`
	Sources    []string `json:"sources,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	Actions    []string `json:"actions,omitempty"`
}

// APIVerbs are the verbs a grant may name.
var APIVerbs = []string{"get", "list", "create", "update", "delete", "reconcile", "sync", "approve", "suspend"}

// APISourceVerbs are the verbs only sources take, which a grant limited to
// namespaces never covers.
var APISourceVerbs = []string{"sync", "approve"}

// APIActionVerbs are the verbs of a grant that names actions: the writes
// to one resource, which run its action.
var APIActionVerbs = []string{"create", "update", "delete", "reconcile", "suspend"}

// Names of the tokens that readTokenEnv and writeTokenEnv stand for, and
// the prefix of the names the audit trail gives ID tokens.
const (
	ReadTokenName  = "read"
	WriteTokenName = "write"
	IDTokenPrefix  = "oidc:"
)

// WriteToken returns the resolved write token, or "".
func (a API) WriteToken() string { return a.writeToken.get() }

// ReadToken returns the resolved read token, or "".
func (a API) ReadToken() string { return a.readToken.get() }

// Webhooks configures incoming webhooks.
type Webhooks struct {
	// GitHubSecretEnv names the variable holding the secret that GitHub
	// signs its webhook payloads with.
	GitHubSecretEnv string `json:"githubSecretEnv,omitempty"`
	// GitLabTokenEnv names the variable holding the secret token GitLab
	// sends in X-Gitlab-Token with each delivery.
	GitLabTokenEnv string `json:"gitlabTokenEnv,omitempty"`
	// GitLabSigningKeyEnv names the variable holding the signing token
	// (whsec_ and base64) GitLab signs its deliveries with; when set,
	// unsigned deliveries are refused.
	GitLabSigningKeyEnv string `json:"gitlabSigningKeyEnv,omitempty"`

	githubSecret     *secret
	gitlabToken      *secret
	gitlabSigningKey *secret
}

// GitHubSecret returns the resolved webhook secret, or "".
func (w Webhooks) GitHubSecret() string { return w.githubSecret.get() }

// GitLabToken returns the resolved GitLab secret token, or "".
func (w Webhooks) GitLabToken() string { return w.gitlabToken.get() }

// GitLabSigningKey returns the resolved GitLab signing token, or "". Load
// has checked that it parses (webhook.ParseSigningKey).
func (w Webhooks) GitLabSigningKey() string { return w.gitlabSigningKey.get() }

// secret is a resolved secret, always held through a pointer in an
// unexported field. fmt cannot call methods on unexported fields, so a
// String method would not help; but it prints a pointer to a string-kind
// value as an address with every verb, even in its %!verb(...) output,
// where a pointer to a struct would be shown in full. json.Marshal skips
// unexported fields.
type secret string

func (s *secret) get() string {
	if s == nil {
		return ""
	}
	return string(*s)
}

// Load reads the configuration file at path: see Parse. Problems are
// reported as an *Error naming the file.
func Load(path string, getenv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := parse(data, getenv)
	if e, ok := err.(*Error); ok {
		e.File = path
	} else if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return c, err
}

// LoadSettings reads the configuration file at path as Load does, except
// that an ...Env setting whose variable is unset or empty is not a
// problem: its secret stays empty and MissingSecrets names it. It is for
// the commands that read the store or talk to an agent: they need the
// database and the listen address, not every credential the agent runs
// with, and whatever uses a secret checks that it is there.
func LoadSettings(path string, getenv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := parseWith(data, getenv, true)
	if e, ok := err.(*Error); ok {
		e.File = path
	} else if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return c, err
}

// MissingSecrets lists the ...Env settings whose variable was unset or
// empty, in the order of the file; their values are empty. Only a
// configuration read with LoadSettings can have any: Load refuses them.
func (c *Config) MissingSecrets() []Secret {
	return c.unresolved
}

// Parse decodes a configuration strictly, applies the defaults, resolves
// every ...Env setting through getenv (nil means os.LookupEnv) and validates
// the result. Every problem found is returned together in one *Error.
func Parse(data []byte, getenv func(string) (string, bool)) (*Config, error) {
	return parse(data, getenv)
}

func parse(data []byte, getenv func(string) (string, bool)) (*Config, error) {
	return parseWith(data, getenv, false)
}

// parseWith parses as Parse does; lazySecrets as LoadSettings has it.
func parseWith(data []byte, getenv func(string) (string, bool), lazySecrets bool) (*Config, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	c := Config{lazySecrets: lazySecrets}
	d := decoder{written: map[string]bool{}}
	d.decode("", js, &c)
	c.applyDefaults(func(key string) bool { return d.written[key] })
	c.resolve(getenv, &d.problems)
	c.validate(&d.problems)
	if err := d.problems.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks a configuration whose defaults are applied, returning
// every problem together in one *Error.
func (c *Config) Validate() error {
	var ps problems
	c.validate(&ps)
	return ps.err()
}

// applyDefaults fills in the settings left out. written tells whether the
// file set a key, so that an explicit zero ("workers: 0") is kept and
// rejected by validation instead of quietly replaced; for values set from
// code, zero means unset.
func (c *Config) applyDefaults(written func(key string) bool) {
	unset := func(key string, zero bool) bool { return zero && !written(key) }
	if unset("listen", c.Listen == "") {
		c.Listen = DefaultListen
	}
	if unset("logFormat", c.LogFormat == "") {
		c.LogFormat = DefaultLogFormat
	}
	if unset("logLevel", c.LogLevel == "") {
		c.LogLevel = DefaultLogLevel
	}
	r := &c.Reconcile
	if unset("reconcile.workers", r.Workers == 0) {
		r.Workers = DefaultWorkers
	}
	if unset("reconcile.leaseDuration", r.LeaseDuration.Duration == 0) {
		r.LeaseDuration.Duration = DefaultLeaseDuration
	}
	if unset("reconcile.backoff.initial", r.Backoff.Initial.Duration == 0) {
		r.Backoff.Initial.Duration = DefaultBackoffInitial
	}
	if unset("reconcile.backoff.max", r.Backoff.Max.Duration == 0) {
		r.Backoff.Max.Duration = DefaultBackoffMax
	}
	if unset("history.maxPerResource", c.History.MaxPerResource == 0) {
		c.History.MaxPerResource = DefaultHistoryPerResource
	}
	if unset("history.maxAge", c.History.MaxAge.Duration == 0) {
		c.History.MaxAge.Duration = DefaultHistoryMaxAge
	}
	if unset("metrics.resourceSeriesLimit", c.Metrics.ResourceSeriesLimit == 0) {
		c.Metrics.ResourceSeriesLimit = DefaultResourceSeriesLimit
	}
	// Zero means the default, written or not.
	if c.MaxFileSize == 0 {
		c.MaxFileSize = DefaultMaxFileSize
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		key := fmt.Sprintf("sources[%d]", i)
		if s.MaxFileSize == 0 {
			s.MaxFileSize = c.MaxFileSize
		}
		if s.Prune.Enabled == nil {
			enabled := true
			s.Prune.Enabled = &enabled
		}
		srcSet := !unset(key+".interval", s.Interval.Duration == 0)
		if s.Git == nil {
			if !srcSet {
				s.Interval.Duration = DefaultInterval
			}
			continue
		}
		gitSet := !unset(key+".git.interval", s.Git.Interval.Duration == 0)
		switch {
		case gitSet && srcSet: // if they differ, validation says so
		case gitSet:
			s.Interval = s.Git.Interval
		case srcSet:
			s.Git.Interval = s.Interval
		default:
			s.Interval.Duration = DefaultInterval
			s.Git.Interval.Duration = DefaultInterval
		}
		if unset(key+".git.timeout", s.Git.Timeout.Duration == 0) {
			s.Git.Timeout.Duration = DefaultGitTimeout
		}
		if v := s.Git.Verify; v != nil && v.Mode == "" {
			v.Mode = VerifyHead
		}
		if v := s.Git.Verify; v != nil && v.Rollback == "" {
			v.Rollback = RollbackRefuse
		}
		if s.PullRequests.Enabled && unset(key+".pullRequests.interval", s.PullRequests.Interval.Duration == 0) {
			s.PullRequests.Interval.Duration = DefaultPullRequestInterval
		}
		if pr := &s.PullRequests; pr.Enabled && s.Git != nil {
			if pr.Provider == "" {
				pr.Provider = HostGitHub
				if RemoteHost(s.Git.URL) == "gitlab.com" {
					pr.Provider = HostGitLab
				}
			}
			if pr.APIURL == "" && pr.Provider == HostGitHub {
				pr.APIURL = DefaultGitHubAPIURL
			}
			if pr.APIURL == "" && pr.Provider == HostGitLab && RemoteHost(s.Git.URL) == "gitlab.com" {
				pr.APIURL = DefaultGitLabURL
			}
		}
	}
}

// resolve reads every secret named by an ...Env setting. A named variable
// that is unset or empty is a problem: starting without a credential the
// configuration asks for would only fail later, less clearly. With
// lazySecrets it is only noted, for MissingSecrets.
func (c *Config) resolve(getenv func(string) (string, bool), ps *problems) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	c.unresolved = nil
	get := func(key, name string) *secret {
		if name == "" {
			return nil
		}
		v, ok := getenv(name)
		set := ok && strings.TrimSpace(v) != ""
		switch {
		case !set && c.lazySecrets:
			c.unresolved = append(c.unresolved, Secret{Setting: key, Env: name})
			return nil
		case !ok:
			ps.add(key, "environment variable %s is not set", name)
			return nil
		case !set:
			ps.add(key, "environment variable %s is empty", name)
			return nil
		}
		sv := secret(v)
		return &sv
	}
	for i := range c.Sources {
		g := c.Sources[i].Git
		if g == nil {
			continue
		}
		key := fmt.Sprintf("sources[%d].git.auth.", i)
		a := &g.Auth
		a.token = get(key+"tokenEnv", a.TokenEnv)
		a.username = get(key+"usernameEnv", a.UsernameEnv)
		a.password = get(key+"passwordEnv", a.PasswordEnv)
		a.passphrase = get(key+"sshKeyPassphraseEnv", a.SSHKeyPassphraseEnv)
		pr := &c.Sources[i].PullRequests
		if pr.Enabled {
			if pr.TokenEnv != "" {
				pr.token = get(fmt.Sprintf("sources[%d].pullRequests.tokenEnv", i), pr.TokenEnv)
			} else {
				pr.token = a.token
			}
		}
	}
	c.API.writeToken = get("api.writeTokenEnv", c.API.WriteTokenEnv)
	c.API.readToken = get("api.readTokenEnv", c.API.ReadTokenEnv)
	for i := range c.API.Tokens {
		c.API.Tokens[i].value = get(fmt.Sprintf("api.tokens[%d].tokenEnv", i), c.API.Tokens[i].TokenEnv)
	}
	if o := c.API.OIDC; o != nil && o.Claim == "" {
		o.Claim = "sub"
	}
	c.Dashboard.resolve(get, ps)
	c.Webhooks.githubSecret = get("webhooks.githubSecretEnv", c.Webhooks.GitHubSecretEnv)
	c.Webhooks.gitlabToken = get("webhooks.gitlabTokenEnv", c.Webhooks.GitLabTokenEnv)
	c.Webhooks.gitlabSigningKey = get("webhooks.gitlabSigningKeyEnv", c.Webhooks.GitLabSigningKeyEnv)
	if k := c.Webhooks.gitlabSigningKey; k != nil {
		// Refused here rather than at the first delivery; the error names
		// the variable, never its value.
		if _, err := webhook.ParseSigningKey(k.get()); err != nil {
			ps.add("webhooks.gitlabSigningKeyEnv", "environment variable %s does not hold a signing key: %v",
				c.Webhooks.GitLabSigningKeyEnv, err)
		}
	}
	c.Notifications.resolve(get)
	c.admissionSecrets = nil
	for i, h := range c.Admission {
		if i == 0 {
			c.admissionSecrets = make([]*secret, len(c.Admission))
		}
		c.admissionSecrets[i] = get(fmt.Sprintf("admission[%d].secretEnv", i), h.SecretEnv)
	}
}

// Secret is one secret value the configuration names: the agent masks
// every such value in what it writes and serves. Printing, logging or
// marshalling a Secret shows its setting and variable, never its value.
type Secret struct {
	// Setting is the key that names the variable, e.g. "api.writeTokenEnv".
	Setting string
	// Env is the variable's name.
	Env string

	value *secret
}

// Value returns the secret value.
func (s Secret) Value() string { return s.value.get() }

// Format prints the setting and the variable, whatever the verb.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprintf(f, "%s (%s)", s.Setting, s.Env) }

// LogValue logs the setting and the variable.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("setting", s.Setting), slog.String("env", s.Env))
}

// MarshalJSON writes the setting and the variable.
func (s Secret) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"setting": s.Setting, "env": s.Env})
}

// Secrets lists every secret value the configuration names through an
// ...Env setting and Load resolved, in the order of the file: Git
// credentials and pull-request tokens per source, then the API tokens, the
// dashboard's client secret and session key, and the webhook secrets. A
// pull-request token that is the source's Git token
// is listed once. Action settings are the plugins' to read: the action
// instances list theirs.
func (c *Config) Secrets() []Secret {
	var out []Secret
	add := func(setting, env string, v *secret) {
		if v != nil && env != "" {
			out = append(out, Secret{Setting: setting, Env: env, value: v})
		}
	}
	for i, s := range c.Sources {
		if g := s.Git; g != nil {
			key := fmt.Sprintf("sources[%d].git.auth.", i)
			a := g.Auth
			add(key+"tokenEnv", a.TokenEnv, a.token)
			add(key+"usernameEnv", a.UsernameEnv, a.username)
			add(key+"passwordEnv", a.PasswordEnv, a.password)
			add(key+"sshKeyPassphraseEnv", a.SSHKeyPassphraseEnv, a.passphrase)
		}
		if pr := s.PullRequests; pr.TokenEnv != "" {
			add(fmt.Sprintf("sources[%d].pullRequests.tokenEnv", i), pr.TokenEnv, pr.token)
		}
	}
	add("api.writeTokenEnv", c.API.WriteTokenEnv, c.API.writeToken)
	add("api.readTokenEnv", c.API.ReadTokenEnv, c.API.readToken)
	for i, t := range c.API.Tokens {
		add(fmt.Sprintf("api.tokens[%d].tokenEnv", i), t.TokenEnv, t.value)
	}
	if o := c.Dashboard.OIDC; o != nil {
		add("dashboard.oidc.clientSecretEnv", o.ClientSecretEnv, o.clientSecret)
	}
	add("dashboard.sessionKeyEnv", c.Dashboard.SessionKeyEnv, c.Dashboard.sessionKey)
	add("webhooks.githubSecretEnv", c.Webhooks.GitHubSecretEnv, c.Webhooks.githubSecret)
	add("webhooks.gitlabTokenEnv", c.Webhooks.GitLabTokenEnv, c.Webhooks.gitlabToken)
	add("webhooks.gitlabSigningKeyEnv", c.Webhooks.GitLabSigningKeyEnv, c.Webhooks.gitlabSigningKey)
	c.Notifications.secrets(add)
	for i, h := range c.Admission {
		if i < len(c.admissionSecrets) {
			add(fmt.Sprintf("admission[%d].secretEnv", i), h.SecretEnv, c.admissionSecrets[i])
		}
	}
	return out
}
