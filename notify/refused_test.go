package notify_test

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/notify"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// TestCommitStatusOfRefusedRevision delivers RevisionRefused notices to a
// commit-status provider talking to the GitHub fake: each posts one
// status on the refused commit, failure when the commit is at fault and
// error when the agent could not judge it, whose description is the
// refusal's first line with secrets masked, cut to GitHub's 140
// characters (the fake refuses longer ones) between characters.
func TestCommitStatusOfRefusedRevision(t *testing.T) {
	t.Parallel()
	const token, secret = "gh-token-4c1d9e", "hunter2-secret-77aa"
	gh := githubtest.New(t, githubtest.Options{Token: token, Owner: "acme", Repo: "infra"})
	client, err := githubapi.NewClient(gh.BaseURL(), token)
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	if _, err := st.PutSource(t.Context(), &store.Source{Name: "infra", Kind: store.SourceGit,
		URL: "https://github.com/acme/infra.git", Phase: store.SourceReady}); err != nil {
		t.Fatal(err)
	}
	p := &notify.CommitStatus{Host: &notify.GitHubStatuses{Client: client}, Store: st, DashboardURL: "https://no8s.example.com", Masker: redact.New(secret)}
	long := "ValidationFailed: 3 invalid manifest(s); first: widgets/é.yaml:4: spec.name: " + strings.Repeat("ü", 200)
	for i, c := range []struct {
		message, state, desc string
	}{
		{"ValidationFailed: 1 invalid manifest(s); first: w.yaml:3: spec.size: expected integer\nw.yaml:3: spec.size: expected integer",
			"failure", "ValidationFailed: 1 invalid manifest(s); first: w.yaml:3: spec.size: expected integer"},
		{"SignatureRejected: refused by the source's signature policy: commit 0123abcd: not signed",
			"failure", "SignatureRejected: refused by the source's signature policy: commit 0123abcd: not signed"},
		{"OwnershipConflict: Job/x is already declared by source other", "failure",
			"OwnershipConflict: Job/x is already declared by source other"},
		{"PruneLimitExceeded: would delete 3 of 4 resources\nApprove it", "failure", "PruneLimitExceeded: would delete 3 of 4 resources"},
		{"AdmissionFailed: hook policy did not answer (token " + secret + ")", "error", "AdmissionFailed: hook policy did not answer (token ***)"},
		{long, "failure", string([]rune(long)[:137]) + "..."},
	} {
		sha := strings.Repeat(string("0123456789abcdef"[i]), 40)
		n := &store.Notice{ID: int64(i + 1), Event: store.EventRevisionRefused, Severity: "error", Source: "infra",
			Revision: manifest.Revision("main@sha1:" + sha), Message: c.message}
		done, _, err := p.Deliver(t.Context(), n, store.Delivery{})
		if err != nil || !done {
			t.Fatalf("%s: Deliver = %v, %v", c.message, done, err)
		}
		got := gh.Statuses(sha)
		if len(got) != 1 {
			t.Fatalf("%s: %d statuses, want 1: %+v", c.message, len(got), got)
		}
		s := got[0]
		if s.State != c.state || s.Description != c.desc || s.Context != "no8s/infra" ||
			s.TargetURL != "https://no8s.example.com/sources/infra" {
			t.Errorf("status for %.40q:\n got %+v\nwant state %s, description %q", c.message, s, c.state, c.desc)
		}
		if !utf8.ValidString(s.Description) || strings.Contains(s.Description, secret) {
			t.Errorf("description %q: not valid UTF-8, or holds the secret", s.Description)
		}
	}
}

// TestRouteRefusedToCommitStatuses: a refused revision goes to the
// commit-status providers that follow its source, as an applied one does,
// besides the alerts that name the event.
func TestRouteRefusedToCommitStatuses(t *testing.T) {
	t.Parallel()
	d := notify.New(nil, notify.Options{Commits: []string{"gh", "gh-other"},
		Follows: func(provider, source string) bool { return provider == "gh" },
		Alerts:  []notify.Alert{{Providers: []string{"chat"}, Events: []string{store.EventRevisionRefused}}}})
	n := &store.Notice{Event: store.EventRevisionRefused, Source: "infra", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"}
	if got := d.Route(n); !slices.Equal(got, []string{"chat", "gh"}) {
		t.Errorf("Route(RevisionRefused) = %q, want [chat gh]", got)
	}
}

// TestRefusalAppliedSinceNotPosted: a refused revision that the source
// applied since (approved past the prune guard, say) gets no failure when
// its refusal is delivered late: the applied revision's status stands.
func TestRefusalAppliedSinceNotPosted(t *testing.T) {
	t.Parallel()
	const token = "gh-token-77e1b0"
	gh := githubtest.New(t, githubtest.Options{Token: token, Owner: "acme", Repo: "infra"})
	client, err := githubapi.NewClient(gh.BaseURL(), token)
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("ab", 20)
	st := openStore(t)
	if _, err := st.PutSource(t.Context(), &store.Source{Name: "infra", Kind: store.SourceGit, URL: "https://github.com/acme/infra.git",
		Phase: store.SourceReady, LastAppliedRevision: manifest.Revision("main@sha1:" + sha),
		LastAttemptedRevision: manifest.Revision("main@sha1:" + sha)}); err != nil {
		t.Fatal(err)
	}
	p := &notify.CommitStatus{Host: &notify.GitHubStatuses{Client: client}, Store: st}
	n := &store.Notice{ID: 1, Event: store.EventRevisionRefused, Source: "infra", Revision: manifest.Revision("main@sha1:" + sha),
		Message: "PruneLimitExceeded: would delete 3 of 4 resources"}
	if done, _, err := p.Deliver(t.Context(), n, store.Delivery{}); err != nil || !done {
		t.Fatalf("Deliver = %v, %v", done, err)
	}
	if got := gh.Statuses(sha); len(got) != 0 {
		t.Errorf("statuses on a revision applied since: %+v", got)
	}
}
