package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/notify"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// glStatuses returns a GitLab fake with project acme/infra and a
// commit-status host talking to it with token.
func glStatuses(t *testing.T, token string, popts gitlabtest.ProjectOptions) (*gitlabtest.Server, *notify.GitLabStatuses) {
	t.Helper()
	gl := gitlabtest.New(t, gitlabtest.Options{Token: token})
	gl.AddProject("acme/infra", popts)
	client, err := gitlabapi.NewClient(gl.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	return gl, &notify.GitLabStatuses{Client: client, Retry: gitlabapi.Retrier{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}}
}

func glHistory(gl *gitlabtest.Server, sha string) string {
	var out []string
	for _, s := range gl.Statuses("acme/infra", sha) {
		out = append(out, fmt.Sprintf("%s %s %q %s x%d", s.Name, s.Status, s.Description, s.TargetURL, s.Updates))
	}
	return strings.Join(out, " | ")
}

// TestGitLabCommitStatusOfRefusedRevision delivers RevisionRefused
// notices to a commit-status provider talking to the GitLab fake: each
// posts one status on the refused commit of the project the source's URL
// names, failed, with the refusal's first line masked and cut; a refusal
// the agent could not judge says error. Delivered again, nothing more is
// posted.
func TestGitLabCommitStatusOfRefusedRevision(t *testing.T) {
	t.Parallel()
	const token, secret = "glpat-notify-4c1d9e", "hunter2-secret-77aa"
	gl, host := glStatuses(t, token, gitlabtest.ProjectOptions{})
	st := openStore(t)
	if _, err := st.PutSource(t.Context(), &store.Source{Name: "infra", Kind: store.SourceGit,
		URL: "git@gitlab.example.com:acme/infra.git", Phase: store.SourceReady}); err != nil {
		t.Fatal(err)
	}
	p := &notify.CommitStatus{Host: host, Store: st, DashboardURL: "https://no8s.example.com", Masker: redact.New(secret)}
	long := "ValidationFailed: 3 invalid manifest(s); first: widgets/é.yaml:4: spec.name: " + strings.Repeat("ü", 200)
	for i, c := range []struct {
		message, desc string
	}{
		{"ValidationFailed: 1 invalid manifest(s); first: w.yaml:3: spec.size: expected integer\nw.yaml:3: spec.size: expected integer",
			"ValidationFailed: 1 invalid manifest(s); first: w.yaml:3: spec.size: expected integer"},
		{"PruneLimitExceeded: would delete 3 of 4 resources\nApprove it", "PruneLimitExceeded: would delete 3 of 4 resources"},
		{"AdmissionFailed: hook policy did not answer (token " + secret + ")", "error: AdmissionFailed: hook policy did not answer (token ***)"},
		{long, string([]rune(long)[:137]) + "..."},
	} {
		sha := strings.Repeat(string("0123456789abcdef"[i]), 40)
		n := &store.Notice{ID: int64(i + 1), Event: store.EventRevisionRefused, Severity: "error", Source: "infra",
			Revision: manifest.Revision("main@sha1:" + sha), Message: c.message}
		for range 2 {
			if done, _, err := p.Deliver(t.Context(), n, store.Delivery{}); err != nil || !done {
				t.Fatalf("%.40q: Deliver = %v, %v", c.message, done, err)
			}
		}
		want := fmt.Sprintf("no8s/infra failed %q https://no8s.example.com/sources/infra x1", c.desc)
		if got := glHistory(gl, sha); got != want {
			t.Errorf("statuses for %.40q:\n got %s\nwant %s", c.message, got, want)
		}
		if n := gl.Count(gitlabtest.Match{Method: "POST", PathSuffix: "/statuses/" + sha}, 0); n != 1 {
			t.Errorf("%.40q: %d posts, want 1", c.message, n)
		}
		for _, s := range gl.Statuses("acme/infra", sha) {
			if !utf8.ValidString(s.Description) || strings.Contains(s.Description, secret) || strings.Contains(s.Description, token) {
				t.Errorf("description %q: not valid UTF-8, or holds a secret", s.Description)
			}
		}
	}
}

// TestGitLabCommitStatusOfAppliedRevision: an applied commit gets running
// while its resources reconcile, moved to success once they are ready,
// on the project the provider names.
func TestGitLabCommitStatusOfAppliedRevision(t *testing.T) {
	t.Parallel()
	gl, host := glStatuses(t, gitlabtest.DefaultToken, gitlabtest.ProjectOptions{})
	host.Repository = "acme/infra"
	sha := strings.Repeat("ab", 20)
	rev := manifest.Revision("main@sha1:" + sha)
	st := openStore(t)
	ctx := t.Context()
	// A remote that names another project: the provider's repository wins.
	if _, err := st.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceGit, URL: "https://mirror.example.com/x/y.git",
		Phase: store.SourceReady, LastAppliedRevision: rev, LastAttemptedRevision: rev}); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.ApplyResource(ctx, &manifest.Resource{Kind: "Job", Group: "example.com", Version: "v1", Name: "a",
		Spec: json.RawMessage(`{}`), SpecHash: "sha256:x"}, store.SourceRef{Name: "infra", Path: "a.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	p := &notify.CommitStatus{Host: host, Store: st, Settle: time.Millisecond}
	n := &store.Notice{ID: 1, Event: store.EventRevisionApplied, Source: "infra", Revision: rev, CreatedAt: time.Now()}
	done, _, err := p.Deliver(ctx, n, store.Delivery{})
	if err != nil || done {
		t.Fatalf("Deliver = %v, %v; want pending", done, err)
	}
	if got := glHistory(gl, sha); got != `no8s/infra running "1 of 1 resources reconciling"  x1` {
		t.Fatalf("statuses = %s", got)
	}
	if _, err := st.SetResourceStatus(ctx, r.ID, store.StatusUpdate{Phase: manifest.PhaseReady, ObservedGeneration: r.Generation}); err != nil {
		t.Fatal(err)
	}
	if done, _, err := p.Deliver(ctx, n, store.Delivery{Result: store.DeliveryWaiting}); err != nil || !done {
		t.Fatalf("Deliver = %v, %v; want done", done, err)
	}
	if got := glHistory(gl, sha); got != `no8s/infra success "1 ready"  x2` {
		t.Fatalf("statuses = %s", got)
	}
}

// Configuration errors are permanent: a token GitLab refuses, one that may
// not set statuses, a remote that names no GitLab project.
func TestGitLabStatusesPermanentErrors(t *testing.T) {
	t.Parallel()
	gl, host := glStatuses(t, gitlabtest.DefaultToken, gitlabtest.ProjectOptions{
		Tokens: map[string]gitlabtest.Role{"glpat-reporter": gitlabtest.Reporter}})
	reporter, err := gitlabapi.NewClient(gl.URL, "glpat-reporter")
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := gitlabapi.NewClient(gl.URL, "glpat-wrong")
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("cd", 20)
	status := notify.Status{Name: "no8s/infra", State: "success", Description: "ok"}
	for _, c := range []struct {
		name   string
		host   *notify.GitLabStatuses
		remote string
		want   string
	}{
		{"reporter", &notify.GitLabStatuses{Client: reporter}, "https://gitlab.example.com/acme/infra.git", "Developer role"},
		{"unknown token", &notify.GitLabStatuses{Client: wrong}, "https://gitlab.example.com/acme/infra.git", "does not accept the token"},
		{"no such project", host, "https://gitlab.example.com/acme/nope.git", "project path or id is wrong"},
		{"not a project", host, "https://gitlab.example.com/infra.git", "set the provider's repository"},
	} {
		err := c.host.PostStatus(context.Background(), c.remote, sha, status)
		var perm *notify.PermanentError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a permanent error saying %q", c.name, err, c.want)
		}
	}
	if got := glHistory(gl, sha); got != "" {
		t.Errorf("statuses = %s", got)
	}
}

func TestFollowsGitLab(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		remote, apiURL string
		want           bool
	}{
		{"https://gitlab.com/acme/infra.git", "", true},
		{"git@gitlab.com:acme/sub/infra.git", "", true},
		{"ssh://git@altssh.gitlab.com:443/acme/infra.git", "https://gitlab.com", true},
		{"https://github.com/acme/infra.git", "", false},
		{"https://gitlab.example.com/acme/infra.git", "", false},
		{"https://gitlab.example.com/acme/infra.git", "https://gitlab.example.com", true},
		{"ssh://git@GitLab.example.com:2222/acme/infra.git", "https://gitlab.example.com/", true},
		{"https://gitlab.com/acme/infra.git", "https://gitlab.example.com", false},
		{"https://gitlab.example.com/infra.git", "https://gitlab.example.com", false},
	} {
		if got := notify.FollowsGitLab(c.remote, c.apiURL); got != c.want {
			t.Errorf("FollowsGitLab(%q, %q) = %v, want %v", c.remote, c.apiURL, got, c.want)
		}
	}
}
