package sync_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
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
			src := newVerifiedSource(t, st, repo.URL(), mode, verifier)
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

// TestRollbackGuard drives the guard with the lineage a source reports:
// a rollback waits for an approval of that revision, and one whose
// signature does not verify stays refused when approved; a verdict made
// against a revision that is no longer the one applied is not acted on.
func TestRollbackGuard(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := sync.Target{Name: "infra", Kind: store.SourceGit, URL: "https://git.example.com/infra.git", Prune: sync.Prune{Enabled: true}}
	rev := func(c string) manifest.Revision { return manifest.Revision("main@sha1:" + strings.Repeat(c, 40)) }
	snap := func(c string, lin *source.Lineage, widgets ...string) *source.Snapshot {
		files := map[string]string{"types.yaml": widgetType}
		for _, w := range widgets {
			files[w+".yaml"] = widget(w, "{size: 1}")
		}
		sn := snapshot(files)
		sn.Revision, sn.Lineage = rev(c), lin
		return sn
	}
	stored := func() *store.Source {
		t.Helper()
		cur, err := st.GetSource(t.Context(), "infra")
		if err != nil {
			t.Fatal(err)
		}
		return cur
	}
	mustSync(t, s, tg, snap("1", &source.Lineage{}, "a"))
	mustSync(t, s, tg, snap("2", &source.Lineage{Applied: rev("1")}, "a", "b"))

	notSigned := []manifest.Problem{{Message: "signature policy: commit 00000000: not signed"}}
	back := snap("0", &source.Lineage{Applied: rev("2"), Rollback: "commit 000000000000 is an ancestor of 222222222222, the commit last applied",
		Problems: notSigned}, "a")
	back.Problems = notSigned // as the source reports them: the head is always verified
	_, err := s.Sync(t.Context(), tg, back, false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonRollbackRefused ||
		!strings.Contains(err.Error(), "is an ancestor of 222222222222") || !strings.Contains(err.Error(), "commit 00000000: not signed") ||
		!strings.Contains(err.Error(), "An approval would not lift that") {
		t.Fatalf("rollback: %v", err)
	}
	if cur := stored(); cur.Phase != store.SourceStalled || len(cur.Errors) != 1 || cur.Errors[0] != notSigned[0] || cur.LastAppliedRevision != rev("2") {
		t.Fatalf("source after the refusal: %s %v %s", cur.Phase, cur.Errors, cur.LastAppliedRevision)
	}
	if r := get(t, st, "Widget", "b"); r.DeletionRequestedAt != nil {
		t.Fatal("the refused rollback deleted b")
	}
	// An approval says going back is intended, not who made the commit:
	// the unsigned head is still refused, and nothing is deleted.
	if err := s.Approve(t.Context(), "infra", rev("0")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(t.Context(), tg, back, false); err == nil || !strings.Contains(err.Error(), "1 invalid") && !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("approved unsigned rollback: %v", err)
	}
	if r := get(t, st, "Widget", "b"); r.DeletionRequestedAt != nil {
		t.Fatal("the approved but unsigned rollback deleted b")
	}
	if cur := stored(); cur.LastAppliedRevision != rev("2") {
		t.Fatalf("applied %s after an unsigned rollback", cur.LastAppliedRevision)
	}
	// A signed commit going back is refused until approved, then applied.
	back = snap("5", &source.Lineage{Applied: rev("2"), Rollback: "commit 555555555555 is an ancestor of 222222222222, the commit last applied"}, "a")
	if _, err := s.Sync(t.Context(), tg, back, false); !errors.As(err, &serr) || serr.Reason != sync.ReasonRollbackRefused ||
		!strings.Contains(err.Error(), "no8s-agent approve source infra --revision "+string(rev("5"))) {
		t.Fatalf("signed rollback: %v", err)
	}

	// Judged against a revision that is not the one applied: not acted on,
	// and nothing recorded as a refusal.
	stale := snap("3", &source.Lineage{Applied: rev("1")}, "a")
	if _, err := s.Sync(t.Context(), tg, stale, false); err == nil || errors.As(err, &serr) || !strings.Contains(err.Error(), "judged again") {
		t.Fatalf("stale verdict: %v", err)
	}
	if cur := stored(); cur.LastAttemptedRevision != rev("5") || cur.LastAppliedRevision != rev("2") {
		t.Fatalf("the stale snapshot changed the source: %s %s", cur.LastAttemptedRevision, cur.LastAppliedRevision)
	}

	if err := s.Approve(t.Context(), "infra", rev("5")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Sync(t.Context(), tg, back, false)
	if err != nil || res.Revision != rev("5") || len(res.Plan.Deletes) != 1 {
		t.Fatalf("approved rollback: %+v %v", res, err)
	}
	if cur := stored(); cur.ApprovedRevision != rev("5") {
		t.Fatalf("approval %q after its revision was applied", cur.ApprovedRevision)
	}
	mustSync(t, s, tg, snap("4", &source.Lineage{Applied: rev("5")}, "a"))
	if cur := stored(); cur.ApprovedRevision != "" {
		t.Fatalf("approval %q still stands after another revision was applied", cur.ApprovedRevision)
	}
}
