package webhook

import (
	"net/url"
	"path"
	"strings"
)

// normalizeRepoURL reduces a Git remote URL to "host/owner/repo" (on GitLab
// "host/group/subgroup/.../project": the whole path is kept) so that
// the many spellings of one repository compare equal: https, http, ssh and
// git schemes, scp-like user@host:path, a .git suffix, a trailing slash,
// user info (which may hold a token) and a port. The result is lower case
// because GitHub and GitLab treat host, owner and repository names
// case-insensitively.
// It returns "" for what names no remote repository (local paths, file://,
// unparsable input), and "" never matches.
func normalizeRepoURL(raw string) string {
	raw = strings.TrimSpace(raw)
	var host, p string
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return ""
		}
		switch strings.ToLower(u.Scheme) {
		case "https", "http", "ssh", "git", "git+ssh", "ssh+git":
		default:
			return ""
		}
		// The port is dropped: GitHub serves one repository on several
		// ports (22 or 443 for SSH, 443 for HTTPS), and a GitLab's SSH
		// port (often 2222) is not in the scp-like URLs its webhooks send.
		host, p = u.Hostname(), u.Path
	} else {
		// scp-like [user@]host:path; a slash before the colon makes it a
		// local path, as Git reads it.
		colon := strings.IndexByte(raw, ':')
		if colon <= 0 || strings.Contains(raw[:colon], "/") {
			return ""
		}
		host, p = raw[:colon], raw[colon+1:]
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			host = host[at+1:]
		}
	}
	p = strings.Trim(path.Clean("/"+p), "/")
	p = strings.TrimSuffix(strings.ToLower(p), ".git")
	p = strings.TrimSuffix(p, "/")
	host = strings.ToLower(host)
	if host == "" || p == "" || p == "." {
		return ""
	}
	return host + "/" + p
}

// RepoKey reduces a Git remote URL to "host/owner/repo" (or the longer path
// of a GitLab project in subgroups), lower case, so that two spellings of
// one repository compare equal; "" for what names no remote repository.
func RepoKey(url string) string { return normalizeRepoURL(url) }
