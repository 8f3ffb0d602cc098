package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/admission"
	"github.com/no8s/no8s-agent/manifest"
)

var (
	// Source names become parts of API paths and labels, hence DNS-label rules.
	sourceNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// Action names may also use underscores, as plugin names do.
	actionNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)
	// scpLikeRE matches Git's scp-like syntax, user@host:path.
	scpLikeRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:.+$`)
	// commitRE is a full SHA-1 or SHA-256 commit hash: a shallow fetch
	// cannot resolve an abbreviated one.
	commitRE = regexp.MustCompile(`^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)
)

// APISourceName is the pseudo-source that owns resources created through
// the HTTP API; no configured source may take the name.
const APISourceName = "api"

var (
	logFormats = []string{"text", "json"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// Minimums of the durations a configuration sets. Below them the agent
// would spin (intervals, backoff), give up before a remote can answer
// (timeouts), or lose leases while renewing them.
const (
	// MinInterval is the shortest sync interval of a source.
	MinInterval = time.Second
	// MinPullRequestInterval is the shortest poll of open pull requests,
	// which spends GitHub API quota.
	MinPullRequestInterval = 10 * time.Second
	// MinGitTimeout is the shortest timeout of a Git fetch.
	MinGitTimeout = time.Second
	// MinLeaseDuration is the shortest lease a worker takes on a resource.
	MinLeaseDuration = time.Second
	// MinBackoff is the shortest retry backoff (initial and max).
	MinBackoff = 100 * time.Millisecond
)

// checkFileSize checks a maxFileSize setting; zero is the default.
func checkFileSize(ps *problems, key string, v ByteSize) {
	if v != 0 && (v < MinMaxFileSize || v > MaxMaxFileSize) {
		ps.add(key, "must be between %s and %s, not %s", MinMaxFileSize, MaxMaxFileSize, v)
	}
}

// atLeast reports whether d is at least min, adding a problem naming key
// and the minimum when it is not.
func atLeast(ps *problems, key string, d Duration, minimum time.Duration) bool {
	switch {
	case d.Duration <= 0:
		ps.add(key, "must be positive (at least %s), not %s", minimum, d)
	case d.Duration < minimum:
		ps.add(key, "must be at least %s, not %s", minimum, d)
	default:
		return true
	}
	return false
}

func (c *Config) validate(ps *problems) {
	if err := checkListen(c.Listen); err != "" {
		ps.add("listen", "%s", err)
	}
	if !slices.Contains(logFormats, c.LogFormat) {
		ps.add("logFormat", "must be one of %s, not %q", strings.Join(logFormats, ", "), c.LogFormat)
	}
	if !slices.Contains(logLevels, c.LogLevel) {
		ps.add("logLevel", "must be one of %s, not %q", strings.Join(logLevels, ", "), c.LogLevel)
	}

	checkFileSize(ps, "maxFileSize", c.MaxFileSize)
	if c.DefaultNamespace != "" {
		for _, msg := range manifest.NamespaceProblems(c.DefaultNamespace) {
			ps.add("defaultNamespace", "%s", msg)
		}
	}
	seen := map[string]int{}
	for i := range c.Sources {
		key := fmt.Sprintf("sources[%d]", i)
		s := &c.Sources[i]
		if j, dup := seen[s.Name]; dup && s.Name != "" {
			ps.add(key+".name", "duplicate source name %q (also sources[%d])", s.Name, j)
		} else {
			seen[s.Name] = i
		}
		validateSource(key, s, ps)
	}
	for _, s := range c.Sources {
		if j, taken := seen[s.Name+PullRequestCacheSuffix]; taken && s.Git != nil && s.PullRequests.Enabled {
			ps.add(fmt.Sprintf("sources[%d].name", j), "source %s keeps the clones of its pull requests in the cache folder %q, this source's own: rename one of them",
				s.Name, s.Name+PullRequestCacheSuffix)
		}
	}

	names := make([]string, 0, len(c.Actions))
	for name := range c.Actions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		key := "actions." + name
		a := c.Actions[name]
		if !actionNameRE.MatchString(name) {
			ps.add(key, "invalid action name %q: use lower-case letters, digits, '-' and '_', at most 63, starting and ending with a letter or digit", name)
		}
		if a.Plugin == "" {
			ps.add(key+".plugin", "required")
		}
		if len(a.Config) > 0 && !bytes.HasPrefix(bytes.TrimSpace(a.Config), []byte("{")) {
			ps.add(key+".config", "must be a mapping")
		}
	}

	r := c.Reconcile
	if r.Workers < 1 {
		ps.add("reconcile.workers", "must be at least 1, not %d", r.Workers)
	}
	atLeast(ps, "reconcile.leaseDuration", r.LeaseDuration, MinLeaseDuration)
	atLeast(ps, "reconcile.backoff.initial", r.Backoff.Initial, MinBackoff)
	switch {
	case !atLeast(ps, "reconcile.backoff.max", r.Backoff.Max, MinBackoff):
	case r.Backoff.Max.Duration < r.Backoff.Initial.Duration:
		ps.add("reconcile.backoff.max", "%s is less than backoff.initial (%s)", r.Backoff.Max, r.Backoff.Initial)
	}
	c.Notifications.validate(ps)
	if o := c.API.OIDC; o != nil {
		if o.IssuerURL == "" {
			ps.add("api.oidc.issuerURL", "required: the identity provider's issuer URL")
		} else {
			checkHTTPURL(ps, "api.oidc.issuerURL", o.IssuerURL)
		}
		if o.Audience == "" {
			ps.add("api.oidc.audience", "required: the audience (client ID) the ID tokens are issued for")
		}
	}
	c.validateTokens(ps)
	c.validateDashboard(ps)
	for i, h := range c.API.AllowedHosts {
		if msg := checkAllowedHost(h); msg != "" {
			ps.add(fmt.Sprintf("api.allowedHosts[%d]", i), "%s", msg)
		}
	}
	if m := c.API.UnknownFields; m != "" && !slices.Contains(unknownFieldsModes, m) {
		ps.add("api.unknownFields", "must be strict, warn or prune, not %q", m)
	}
	if c.API.ReadsWhileWorking < -1 {
		ps.add("api.readsWhileWorking", "must be a number of reads per second, 0 for the default, or -1 to never pace reads; not %d", c.API.ReadsWhileWorking)
	}
	for _, p := range admission.CheckHooks(c.Admission) {
		ps.add(p.Key, "%s", p.Message)
	}
	if c.Metrics.ResourceSeriesLimit < 0 {
		ps.add("metrics.resourceSeriesLimit", "must be 0 (no per-resource series) or more, not %d", c.Metrics.ResourceSeriesLimit)
	}
	if c.History.MaxPerResource < 0 {
		ps.add("history.maxPerResource", "must be 0 (keep all) or more, not %d", c.History.MaxPerResource)
	}
	if c.History.MaxAge.Duration < 0 {
		ps.add("history.maxAge", "must be 0 (keep all) or a positive duration such as 720h, not %s", c.History.MaxAge)
	}
}

// validateSource checks one source; key prefixes every problem, so that
// sources from flags can be named by their flag.
func validateSource(key string, s *Source, ps *problems) {
	switch {
	case s.Name == "":
		ps.add(key+".name", "required")
	case s.Name == APISourceName:
		ps.add(key+".name", "%q is reserved for resources created through the API", s.Name)
	case !sourceNameRE.MatchString(s.Name):
		ps.add(key+".name", "invalid source name %q: use lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit", s.Name)
	}
	switch {
	case s.Git != nil && s.Dir != "":
		ps.add(key, "set either git or dir, not both")
	case s.Git == nil && s.Dir == "":
		ps.add(key, "set either git or dir")
	}
	atLeast(ps, key+".interval", s.Interval, MinInterval)
	checkFileSize(ps, key+".maxFileSize", s.MaxFileSize)
	if s.UnknownFields != "" && !slices.Contains(unknownFieldsModes, s.UnknownFields) {
		ps.add(key+".unknownFields", "must be strict, warn or prune, not %q", s.UnknownFields)
	}
	if s.CommitURL != "" {
		if u, err := url.Parse(s.CommitURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			ps.add(key+".commitURL", "%q is not an http(s) URL without credentials", s.CommitURL)
		} else if !strings.Contains(s.CommitURL, CommitSHA) {
			ps.add(key+".commitURL", "%q does not say where the commit's hash goes: put %s there", s.CommitURL, CommitSHA)
		}
	}
	if m := s.Prune.MaxDeletes; m.Count < 0 || m.Percent < 0 || m.Percent > 100 || (m.Count > 0 && m.Percent > 0) {
		ps.add(key+".prune.maxDeletes", "invalid limit (count %d, percent %d)", m.Count, m.Percent)
	}
	if s.Git == nil {
		if s.PullRequests.Enabled {
			ps.add(key+".pullRequests.enabled", "pull-request previews need a git source")
		}
		return
	}
	if pr := s.PullRequests; pr.Enabled {
		if pr.Token() == "" && pr.TokenEnv == "" && s.Git.Auth.TokenEnv == "" {
			ps.add(key+".pullRequests.tokenEnv", "previews need a token of the Git host: set pullRequests.tokenEnv or git.auth.tokenEnv")
		}
		switch pr.Provider {
		case "", HostGitHub:
		case HostGitLab:
			if pr.APIURL == "" {
				ps.add(key+".pullRequests.apiURL", "required for a self-managed GitLab: its address, https://HOST")
			}
		default:
			ps.add(key+".pullRequests.provider", "must be github or gitlab, not %q", pr.Provider)
		}
		if pr.DashboardURL != "" {
			checkHTTPURL(ps, key+".pullRequests.dashboardURL", pr.DashboardURL)
		}
		// Zero is the default, filled in by Parse; programmatic configs may leave it.
		if pr.Interval.Duration != 0 {
			atLeast(ps, key+".pullRequests.interval", pr.Interval, MinPullRequestInterval)
		}
		if u, err := url.Parse(pr.APIURL); pr.APIURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil) {
			ps.add(key+".pullRequests.apiURL", "%q is not an http(s) URL without credentials", pr.APIURL)
		}
	}
	g := s.Git
	key += ".git"
	if atLeast(ps, key+".interval", g.Interval, MinInterval) && g.Interval != s.Interval {
		ps.add(key+".interval", "%s differs from the source's interval (%s); set only one", g.Interval, s.Interval)
	}
	atLeast(ps, key+".timeout", g.Timeout, MinGitTimeout)
	if g.Commit != "" && !commitRE.MatchString(g.Commit) {
		ps.add(key+".commit", "must be a full commit hash (40 hex digits), not %q", g.Commit)
	}
	if g.Path != "" {
		if p := path.Clean(g.Path); path.IsAbs(g.Path) || p == ".." || strings.HasPrefix(p, "../") {
			ps.add(key+".path", "must be a folder inside the repository, not %q", g.Path)
		}
	}
	ssh := false
	switch {
	case g.URL == "":
		ps.add(key+".url", "required")
	default:
		var msg string
		ssh, msg = checkGitURL(g.URL)
		if msg != "" {
			ps.add(key+".url", "%s", msg)
		}
	}
	validateAuth(key+".auth", g, ssh, ps)
	if v := g.Verify; v != nil {
		switch v.Mode {
		case "", VerifyHead, VerifyAll: // "" is head; Parse writes it out
		default:
			ps.add(key+".verify.mode", "must be %s or %s, not %q", VerifyHead, VerifyAll, v.Mode)
		}
		switch v.Rollback {
		case "", RollbackRefuse, RollbackAllow: // "" is refuse; Parse writes it out
		default:
			ps.add(key+".verify.rollback", "must be %s (the default: a head older than the applied commit waits for an approval) or %s, not %q",
				RollbackRefuse, RollbackAllow, v.Rollback)
		}
		if v.OpenPGPKeysFile == "" && v.SSHAllowedSignersFile == "" {
			ps.add(key+".verify", "name the trusted keys: openpgpKeysFile, sshAllowedSignersFile or both")
		}
		for _, f := range []struct{ name, path string }{{"openpgpKeysFile", v.OpenPGPKeysFile}, {"sshAllowedSignersFile", v.SSHAllowedSignersFile}} {
			if f.path == "" {
				continue
			}
			if _, err := os.Stat(f.path); err != nil {
				ps.add(key+".verify."+f.name, "cannot read %s: %v", f.path, errors.Unwrap(err))
			}
		}
	}
}

