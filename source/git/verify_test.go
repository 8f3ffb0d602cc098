package git

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
	s := newSource(t, l.repo.URL(), func(c *Config) {
		c.Verify = &Verify{Mode: VerifyAll, Verifier: l.verifier, Applied: applied.get}
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
	if len(got) != 1 || !strings.Contains(got[0], "commit "+old[:8]+": not signed") {
		t.Fatalf("the unsigned head was not refused: problems %v", snap.Problems)
	}
}
