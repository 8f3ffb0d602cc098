package sync_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git"
	"github.com/no8s/no8s-agent/source/git/commitsig"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestRollbackNeedsApproval force-pushes a signed branch back to older
// commits, signed and not: a signature proves who made a commit, not that
// it is the newest, so going back is refused until that very revision is
// approved, the approval lets no other revision through, and it is not
// replayed once the source has moved on.
func TestRollbackNeedsApproval(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{git.VerifyHead, git.VerifyAll} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			keys := sigtest.New(t)
			ops := keys.SSH("ops")
			signers := filepath.Join(t.TempDir(), "allowed_signers")
			keys.WriteAllowedSigners(signers, ops)
			verifier, err := commitsig.New(commitsig.Config{SSHAllowedSignersFile: signers})
			if err != nil {
				t.Fatal(err)
			}
			repo := gittest.NewRepo(t)
			signed := func(files map[string]string, msg string) string {
				repo.Write(files)
				return repo.CommitSigned(msg, keys.Env(), sigtest.SignWithSSH(ops)...)
			}
			st, _ := newStore(t)
			src, err := git.New(git.Config{Name: "infra", URL: repo.URL(), Ref: git.Ref{Branch: "main"},
				CacheDir: filepath.Join(t.TempDir(), "cache"), Timeout: 20 * time.Second,
				Verify: &git.Verify{Mode: mode, Verifier: verifier, Applied: func(ctx context.Context) (manifest.Revision, error) {
					s, err := st.GetSource(ctx, "infra")
					if errors.Is(err, store.ErrNotFound) {
						return "", nil
					}
					if err != nil {
						return "", err
					}
					return s.LastAppliedRevision, nil
				}}})
			if err != nil {
				t.Fatal(err)
			}
			tg := sync.Target{Name: "infra", Kind: store.SourceGit, URL: repo.URL(), Prune: sync.Prune{Enabled: true}}
			s := sync.New(st, nil)
			syncHead := func() (*sync.Result, error) {
				t.Helper()
				snap, err := src.Fetch(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return s.Sync(t.Context(), tg, snap, false)
			}
			rev := func(commit string) manifest.Revision { return manifest.Revision("main@sha1:" + commit) }
			appliedAt := func(commit string) {
				t.Helper()
				if res, err := syncHead(); err != nil || res.Revision != rev(commit) {
					t.Fatalf("want %s applied: %+v %v", commit[:8], res, err)
				}
			}
			refused := func(commit string) {
				t.Helper()
				_, err := syncHead()
				var serr *sync.Error
				if !errors.As(err, &serr) || serr.Reason != "RollbackRefused" || !strings.Contains(err.Error(), string(rev(commit))) {
					t.Fatalf("want the rollback to %s refused with RollbackRefused, got %v", commit[:8], err)
				}
				cur, err := st.GetSource(t.Context(), "infra")
				if err != nil {
					t.Fatal(err)
				}
				if cur.Phase != store.SourceStalled || cur.LastAttemptedRevision != rev(commit) {
					t.Fatalf("source is %s on %s, want stalled on %s: %s", cur.Phase, cur.LastAttemptedRevision, commit[:8], cur.Message)
				}
			}
			alive := func(name string) {
				t.Helper()
				if r := get(t, st, "Widget", name); r.DeletionRequestedAt != nil {
					t.Fatalf("%s is being deleted", name)
				}
			}

			zero := signed(map[string]string{"types.yaml": widgetType}, "the type")
			appliedAt(zero)
			first := signed(map[string]string{"a.yaml": widget("a", "{size: 1}")}, "a")
			appliedAt(first)
			second := signed(map[string]string{"b.yaml": widget("b", "{size: 1}")}, "a and b")
			appliedAt(second)

			// Back to the first commit: signed by a trusted key, and refused.
			repo.Git("reset", "-q", "--hard", first)
			refused(first)
			alive("b")
			if _, err := syncHead(); err != nil {
				t.Fatalf("judged again with nothing changed: %v", err)
			}
			alive("b")

			// Only the stalled revision can be approved.
			var serr *sync.Error
			if err := s.Approve(t.Context(), "infra", rev(second)); !errors.As(err, &serr) || serr.Reason != sync.ReasonNotApprovable {
				t.Fatalf("approving another revision: %v", err)
			}
			if err := s.Approve(t.Context(), "infra", rev(first)); err != nil {
				t.Fatal(err)
			}
			// The approval of the first commit does not let an older one through.
			repo.Git("reset", "-q", "--hard", zero)
			refused(zero)
			alive("a")
			alive("b")
			// The approved one goes through, exactly as it is.
			repo.Git("reset", "-q", "--hard", first)
			appliedAt(first)
			alive("a")
			if r := get(t, st, "Widget", "b"); r.DeletionRequestedAt == nil {
				t.Fatal("the approved rollback did not delete b")
			}

			// Forward again, then back again: the old approval is not replayed.
			third := signed(map[string]string{"c.yaml": widget("c", "{size: 1}")}, "a and c")
			appliedAt(third)
			repo.Git("reset", "-q", "--hard", first)
			refused(first)
			alive("c")
		})
	}
}