// validateAuth allows one way to authenticate, suited to the URL's scheme.
func validateAuth(key string, g *GitSource, ssh bool, ps *problems) {
	a := g.Auth
	token, basic, key2 := a.TokenEnv != "", a.UsernameEnv != "" || a.PasswordEnv != "", a.SSHKeyFile != ""
	n := 0
	for _, b := range []bool{token, basic, key2} {
		if b {
			n++
		}
	}
	if n > 1 {
		ps.add(key, "set only one of tokenEnv, usernameEnv/passwordEnv and sshKeyFile")
		return
	}
	if basic && a.UsernameEnv == "" {
		ps.add(key+".usernameEnv", "required with passwordEnv")
	}
	if basic && a.PasswordEnv == "" {
		ps.add(key+".passwordEnv", "required with usernameEnv")
	}
	if a.SSHKeyPassphraseEnv != "" && !key2 {
		ps.add(key+".sshKeyPassphraseEnv", "needs sshKeyFile")
	}
	if key2 && a.KnownHostsFile == "" {
		// Host keys are always checked: trusting any host would hand the
		// key's access to whoever answers.
		ps.add(key+".knownHostsFile", "required with sshKeyFile")
	}
	if g.URL == "" {
		return
	}
	switch {
	case (token || basic) && ssh:
		ps.add(key, "token and password authentication need an http(s) URL, not an ssh one")
	case key2 && !ssh:
		ps.add(key+".sshKeyFile", "needs an ssh URL (ssh://... or user@host:path)")
	}
}

