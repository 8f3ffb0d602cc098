package dashboard

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
)

const testSHA = "0123456789abcdef0123456789abcdef01234567"

func TestCommitLink(t *testing.T) {
	t.Parallel()
	rev := manifest.Revision("main@sha1:" + testSHA)
	tests := []struct {
		name, remote string
		links        SourceLinks
		rev          manifest.Revision
		want         string
	}{
		{"github https", "https://github.com/acme/infra.git", SourceLinks{}, rev,
			"https://github.com/acme/infra/commit/" + testSHA},
		{"github scp-like", "git@github.com:acme/infra.git", SourceLinks{}, rev,
			"https://github.com/acme/infra/commit/" + testSHA},
		{"gitlab nested groups", "https://gitlab.com/acme/platform/infra.git", SourceLinks{}, rev,
			"https://gitlab.com/acme/platform/infra/-/commit/" + testSHA},
		{"gitlab ssh remote with a port", "ssh://git@gitlab.com:2222/acme/platform/infra.git", SourceLinks{}, rev,
			"https://gitlab.com/acme/platform/infra/-/commit/" + testSHA},
		{"self-managed gitlab", "git@git.acme.test:ops/infra.git", SourceLinks{Provider: "gitlab"}, rev,
			"https://git.acme.test/ops/infra/-/commit/" + testSHA},
		{"self-managed gitlab on a port", "https://git.acme.test:8443/ops/infra", SourceLinks{Provider: "gitlab"}, rev,
			"https://git.acme.test:8443/ops/infra/-/commit/" + testSHA},
		{"commitURL template", "ssh://git@git.example.com/infra.git",
			SourceLinks{CommitURL: "https://git.example.com/infra/commit/{sha}"}, rev,
			"https://git.example.com/infra/commit/" + testSHA},
		{"commitURL wins", "https://github.com/acme/infra.git",
			SourceLinks{CommitURL: "https://mirror.example.com/c/{sha}?repo=infra"}, rev,
			"https://mirror.example.com/c/" + testSHA + "?repo=infra"},
		{"commitURL of another scheme", "", SourceLinks{CommitURL: "javascript:alert('{sha}')"}, rev, ""},
		{"unknown host", "https://git.example.com/acme/infra.git", SourceLinks{}, rev, ""},
		{"local path", "/srv/git/infra.git", SourceLinks{Provider: "github"}, rev, ""},
		{"folder revision", "https://github.com/acme/infra.git", SourceLinks{}, "sha256:" + testSHA, ""},
		{"api revision", "https://github.com/acme/infra.git", SourceLinks{}, "api:7", ""},
		{"not hex", "https://github.com/acme/infra.git", SourceLinks{}, "main@sha1:zzzzzzzz", ""},
	}
	for _, tt := range tests {
		if got := commitLink(tt.remote, tt.links, tt.rev); got != tt.want {
			t.Errorf("%s: commitLink(%q, %+v, %q) = %q, want %q", tt.name, tt.remote, tt.links, tt.rev, got, tt.want)
		}
	}
}

func TestLinked(t *testing.T) {
	t.Parallel()
	got := linked("run https://github.com/acme/infra/actions/runs/42. then javascript://x%0aalert(1) and data://x, see http://h.test/p?q=1")
	want := []segment{
		{Text: "run "},
		{Text: "https://github.com/acme/infra/actions/runs/42", URL: "https://github.com/acme/infra/actions/runs/42"},
		{Text: ". then javascript://x%0aalert(1) and data://x, see "},
		{Text: "http://h.test/p?q=1", URL: "http://h.test/p?q=1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("linked =\n%+v\nwant\n%+v", got, want)
	}
	if got := linked("no links"); len(got) != 1 || got[0].URL != "" {
		t.Errorf("plain text: %+v", got)
	}
	for _, bad := range []string{"javascript:alert(1)", "JAVASCRIPT://x", "https://user:pw@h.test/", "//h.test/x", "/relative", "https:///nohost"} {
		if u := safeLink(bad); u != "" {
			t.Errorf("safeLink(%q) = %q", bad, u)
		}
	}
}

func TestOutputLinks(t *testing.T) {
	t.Parallel()
	got := outputLinks(json.RawMessage(`{"run_url": "https://github.com/acme/infra/actions/runs/1", "evil": "javascript:alert(1)",
		"jobs": [{"html_url": "https://github.com/acme/infra/actions/runs/1/job/2"}], "note": "see https://x.test later", "n": 3}`))
	want := []outputLink{
		{Key: "/jobs/0/html_url", URL: "https://github.com/acme/infra/actions/runs/1/job/2"},
		{Key: "/run_url", URL: "https://github.com/acme/infra/actions/runs/1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("outputLinks = %+v, want %+v", got, want)
	}
}
