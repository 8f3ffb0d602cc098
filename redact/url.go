package redact

import (
	"net/url"
	"strings"
)

// urlParts returns the secret parts of a value that is a URL, each to be
// masked on its own: a receiver that gets a request at a secret URL may
// echo only its path ("no route for /services/T0/B0/XXXX"), a log line may
// quote only a query value. They are the user info's password, and its
// user name when it looks secret; the path, and every tail of it from a
// slash on; each path segment that looks secret; the query, and each of its
// values. The host, the scheme and the query's keys are not secret.
//
// A user name or path segment looks secret when it is long enough to be
// masked and is not a plain word: it has a character other than a
// lower-case letter, '-', '_' or '.'. Route names such as "services" or
// "incoming-webhooks" are left alone, so that masking a Slack URL does not
// turn every "services" into "***"; they are masked as part of the path.
func urlParts(v string) []string {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	var parts []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			parts = append(parts, p)
		}
		if name := u.User.Username(); looksSecret(name) {
			parts = append(parts, name)
		}
	}
	for _, path := range []string{u.Path, u.EscapedPath()} {
		for i := range len(path) {
			if path[i] == '/' {
				parts = append(parts, path[i:], path[i+1:])
			}
		}
		for _, seg := range strings.Split(path, "/") {
			if looksSecret(seg) {
				parts = append(parts, seg)
			}
		}
	}
	if u.RawQuery != "" {
		parts = append(parts, u.RawQuery)
		for _, values := range u.Query() {
			parts = append(parts, values...)
		}
	}
	out := parts[:0]
	for _, p := range parts {
		if !TooShort(p) {
			out = append(out, p)
		}
	}
	return out
}

// looksSecret reports whether a user name or path segment is long enough to
// be masked and is not a plain word.
func looksSecret(s string) bool {
	if TooShort(s) {
		return false
	}
	return strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r == '-' || r == '_' || r == '.')
	})
}