// checkGitURL reports whether u is an ssh URL, and a message when it is not
// a URL the agent can fetch.
func checkGitURL(u string) (ssh bool, msg string) {
	if !strings.Contains(u, "://") && scpLikeRE.MatchString(u) {
		return true, ""
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return false, fmt.Sprintf("invalid URL %q: %v", u, err)
	}
	switch parsed.Scheme {
	case "http", "https", "ssh":
		if parsed.Host == "" {
			return false, fmt.Sprintf("URL %q has no host", u)
		}
		if _, hasPassword := parsed.User.Password(); hasPassword {
			return false, "URL must not hold a password; use auth.passwordEnv or auth.tokenEnv"
		}
	case "file":
		if parsed.Path == "" {
			return false, fmt.Sprintf("URL %q has no path", u)
		}
	case "":
		return false, fmt.Sprintf("%q is not a URL: use https://, ssh://, file:// or user@host:path", u)
	default:
		return false, fmt.Sprintf("unsupported URL scheme %q: use https, http, ssh, file or user@host:path", parsed.Scheme)
	}
	return parsed.Scheme == "ssh", ""
}

// checkListen returns a message when addr is not host:port.
func checkListen(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("must be host:port, like %q, not %q", DefaultListen, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Sprintf("invalid port %q: must be a number from 0 to 65535", port)
	}
	return ""
}
