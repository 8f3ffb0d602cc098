package gitlabapi_test

import (
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/gitlabapi"
)

func TestParseRemote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		remote  string
		want    gitlabapi.Project
		wantErr string
	}{
		{"https://gitlab.com/g/p.git", gitlabapi.Project{BaseURL: "https://gitlab.com", Path: "g/p"}, ""},
		{"https://gitlab.com/g/sub/p", gitlabapi.Project{BaseURL: "https://gitlab.com", Path: "g/sub/p"}, ""},
		{"https://gitlab.com/g/sub/p.x.git/", gitlabapi.Project{BaseURL: "https://gitlab.com", Path: "g/sub/p.x"}, ""},
		{"  https://GitLab.COM/G/P.git\n", gitlabapi.Project{BaseURL: "https://gitlab.com", Path: "G/P"}, ""},
		{"http://127.0.0.1:8080/g/p.git", gitlabapi.Project{BaseURL: "http://127.0.0.1:8080", Path: "g/p"}, ""},
		{"https://oauth2:glpat-secret@gitlab.example.com/g/p.git", gitlabapi.Project{BaseURL: "https://gitlab.example.com", Path: "g/p"}, ""},
		{"ssh://git@gitlab.example.com:2222/g/sub/p.git", gitlabapi.Project{BaseURL: "https://gitlab.example.com", Path: "g/sub/p"}, ""},
		{"ssh://altssh.gitlab.com:443/g/p.git", gitlabapi.Project{BaseURL: "https://altssh.gitlab.com", Path: "g/p"}, ""},
		{"git@gitlab.com:g/sub/p.git", gitlabapi.Project{BaseURL: "https://gitlab.com", Path: "g/sub/p"}, ""},
		{"gitlab.com:g/p", gitlabapi.Project{BaseURL: "https://gitlab.com", Path: "g/p"}, ""},
		{"git@gitlab.com:/g/p.git", gitlabapi.Project{BaseURL: "https://gitlab.com", Path: "g/p"}, ""},
		{"https://[::1]:8443/g/p", gitlabapi.Project{BaseURL: "https://[::1]:8443", Path: "g/p"}, ""},
		{"", gitlabapi.Project{}, "empty"},
		{"https://gitlab.com/p.git", gitlabapi.Project{}, "GROUP/PROJECT"},
		{"https://gitlab.com/", gitlabapi.Project{}, "GROUP/PROJECT"},
		{"https://gitlab.com/g//p", gitlabapi.Project{}, "empty segment"},
		{"https://gitlab.com/g/../p", gitlabapi.Project{}, "not a GitLab group or project name"},
		{"https://gitlab.com/g/-p", gitlabapi.Project{}, "not a GitLab group or project name"},
		{"https://gitlab.com/g/p%2Fq", gitlabapi.Project{}, "not a GitLab group or project name"},
		{"https://gitlab.com/g/p q", gitlabapi.Project{}, "white space"},
		{"https://gitlab.com/g/p?x=1", gitlabapi.Project{}, "query"},
		{"https://gitlab.com/g/p#frag", gitlabapi.Project{}, "query or fragment"},
		{"ftp://gitlab.com/g/p", gitlabapi.Project{}, "scheme"},
		{"file:///srv/g/p.git", gitlabapi.Project{}, "scheme"},
		{"/srv/git/g/p.git", gitlabapi.Project{}, "want https://"},
		{"./g:p", gitlabapi.Project{}, "want https://"},
		{"https:///g/p", gitlabapi.Project{}, "host"},
		{"git@bad_host:g/p", gitlabapi.Project{}, "not a host name"},
		{"https://gitlab.com/g/p/-/tree/main", gitlabapi.Project{}, "not a GitLab group or project name"},
		{"https://gitlab.com/g/p.atom", gitlabapi.Project{}, "not a GitLab group or project name"},
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			t.Parallel()
			got, err := gitlabapi.ParseRemote(tt.remote)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRemote(%q) = %+v, %v; want an error containing %q", tt.remote, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "glpat-secret") {
					t.Fatalf("the error shows the token: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseRemote(%q) = %+v, %v; want %+v", tt.remote, got, err, tt.want)
			}
		})
	}
}

// A token in a remote must not show in the error about the remote.
func TestParseRemoteErrorHidesCredentials(t *testing.T) {
	t.Parallel()
	for _, remote := range []string{
		"https://oauth2:glpat-secret@gitlab.com/p.git",
		"https://glpat-secret@gitlab.com/p.git",
		"glpat-secret@gitlab.com:p",
	} {
		_, err := gitlabapi.ParseRemote(remote)
		if err == nil || strings.Contains(err.Error(), "glpat-secret") {
			t.Errorf("ParseRemote(%q): %v", remote, err)
		}
	}
}

func TestOnGitLab(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		want bool
	}{
		{"https://gitlab.com/g/p.git", true},
		{"https://gitlab.com", true},
		{"git@gitlab.com:g/p.git", true},
		{"ssh://git@altssh.gitlab.com:443/g/p.git", true},
		{"https://GITLAB.COM/g/p", true},
		{"https://gitlab.example.com/g/p", false},
		{"https://evilgitlab.com/g/p", false},
		{"https://gitlab.com.evil.example/g/p", false},
		{"https://github.com/g/p", false},
		{"", false},
		{"not a url", false},
	}
	for _, tt := range tests {
		if got := gitlabapi.OnGitLab(tt.url); got != tt.want {
			t.Errorf("OnGitLab(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestProjectWebURL(t *testing.T) {
	t.Parallel()
	p, err := gitlabapi.ParseRemote("git@gitlab.com:g/sub/p.git")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.WebURL(); got != "https://gitlab.com/g/sub/p" {
		t.Fatalf("WebURL = %q", got)
	}
}

func TestProjectPath(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		remote, base, want, wantErr string
	}{
		{"https://gitlab.com/g/sub/p.git", "", "g/sub/p", ""},
		{"git@gitlab.example.com:g/p.git", "https://gitlab.example.com", "g/p", ""},
		{"https://example.com/gitlab/g/p.git", "https://example.com/gitlab/", "g/p", ""},
		{"ssh://git@example.com:2222/gitlab/g/sub/p.git", "https://example.com/gitlab", "g/sub/p", ""},
		// A group named like the root, on another host, or a path that
		// would be one segment without the root, is kept.
		{"https://other.example.com/gitlab/g/p.git", "https://example.com/gitlab", "gitlab/g/p", ""},
		{"https://example.com/gitlab/p.git", "https://example.com/gitlab", "gitlab/p", ""},
		{"https://example.com/p.git", "", "", "GROUP/PROJECT"},
		{"https://example.com/g/p.git", "ftp://example.com", "", "want https://HOST"},
	} {
		got, err := gitlabapi.ProjectPath(c.remote, c.base)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ProjectPath(%q, %q) = %q, %v; want an error saying %q", c.remote, c.base, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ProjectPath(%q, %q) = %q, %v; want %q", c.remote, c.base, got, err, c.want)
		}
	}
}
