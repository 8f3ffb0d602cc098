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
