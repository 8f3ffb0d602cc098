package git

import (
	"strings"
	"testing"
)

func TestNewValidation(t *testing.T) {
	t.Parallel()
	ok := func(c *Config) {}
	tests := []struct {
		name    string
		edit    func(*Config)
		mention string // "" when New must succeed
	}{
		{"file url", ok, ""},
		{"https url", func(c *Config) { c.URL = "https://example.com/acme/infra.git" }, ""},
		{"no name", func(c *Config) { c.Name = "" }, "name"},
		{"no url", func(c *Config) { c.URL = "" }, "url is required"},
		{"no cache folder", func(c *Config) { c.CacheDir = "" }, "cache folder"},
		{"unsupported scheme", func(c *Config) { c.URL = "ftp://example.com/r.git" }, `"ftp"`},
		{"bare path", func(c *Config) { c.URL = "/srv/git/r.git" }, "file://"},
		{"http without host", func(c *Config) { c.URL = "https:///r.git" }, "no host"},
		{"bad semver", func(c *Config) { c.Ref.SemVer = "not a range" }, "semver range"},
		{"short commit", func(c *Config) { c.Ref.Commit = "abc123" }, "40-hex"},
		{"bad branch", func(c *Config) { c.Ref.Branch = "a:b" }, "branch"},
		{"bad tag", func(c *Config) { c.Ref.Tag = "v*" }, "tag"},
		{"pull request", func(c *Config) { c.Ref.PullRequest = 42 }, ""},
		{"negative pull request", func(c *Config) { c.Ref.PullRequest = -1 }, "pull request number -1"},
		{"merge request", func(c *Config) { c.Ref.MergeRequest = 42 }, ""},
		{"negative merge request", func(c *Config) { c.Ref.MergeRequest = -1 }, "merge request IID -1"},
		{"pull and merge request", func(c *Config) { c.Ref.PullRequest = 1; c.Ref.MergeRequest = 2 }, "follow one"},
		{"path leaving the repository", func(c *Config) { c.Path = "a/../../b" }, "leaves"},
		{"absolute path", func(c *Config) { c.Path = "/etc" }, "relative"},
		{"path in .git", func(c *Config) { c.Path = ".git/hooks" }, ".git"},
		{"credentials with file url", func(c *Config) { c.Auth.Token = "abc" }, "file://"},
		{"token and password", func(c *Config) {
			c.URL = "https://example.com/r.git"
			c.Auth = Auth{Username: "u", Password: "p", Token: "t"}
		}, "token"},
		{"ssh key with https", func(c *Config) {
			c.URL = "https://example.com/r.git"
			c.Auth = Auth{SSHKeyFile: "/k"}
		}, "ssh"},
		{"unparsable url keeps the password out", func(c *Config) { c.URL = "https://u:hunter22@exa mple.com/%zz" }, "cannot be parsed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Name: "n", URL: "file:///srv/git/r.git", CacheDir: t.TempDir()}
			tc.edit(&cfg)
			_, err := New(cfg)
			if tc.mention == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.mention)
			}
			if strings.Contains(err.Error(), "hunter22") {
				t.Fatalf("err = %q shows a password", err)
			}
		})
	}
}

func TestNewNormalises(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Name: "n", URL: "https://bot:tok@example.com/acme/infra.git", Path: "./manifests/prod/",
		CacheDir: t.TempDir(), Ref: Ref{Commit: strings.Repeat("AB", 20)}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != "manifests/prod" {
		t.Errorf("path = %q", s.Path())
	}
	if s.Location() != "https://example.com/acme/infra.git" {
		t.Errorf("location = %q", s.Location())
	}
	if s.cfg.Ref.Commit != strings.Repeat("ab", 20) || s.strategy != byCommit {
		t.Errorf("commit = %q, strategy %v", s.cfg.Ref.Commit, s.strategy)
	}
	if s.cfg.Timeout != DefaultTimeout {
		t.Errorf("timeout = %v", s.cfg.Timeout)
	}
	d, err := New(Config{Name: "n", URL: "file:///r", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if d.cfg.Ref.Branch != DefaultBranch || d.strategy != byBranch {
		t.Errorf("default ref = %+v, strategy %v", d.cfg.Ref, d.strategy)
	}
	// A pull request does not pick up the default branch it ignores.
	p, err := New(Config{Name: "n", URL: "file:///r", CacheDir: t.TempDir(), Ref: Ref{PullRequest: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Ref.Branch != "" || p.strategy != byPullRequest {
		t.Errorf("pull request ref = %+v, strategy %v", p.cfg.Ref, p.strategy)
	}
}
