package git

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/cache"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git/commitsig"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

// signedLab is a repository with a trusted SSH key, an untrusted one, and
// the verifier that trusts the first.
type signedLab struct {
	repo     *gittest.Repo
	keys     *sigtest.Keys
	trusted  sigtest.SSHKey
	stranger sigtest.SSHKey
	verifier *commitsig.Verifier
}

func newSignedLab(t *testing.T) *signedLab {
	t.Helper()
	keys := sigtest.New(t)
	l := &signedLab{repo: gittest.NewRepo(t), keys: keys, trusted: keys.SSH("ops"), stranger: keys.SSH("stranger")}
	signers := filepath.Join(t.TempDir(), "allowed_signers")
	keys.WriteAllowedSigners(signers, l.trusted)
	v, err := commitsig.New(commitsig.Config{SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}
	l.verifier = v
	return l
}

// signed commits files signed by key and returns the commit.
func (l *signedLab) signed(files map[string]string, msg string, key sigtest.SSHKey) string {
	l.repo.Write(files)
	return l.repo.CommitSigned(msg, l.keys.Env(), sigtest.SignWithSSH(key)...)
}

// unsigned commits files without a signature and returns the commit.
func (l *signedLab) unsigned(files map[string]string, msg string) string {
	l.repo.Write(files)
	return l.repo.Commit(msg)
}

// appliedRevision stands for the store: the revision last applied, which
// the test sets.
type appliedRevision struct {
	mu  sync.Mutex
	rev manifest.Revision
}

func (a *appliedRevision) set(commit string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rev = manifest.Revision("main@sha1:" + commit)
}

func (a *appliedRevision) get(context.Context) (manifest.Revision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rev, nil
}

// signatureProblems are the snapshot's problems from the signature policy.
func signatureProblems(snap *source.Snapshot) []string {
	var out []string
	for _, p := range snap.Problems {
		if strings.HasPrefix(p.Message, "signature policy: ") {
			out = append(out, p.Message)
		}
	}
	return out
}

// TestVerifyAllChecksAncestorHead applies a signed commit on top of an
// unsigned one made before the policy, then force-pushes the branch back
// to the unsigned commit: in mode all, the head must be checked even though
// no commit lies between it and the applied one.
func TestVerifyAllChecksAncestorHead(t *testing.T) {
	t.Parallel()
	l := newSignedLab(t)
	old := l.unsigned(map[string]string{"a.yaml": "a: 1\n"}, "before the policy")
	newer := l.signed(map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"}, "signed", l.trusted)
	applied := &appliedRevision{}
	// Rollbacks allowed: the head is checked like any other.
	s := newSource(t, l.repo.URL(), func(c *Config) {
		c.Verify = &Verify{Mode: VerifyAll, Rollback: RollbackAllow, Verifier: l.verifier, Applied: applied.get}
	})
	if snap := fetch(t, s); len(signatureProblems(snap)) != 0 {
		t.Fatalf("signed head refused: %v", snap.Problems)
	}
	applied.set(newer)

	l.repo.Git("reset", "-q", "--hard", old)
	snap := fetch(t, s)
	if snap.Revision != manifest.Revision("main@sha1:"+old) {
		t.Fatalf("revision %s, want the old commit", snap.Revision)
	}
	got := signatureProblems(snap)
	if len(got) != 1 || !strings.Contains(got[0], "commit "+old[:8]+": not signed") || snap.Lineage == nil || snap.Lineage.Rollback != "" {
		t.Fatalf("the unsigned head was not refused: problems %v, lineage %+v", snap.Problems, snap.Lineage)
	}
}

// lineageCase is a history a branch is force-pushed through, and what the
// source must say of the head against the commit last applied.
type lineageCase struct {
	name     string
	mode     string
	rollback string
	engine   engine
	// transport is "file" (the default) or "http".
	transport string
	// history makes the commits, leaves main at the one applied, and
	// returns it and the head main is then force-pushed to.
	history func(l *signedLab) (applied, head string)
	// fresh makes the source see the remote for the first time at the
	// head: its clone never held the applied commit.
	fresh bool
	// wantRollback is in the rollback's message; "" for no rollback.
	wantRollback []string
	// wantWith are in the problems that go with the rollback, and
	// wantProblems in the snapshot's own.
	wantWith, wantProblems []string
}

func signedLine(l *signedLab) (zero, one, two string) {
	zero = l.signed(map[string]string{"a.yaml": "a: 0\n"}, "zero", l.trusted)
	one = l.signed(map[string]string{"a.yaml": "a: 1\n"}, "one", l.trusted)
	two = l.signed(map[string]string{"a.yaml": "a: 2\n"}, "two", l.trusted)
	return zero, one, two
}

// rewrite makes a new root commit on a branch of its own, signed by key
// or not (nil), and returns it; main stays where it is.
func rewrite(l *signedLab, key *sigtest.SSHKey) string {
	l.repo.Git("checkout", "-q", "--orphan", "rewrite")
	l.repo.Git("rm", "-rqf", ".")
	var c string
	if key != nil {
		c = l.signed(map[string]string{"b.yaml": "b: 1\n"}, "rewritten", *key)
	} else {
		c = l.unsigned(map[string]string{"b.yaml": "b: 1\n"}, "rewritten")
	}
	l.repo.Git("checkout", "-q", "-f", "main")
	return c
}

// TestVerifyLineage force-pushes signed branches back and forth and checks
// what the source says of each head: an ancestor of the applied commit is a
// rollback (its signature problems go with it), new and rewritten history
// are checked as usual, and what the clone cannot tell is a rollback too.
func TestVerifyLineage(t *testing.T) {
	t.Parallel()
	ancestor := []string{"is an ancestor of", "the commit last applied"}
	signedAncestor := func(l *signedLab) (string, string) {
		_, one, two := signedLine(l)
		return two, one
	}
	unsignedAncestor := func(l *signedLab) (string, string) {
		pre := l.unsigned(map[string]string{"a.yaml": "a: 0\n"}, "before the policy")
		one := l.signed(map[string]string{"a.yaml": "a: 1\n"}, "one", l.trusted)
		return one, pre
	}
	tests := []lineageCase{
		{name: "signed ancestor, mode head", mode: VerifyHead, history: signedAncestor, wantRollback: ancestor},
		{name: "signed ancestor, mode all", mode: VerifyAll, history: signedAncestor, wantRollback: ancestor},
		{name: "signed ancestor, go-git", mode: VerifyHead, engine: engineGoGit, history: signedAncestor, wantRollback: ancestor},
		{name: "signed ancestor, over http", mode: VerifyAll, transport: "http", history: signedAncestor, wantRollback: ancestor},
		{name: "unsigned ancestor, mode head", mode: VerifyHead, history: unsignedAncestor, wantRollback: ancestor, wantWith: []string{"not signed"}},
		{name: "unsigned ancestor, mode all", mode: VerifyAll, history: unsignedAncestor, wantRollback: ancestor, wantWith: []string{"not signed"}},
		{name: "rollbacks allowed, signed ancestor", mode: VerifyAll, rollback: RollbackAllow, history: signedAncestor},
		{name: "rollbacks allowed, unsigned ancestor", mode: VerifyHead, rollback: RollbackAllow, history: unsignedAncestor,
			wantProblems: []string{"not signed"}},
		{name: "new history", mode: VerifyHead, history: func(l *signedLab) (string, string) {
			_, one, two := signedLine(l)
			l.repo.Git("reset", "-q", "--hard", one)
			return one, two
		}},
		{name: "new history over an unsigned commit, mode all", mode: VerifyAll, history: func(l *signedLab) (string, string) {
			one := l.signed(map[string]string{"a.yaml": "a: 1\n"}, "one", l.trusted)
			l.unsigned(map[string]string{"a.yaml": "a: 2\n"}, "unsigned")
			three := l.signed(map[string]string{"a.yaml": "a: 3\n"}, "three", l.trusted)
			l.repo.Git("reset", "-q", "--hard", one)
			return one, three
		}, wantProblems: []string{"not signed"}},
		{name: "rewritten history, signed, mode head", mode: VerifyHead, history: func(l *signedLab) (string, string) {
			_, _, two := signedLine(l)
			return two, rewrite(l, &l.trusted)
		}},
		{name: "rewritten history, signed, mode all", mode: VerifyAll, history: func(l *signedLab) (string, string) {
			_, _, two := signedLine(l)
			return two, rewrite(l, &l.trusted)
		}},
		{name: "rewritten history, unsigned", mode: VerifyHead, history: func(l *signedLab) (string, string) {
			_, _, two := signedLine(l)
			return two, rewrite(l, nil)
		}, wantProblems: []string{"not signed"}},
		{name: "rewritten history, untrusted key, mode all", mode: VerifyAll, history: func(l *signedLab) (string, string) {
			_, _, two := signedLine(l)
			return two, rewrite(l, &l.stranger)
		}, wantProblems: []string{"which is not trusted"}},
		// The applied commit is on no branch of the remote any more and the
		// clone never held it: it is fetched by its hash.
		{name: "fresh clone", mode: VerifyHead, fresh: true, history: signedAncestor, wantRollback: ancestor},
		{name: "fresh clone, over http", mode: VerifyAll, transport: "http", fresh: true, history: unsignedAncestor,
			wantRollback: ancestor, wantWith: []string{"not signed"}},
		// go-git's protocol cannot ask for a commit no ref names.
		{name: "fresh clone, go-git", mode: VerifyHead, engine: engineGoGit, fresh: true, history: signedAncestor,
			wantRollback: []string{"cannot tell whether", "is an ancestor of", "the remote would not send it"}},
		{name: "applied commit gone from the remote", mode: VerifyHead, fresh: true, history: func(l *signedLab) (string, string) {
			_, one, _ := signedLine(l)
			return strings.Repeat("5", 40), one
		}, wantRollback: []string{"cannot tell whether", "555555555555, the commit last applied", "the remote would not send it"}},
		{name: "fresh clone, new history", mode: VerifyAll, fresh: true, history: func(l *signedLab) (string, string) {
			_, one, two := signedLine(l)
			l.repo.Git("reset", "-q", "--hard", one)
			return one, two
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newSignedLab(t)
			appliedCommit, head := tc.history(l)
			url, auth := l.repo.URL(), Auth{}
			if tc.transport == "http" {
				url, auth, _ = serveRepo(t, l.repo, "http")
			}
			applied := &appliedRevision{}
			s := newEngineSource(t, url, tc.engine, func(c *Config) {
				c.Auth = auth
				c.Verify = &Verify{Mode: tc.mode, Rollback: tc.rollback, Verifier: l.verifier, Applied: applied.get}
			})
			if !tc.fresh {
				if snap := fetch(t, s); len(snap.Problems) != 0 || snap.Revision != manifest.Revision("main@sha1:"+appliedCommit) {
					t.Fatalf("the applied commit's snapshot: %s %v", snap.Revision, snap.Problems)
				}
			}
			applied.set(appliedCommit)
			l.repo.Git("reset", "-q", "--hard", head)
			snap := fetch(t, s)
			if snap.Revision != manifest.Revision("main@sha1:"+head) {
				t.Fatalf("revision %s, want the head %s", snap.Revision, head)
			}
			checkLineage(t, tc, snap, appliedCommit)
			// The head unchanged: the same verdict, from what was kept.
			checkLineage(t, tc, fetch(t, s), appliedCommit)
		})
	}
}

func checkLineage(t *testing.T, tc lineageCase, snap *source.Snapshot, appliedCommit string) {
	t.Helper()
	lin := snap.Lineage
	if tc.mode == VerifyHead && tc.rollback == RollbackAllow {
		// Nothing of the verdict depends on the applied revision.
		if lin != nil {
			t.Fatalf("lineage %+v, want none", lin)
		}
		checkProblems(t, "of the snapshot", snap.Problems, tc.wantProblems)
		return
	}
	if lin == nil || lin.Applied != manifest.Revision("main@sha1:"+appliedCommit) {
		t.Fatalf("lineage %+v, want one judged against %s", lin, appliedCommit)
	}
	if (lin.Rollback != "") != (tc.wantRollback != nil) {
		t.Fatalf("rollback %q, want one: %v", lin.Rollback, tc.wantRollback != nil)
	}
	for _, w := range tc.wantRollback {
		if !strings.Contains(lin.Rollback, w) {
			t.Errorf("rollback %q does not say %q", lin.Rollback, w)
		}
	}
	checkProblems(t, "with the rollback", lin.Problems, tc.wantWith)
	// The head is always verified: what is wrong with a rollback's
	// signature refuses the snapshot too, whether or not it is approved.
	checkProblems(t, "of the snapshot", snap.Problems, append(append([]string(nil), tc.wantProblems...), tc.wantWith...))
}

func checkProblems(t *testing.T, what string, got []manifest.Problem, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("problems %s: %v, want %q", what, got, want)
	}
	for i, w := range want {
		if !strings.Contains(got[i].Message, w) || !strings.HasPrefix(got[i].Message, "signature policy: ") {
			t.Errorf("problem %s %q does not say %q", what, got[i].Message, w)
		}
	}
}

// TestRollbackJudgedAgainWhenAppliedMoves keeps the head where it is while
// the revision applied moves: the verdict kept for the unchanged head must
// follow, or an approved rollback would stay a rollback, and a head judged
// against an older applied commit would go back unseen.
func TestRollbackJudgedAgainWhenAppliedMoves(t *testing.T) {
	t.Parallel()
	l := newSignedLab(t)
	_, one, two := signedLine(l)
	applied := &appliedRevision{}
	applied.set(two)
	l.repo.Git("reset", "-q", "--hard", one)
	s := newSource(t, l.repo.URL(), func(c *Config) {
		c.Verify = &Verify{Mode: VerifyHead, Verifier: l.verifier, Applied: applied.get}
	})
	if snap := fetch(t, s); snap.Lineage == nil || snap.Lineage.Rollback == "" {
		t.Fatalf("not a rollback: %+v", snap.Lineage)
	}
	// The rollback is approved and applied: the head is what is applied.
	applied.set(one)
	if snap := fetch(t, s); snap.Lineage == nil || snap.Lineage.Rollback != "" || snap.Lineage.Applied != manifest.Revision("main@sha1:"+one) {
		t.Fatalf("after the head was applied: %+v", snap.Lineage)
	}
	// Another agent applies two, which the unchanged head goes back from.
	applied.set(two)
	if snap := fetch(t, s); snap.Lineage == nil || !strings.Contains(snap.Lineage.Rollback, "is an ancestor of") {
		t.Fatalf("after two was applied elsewhere: %+v", snap.Lineage)
	}
}

// TestRollbackFromShallowClone gives a source with a signature policy the
// shallow clone another source left, which holds the head and nothing of
// the history between it and the commit last applied: the clone is
// deepened, and the rollback told.
func TestRollbackFromShallowClone(t *testing.T) {
	t.Parallel()
	l := newSignedLab(t)
	_, one, two := signedLine(l)
	l.repo.Git("reset", "-q", "--hard", one)
	plain := newSource(t, l.repo.URL(), nil)
	fetch(t, plain)
	if shallow, err := plain.storage(cache.NewObjectLRUDefault()).Shallow(); err != nil || len(shallow) == 0 {
		t.Fatalf("the first clone is not shallow: %v %v", shallow, err)
	}
	applied := &appliedRevision{}
	applied.set(two)
	s := newSource(t, l.repo.URL(), func(c *Config) {
		c.CacheDir = plain.cfg.CacheDir
		c.Verify = &Verify{Mode: VerifyHead, Verifier: l.verifier, Applied: applied.get}
	})
	snap := fetch(t, s)
	if snap.Lineage == nil || !strings.Contains(snap.Lineage.Rollback, "is an ancestor of "+two[:12]) {
		t.Fatalf("lineage %+v, want a rollback from %s", snap.Lineage, two[:8])
	}
}

// TestVerifyRollbackSetting refuses what is neither refuse nor allow.
func TestVerifyRollbackSetting(t *testing.T) {
	t.Parallel()
	l := newSignedLab(t)
	_, err := New(Config{Name: "x", URL: l.repo.URL(), CacheDir: t.TempDir(),
		Verify: &Verify{Verifier: l.verifier, Rollback: "sometimes"}})
	if err == nil || !strings.Contains(err.Error(), `rollback "sometimes" is not refuse or allow`) {
		t.Fatalf("New: %v", err)
	}
	s := newSource(t, l.repo.URL(), func(c *Config) { c.Verify = &Verify{Verifier: l.verifier} })
	if s.cfg.Verify.Rollback != RollbackRefuse || s.cfg.Verify.Mode != VerifyHead {
		t.Fatalf("defaults: %+v", s.cfg.Verify)
	}
}
