package config

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Flags are the command-line settings that override the file. Empty
// values leave the file's settings alone.
type Flags struct {
	// Database overrides database.
	Database string
	// Listen overrides listen.
	Listen string
	// Sources, when any are given, replace the file's sources. Each is a
	// folder path, or a Git URL with an optional "#branch:path" suffix,
	// e.g. https://github.com/acme/infra.git#main:manifests.
	Sources []string
	// LogFormat overrides logFormat.
	LogFormat string
	// LogLevel overrides logLevel.
	LogLevel string
}

// ApplyFlags applies f over c, fills in defaults (so a zero Config plus
// flags is a complete configuration), resolves secrets through getenv (nil
// means os.LookupEnv) and validates the result. Problems with a flag's value
// are named by the flag (--source "ftp://x": ...).
func (c *Config) ApplyFlags(f Flags, getenv func(string) (string, bool)) error {
	var ps problems
	if f.Database != "" {
		c.Database = f.Database
	}
	if f.Listen != "" {
		c.Listen = f.Listen
	}
	if f.LogFormat != "" {
		c.LogFormat = f.LogFormat
	}
	if f.LogLevel != "" {
		c.LogLevel = f.LogLevel
	}
	if len(f.Sources) > 0 {
		sources := make([]Source, 0, len(f.Sources))
		taken := map[string]bool{}
		for _, v := range f.Sources {
			s := sourceFromFlag(v)
			s.Name = uniqueName(s.Name, taken)
			sources = append(sources, s)
		}
		c.Sources = sources
	}
	c.applyDefaults(func(string) bool { return false })
	if len(f.Sources) > 0 {
		for i := range c.Sources {
			var sps problems
			validateSource("", &c.Sources[i], &sps)
			for _, p := range sps {
				// Name the flag and the value typed: the key of a source
				// derived from it would mean little to the user.
				ps = append(ps, Problem{
					Key:     fmt.Sprintf("--source %q", f.Sources[i]),
					Message: strings.TrimPrefix(p.String(), "."),
				})
			}
		}
	}
	c.resolve(getenv, &ps)
	var vps problems
	c.validate(&vps)
	if len(f.Sources) > 0 {
		// The flag sources were checked above, one by one; their derived
		// names cannot collide, which is all validate adds.
		vps = slices.DeleteFunc(vps, func(p Problem) bool { return strings.HasPrefix(p.Key, "sources[") })
	}
	// A bad value that came from a flag is named by the flag.
	fromFlag := map[string]string{}
	for key, flag := range map[string][2]string{
		"listen":    {"--listen", f.Listen},
		"logFormat": {"--log-format", f.LogFormat},
		"logLevel":  {"--log-level", f.LogLevel},
	} {
		if flag[1] != "" {
			fromFlag[key] = flag[0]
		}
	}
	for _, p := range vps {
		if flag, ok := fromFlag[p.Key]; ok {
			p.Key = flag
		}
		ps = append(ps, p)
	}
	return ps.err()
}

// sourceFromFlag turns a --source value into a source with a name derived
// from the folder or repository.
func sourceFromFlag(v string) Source {
	if isGitURL(v) {
		u, ref, _ := strings.Cut(v, "#")
		branch, p, _ := strings.Cut(ref, ":")
		return Source{Name: repoBase(u), Git: &GitSource{URL: u, Branch: branch, Path: p}}
	}
	base := filepath.Base(v)
	if abs, err := filepath.Abs(v); err == nil {
		// "." and "dir/.." name the folder they point at.
		base = filepath.Base(abs)
	}
	return Source{Name: base, Dir: v}
}

// isGitURL tells a Git URL from a folder path: a URL has a scheme or is
// scp-like. An unsupported scheme still counts, so validation rejects it
// instead of it becoming a folder named "ftp:".
func isGitURL(v string) bool {
	return strings.Contains(v, "://") || scpLikeRE.MatchString(strings.SplitN(v, "#", 2)[0])
}

// repoBase returns the repository's name: the last element of the URL's
// path without ".git".
func repoBase(u string) string {
	p := u
	if parsed, err := url.Parse(u); err == nil && parsed.Scheme != "" {
		p = parsed.Path
	} else if _, after, ok := strings.Cut(u, ":"); ok {
		p = after // scp-like user@host:path
	}
	return strings.TrimSuffix(path.Base(strings.TrimRight(p, "/")), ".git")
}

// uniqueName turns base into a valid source name not in taken, and takes it.
func uniqueName(base string, taken map[string]bool) string {
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 55 {
		// Leave room for a "-N" suffix within the 63 allowed.
		name = strings.TrimRight(name[:55], "-")
	}
	if name == "" || name == APISourceName {
		name = strings.TrimPrefix(name+"-source", "-")
	}
	candidate := name
	for n := 2; taken[candidate]; n++ {
		candidate = fmt.Sprintf("%s-%d", name, n)
	}
	taken[candidate] = true
	return candidate
}
