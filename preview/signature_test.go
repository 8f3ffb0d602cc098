package preview_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/source/git/commitsig"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
)

// TestUnsignedPullRequest: a pull request is held to its branch's signature
// policy: an unsigned head fails the preview, the comment names the commit
// and why, and a head signed by a trusted key previews as usual.
func TestUnsignedPullRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	keys := sigtest.New(t)
	alice := keys.SSH("alice")
	signers := filepath.Join(t.TempDir(), "allowed_signers")
	keys.WriteAllowedSigners(signers, alice)
	verifier, err := commitsig.New(commitsig.Config{SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	f.src.Fetch = func(ctx context.Context, n int) (*source.Snapshot, error) {
		s, err := git.New(git.Config{Name: "infra", URL: f.repo.URL(), CacheDir: cache, Ref: git.Ref{PullRequest: n},
			Verify: &git.Verify{Mode: git.VerifyHead, Verifier: verifier,
				Applied: func(context.Context) (manifest.Revision, error) { return "", nil }}})
		if err != nil {
			return nil, err
		}
		return s.Fetch(ctx)
	}
	unsigned := f.push(4, map[string]string{"dbs/a.yaml": db("a", 150)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 4, HeadSHA: unsigned}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if st := lastStatus(t, f.gh, unsigned); st.State != "failure" {
		t.Errorf("unsigned: status %+v", st)
	}
	if c := f.only(4); !strings.Contains(c.Body, "commit "+unsigned[:8]+": not signed") {
		t.Errorf("unsigned: the comment does not say which commit and why:\n%s", c.Body)
	}

	base := f.repo.Head()
	f.repo.Write(map[string]string{"dbs/a.yaml": db("a", 175)})
	signed := f.repo.CommitSigned("signed change", keys.Env(), sigtest.SignWithSSH(alice)...)
	f.repo.Git("reset", "-q", "--hard", base)
	f.repo.SetPullRequest(5, signed)
	f.gh.SetPull(githubtest.Pull{Number: 5, HeadSHA: signed, BaseRef: "main"})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 5, HeadSHA: signed}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if st := lastStatus(t, f.gh, signed); st.State != "success" {
		t.Errorf("signed: status %+v\n%s", st, f.only(5).Body)
	}
}
