package dashboard

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
)

// SourceLinks is what the agent's configuration says of a source's Git
// host, for the links to its commits.
type SourceLinks struct {
	// CommitURL is the source's commitURL: a commit's address with {sha}
	// standing for its hash. Empty when it sets none.
	CommitURL string
	// Provider is the Git host its pullRequests.provider names, github or
	// gitlab; empty when it names none.
	Provider string
}

// commitSHA is what a commitURL template says for the commit's hash.
const commitSHA = "{sha}"

// segment is a piece of a text: plain text, or a link when URL is set.
type segment struct {
	Text, URL string
}

// urlInText finds what looks like a URL in free text, such as a
// condition's message; safeLink decides whether it becomes a link.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s<>"']+`)

// linked splits a text into its plain parts and its http and https URLs,
// so that a page can link these and show everything else as text. A URL
// of any other scheme (javascript:, data:) stays text.
func linked(s string) []segment {
	var out []segment
	last := 0
	for _, m := range urlInText.FindAllStringIndex(s, -1) {
		u := strings.TrimRight(s[m[0]:m[1]], ".,;:!?)]}")
		if safeLink(u) == "" {
			continue
		}
		if m[0] > last {
			out = append(out, segment{Text: s[last:m[0]]})
		}
		out = append(out, segment{Text: u, URL: u})
		last = m[0] + len(u)
	}
	if last < len(s) {
		out = append(out, segment{Text: s[last:]})
	}
	return out
}

// safeLink returns u when it is an absolute http or https URL with a host
// and no credentials, the only links the dashboard makes of data, and ""
// otherwise.
func safeLink(u string) string {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
		return ""
	}
	return p.String()
}

// outputLink is a URL found among a resource's outputs.
type outputLink struct {
	// Key is where it is: a JSON pointer into the outputs.
	Key, URL string
}

// maxOutputLinks bounds how many links the outputs section lists.
const maxOutputLinks = 20

// outputLinks returns the http and https URLs among the string values of
// outputs, with where they are, in the order of the sorted keys.
func outputLinks(raw json.RawMessage) []outputLink {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	var out []outputLink
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		if len(out) >= maxOutputLinks {
			return
		}
		switch v := v.(type) {
		case string:
			if u := safeLink(v); u != "" && !strings.ContainsAny(strings.TrimSpace(v), " \t\n") {
				out = append(out, outputLink{Key: ptr, URL: u})
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), v[k])
			}
		case []any:
			for i, e := range v {
				walk(ptr+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("", v)
	return out
}

// commitHash returns the commit hash a Git revision names ("main@sha1:<hex>"
// or a bare hash), or "" for a revision that names none (a folder's digest,
// an API write's).
func commitHash(r manifest.Revision) string {
	s := string(r)
	if i := strings.LastIndex(s, "sha1:"); i >= 0 {
		s = s[i+len("sha1:"):]
	} else if strings.Contains(s, ":") || strings.Contains(s, "@") {
		return ""
	}
	if len(s) < 7 || len(s) > 64 {
		return ""
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ""
		}
	}
	return s
}

// repoWeb returns the host (with its port for http and https remotes) and
// the repository path of a Git remote, https://host/group/repo.git,
// ssh://git@host:port/group/repo.git or git@host:group/repo.git, without
// the .git suffix; ok is false for anything else, a local path among them.
func repoWeb(remote string) (scheme, host, path string, ok bool) {
	remote = strings.TrimSpace(remote)
	if u, err := url.Parse(remote); err == nil && u.Host != "" {
		switch u.Scheme {
		case "http", "https":
			scheme, host = u.Scheme, u.Host
		case "ssh", "git", "git+ssh":
			// The web pages are on the default port, not the SSH one.
			scheme, host = "https", u.Hostname()
		default:
			return "", "", "", false
		}
		path = u.Path
	} else if at := strings.Index(remote, "@"); at >= 0 && !strings.Contains(remote[:at], "/") {
		// scp-like: user@host:path
		h, p, found := strings.Cut(remote[at+1:], ":")
		if !found || h == "" || strings.Contains(h, "/") {
			return "", "", "", false
		}
		scheme, host, path = "https", h, p
	} else {
		return "", "", "", false
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	if host == "" || path == "" || !strings.Contains(path, "/") || strings.Contains(path, "..") {
		return "", "", "", false
	}
	return scheme, strings.ToLower(host), path, true
}

// commitLink returns the address of revision's commit on the source's Git
// host: from the source's commitURL when it sets one, else on GitHub or
// GitLab, recognised from the remote's host or named by the provider; ""
// when the revision names no commit or the host is unknown.
func commitLink(remote string, links SourceLinks, rev manifest.Revision) string {
	sha := commitHash(rev)
	if sha == "" {
		return ""
	}
	if links.CommitURL != "" {
		return safeLink(strings.ReplaceAll(links.CommitURL, commitSHA, url.PathEscape(sha)))
	}
	scheme, host, path, ok := repoWeb(remote)
	if !ok {
		return ""
	}
	hostname := host
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		hostname = host[:i]
	}
	provider := links.Provider
	switch hostname {
	case "github.com":
		provider = "github"
	case "gitlab.com":
		provider = "gitlab"
	}
	base := scheme + "://" + host + "/" + escapePath(path)
	switch provider {
	case "github":
		return safeLink(base + "/commit/" + sha)
	case "gitlab":
		return safeLink(base + "/-/commit/" + sha)
	}
	return ""
}

// escapePath escapes each segment of a repository path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}
