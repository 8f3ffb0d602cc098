package webhook

import "testing"

func TestNormalizeRepoURL(t *testing.T) {
	t.Parallel()
	const want = "github.com/acme/app"
	tests := []struct {
		in, want string
	}{
		{"https://github.com/acme/app", want},
		{"https://github.com/acme/app.git", want},
		{"https://github.com/acme/app/", want},
		{"https://github.com/acme/app.git/", want},
		{"http://github.com/acme/app", want},
		{"HTTPS://GitHub.COM/Acme/App.GIT", want},
		{"https://x-access-token:ghp_secret@github.com/acme/app.git", want},
		{"https://github.com:443/acme/app", want},
		{"https://github.com//acme//app", want},
		{"  https://github.com/acme/app\n", want},
		{"ssh://git@github.com/acme/app.git", want},
		{"ssh://git@github.com:22/acme/app", want},
		{"ssh://github.com/acme/app", want},
		{"git+ssh://git@github.com/acme/app.git", want},
		{"git://github.com/acme/app.git", want},
		{"git@github.com:acme/app.git", want},
		{"git@github.com:acme/app", want},
		{"git@github.com:/acme/app.git", want},
		{"github.com:acme/app", want},
		{"org-123@GitHub.com:Acme/App.git", want},
		{"https://ghe.example.com/acme/app.git", "ghe.example.com/acme/app"},
		{"https://github.com/acme/app-infra", "github.com/acme/app-infra"},
		{"https://github.com/acme/app.github.io", "github.com/acme/app.github.io"},
		{"https://api.github.com/repos/acme/app", "api.github.com/repos/acme/app"},

		// Nothing a push can name.
		{"", ""},
		{"file:///srv/git/app.git", ""},
		{"/srv/git/app.git", ""},
		{"./app:v1", ""},
		{"ftp://github.com/acme/app", ""},
		{"https://github.com/", ""},
		{"https://github.com/.git", ""},
		{"https:///acme/app", ""},
		{":acme/app", ""},
		{"https://github.com:bad/acme/app", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := normalizeRepoURL(tt.in); got != tt.want {
				t.Errorf("normalizeRepoURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestRepoKeyGitLab covers GitLab's spellings: nested groups make paths of
// more than two parts, and its SSH URLs may carry a port.
func TestRepoKeyGitLab(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"git@gitlab.example.com:g/sub/p.git", "gitlab.example.com/g/sub/p"},
		{"https://gitlab.example.com/g/sub/p.git", "gitlab.example.com/g/sub/p"},
		{"http://gitlab.example.com/g/sub/p", "gitlab.example.com/g/sub/p"},
		{"ssh://git@gitlab.example.com:2222/g/sub/p.git", "gitlab.example.com/g/sub/p"},
		{"https://oauth2:glpat-secret@gitlab.example.com:8443/G/Sub/P.git", "gitlab.example.com/g/sub/p"},
		{"ssh://git@gitlab.example.com:2222/g/p.git", "gitlab.example.com/g/p"},
		{"git@gitlab.example.com:g/p.git", "gitlab.example.com/g/p"},
		{"https://gitlab.example.com/a/b/c/d/e/p.git", "gitlab.example.com/a/b/c/d/e/p"},
		// Alike but other projects: none may share a key with g/p.
		{"https://gitlab.example.com/g/p2.git", "gitlab.example.com/g/p2"},
		{"https://gitlab.example.com/g/p.git2", "gitlab.example.com/g/p.git2"},
		{"https://gitlab.example.com/g/p/sub.git", "gitlab.example.com/g/p/sub"},
		{"https://gitlab.example.com/gp.git", "gitlab.example.com/gp"},
		{"https://gitlab.example.com/g/p.wiki.git", "gitlab.example.com/g/p.wiki"},
	}
	for _, tt := range tests {
		if got := RepoKey(tt.in); got != tt.want {
			t.Errorf("RepoKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, alike := range []string{"https://gitlab.example.com/g/p2.git", "https://gitlab.example.com/g/sub/p.git",
		"https://gitlab.example.com/g/p/sub.git", "https://gitlab.example.com/gp.git", "https://gitlab.example.com/g/p.wiki.git"} {
		if RepoKey(alike) == RepoKey("git@gitlab.example.com:g/p.git") {
			t.Errorf("%s has the key of g/p", alike)
		}
	}
}
