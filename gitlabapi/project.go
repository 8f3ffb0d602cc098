package gitlabapi

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Project is a GitLab project as a Git remote URL names it: the instance's
// API base and the project's full path, which the API takes in place of a
// numeric id (client-go escapes it).
type Project struct {
	// BaseURL is the instance's URL, scheme and host (and port for an
	// http(s) remote), e.g. https://gitlab.com. An SSH remote gives
	// https://HOST: the SSH port says nothing of the web port.
	BaseURL string
	// Path is the project's full path, e.g. group/subgroup/project.
	Path string
}

// WebURL is the project's page.
func (p Project) WebURL() string { return p.BaseURL + "/" + p.Path }

// ParseRemote reads a GitLab project from a Git remote URL:
// https://HOST[:PORT]/GROUP/.../PROJECT[.git], http://... (kept as given;
// NewClient accepts http for loopback hosts only), ssh://[USER@]HOST[:PORT]/
// GROUP/.../PROJECT[.git], and scp-like [USER@]HOST:GROUP/.../PROJECT[.git].
// Credentials in the URL are dropped. An instance under a relative URL root
// (https://HOST/gitlab/...) cannot be told from a group by the URL alone:
// configure such an instance's base URL explicitly.
func ParseRemote(remote string) (Project, error) {
	scheme, host, port, path, err := splitRemote(remote)
	if err != nil {
		return Project{}, err
	}
	path, err = projectPath(path)
	if err != nil {
		return Project{}, fmt.Errorf("Git remote %q: %w", redactRemote(remote), err)
	}
	base := "https://" + hostPort(host, "")
	if scheme == "https" || scheme == "http" {
		base = scheme + "://" + hostPort(host, port)
	}
	return Project{BaseURL: base, Path: path}, nil
}

// OnGitLab reports whether a Git remote or base URL is on gitlab.com (or
// one of its subdomains, such as altssh.gitlab.com for SSH over port 443),
// where gitlab.com's defaults and limits apply (new projects refuse
// pipeline variables, pipeline creation has its own rate limit).
func OnGitLab(remote string) bool {
	_, host, _, _, err := splitRemote(remote)
	return err == nil && (host == "gitlab.com" || strings.HasSuffix(host, ".gitlab.com"))
}

// splitRemote returns a remote's scheme ("ssh" for the scp-like form),
// lower-case host, port and path.
func splitRemote(remote string) (scheme, host, port, path string, err error) {
	raw := strings.TrimSpace(remote)
	if raw == "" {
		return "", "", "", "", errors.New("empty Git remote URL")
	}
	if strings.ContainsAny(raw, " \t\r\n\x00") {
		return "", "", "", "", fmt.Errorf("Git remote %q: contains white space or control characters", redactRemote(raw))
	}
	if !strings.Contains(raw, "://") {
		// scp-like: [user@]host:path; a colon after a slash makes it a
		// local path, as for git.
		colon := strings.Index(raw, ":")
		if colon <= 0 || strings.Contains(raw[:colon], "/") {
			return "", "", "", "", fmt.Errorf("Git remote %q: want https://HOST/GROUP/PROJECT, ssh://HOST/GROUP/PROJECT or git@HOST:GROUP/PROJECT", redactRemote(raw))
		}
		userHost := raw[:colon]
		if at := strings.LastIndex(userHost, "@"); at >= 0 {
			userHost = userHost[at+1:]
		}
		if !validHost(userHost) {
			return "", "", "", "", fmt.Errorf("Git remote %q: %q is not a host name", redactRemote(raw), userHost)
		}
		return "ssh", strings.ToLower(userHost), "", raw[colon+1:], nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", "", "", fmt.Errorf("Git remote %q: not a URL", redactRemote(raw))
	}
	switch u.Scheme = strings.ToLower(u.Scheme); u.Scheme {
	case "https", "http", "ssh":
	default:
		return "", "", "", "", fmt.Errorf("Git remote %q: scheme %q is not https, http or ssh", redactRemote(raw), u.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", "", "", "", fmt.Errorf("Git remote %q: has a query or fragment", redactRemote(raw))
	}
	if !validHost(u.Hostname()) {
		return "", "", "", "", fmt.Errorf("Git remote %q: no valid host", redactRemote(raw))
	}
	return u.Scheme, strings.ToLower(u.Hostname()), u.Port(), u.EscapedPath(), nil
}

// validHost accepts an IP address or a DNS name.
func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if h == "" || h[0] == '-' || h[0] == '.' {
		return false
	}
	for _, r := range h {
		if !(r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func hostPort(host, port string) string {
	if strings.Contains(host, ":") { // IPv6
		host = "[" + host + "]"
	}
	if port != "" {
		return host + ":" + port
	}
	return host
}

// projectPath checks a remote's path as GitLab names projects and groups:
// two segments or more, each of letters, digits, '_', '-' and '.', not
// starting with '-' or '.' (which also rules out "." and ".."), the last
// without its .git suffix.
func projectPath(p string) (string, error) {
	p = strings.Trim(p, "/")
	p = strings.TrimSuffix(p, ".git")
	p = strings.TrimSuffix(p, "/")
	segs := strings.Split(p, "/")
	if p == "" || len(segs) < 2 {
		return "", errors.New("want a project path GROUP/PROJECT (a project lives in a group or a user's namespace)")
	}
	for _, s := range segs {
		if s == "" {
			return "", errors.New("the path has an empty segment")
		}
		if s[0] == '-' || s[0] == '.' || strings.HasSuffix(s, ".git") || strings.HasSuffix(s, ".atom") {
			return "", fmt.Errorf("%q is not a GitLab group or project name", s)
		}
		for _, r := range s {
			if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return "", fmt.Errorf("%q is not a GitLab group or project name", s)
			}
		}
	}
	return p, nil
}

// redactRemote hides the user part of a remote for error messages: it may
// be a token (https://oauth2:TOKEN@host/..., or a token as the user name).
func redactRemote(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + 3
	}
	return raw[:start] + "xxxxx" + raw[at:]
}

// ProjectPath is the path of the project a Git remote URL names on the
// GitLab instance at baseURL (as NewClient takes it; "" is gitlab.com).
// An instance under a relative URL root (https://HOST/gitlab) serves its
// repositories under that root too: the root is dropped from the path of a
// remote on the instance's host that starts with it.
func ProjectPath(remote, baseURL string) (string, error) {
	p, err := ParseRemote(remote)
	if err != nil {
		return "", err
	}
	base, err := ParseBaseURL(baseURL)
	if err != nil {
		return "", err
	}
	root := strings.Trim(base.Path, "/")
	_, host, _, _, _ := splitRemote(remote)
	if root != "" && strings.EqualFold(host, base.Hostname()) {
		if rest, ok := strings.CutPrefix(p.Path, root+"/"); ok && strings.Contains(rest, "/") {
			return rest, nil
		}
	}
	return p.Path, nil
}
