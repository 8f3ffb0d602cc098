package git

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/commitsig"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
)

// reencoded writes a copy of commit c whose signature is the same but
// wrapped at another line length, as anyone may do without the key: the
// copy has a hash of its own and verifies like c. It returns the copy.
func reencoded(t *testing.T, l *signedLab, c string) string {
	t.Helper()
	raw := l.repo.Git("cat-file", "commit", c) + "\n"
	lines := strings.Split(raw, "\n")
	inSignature := false
	for i, line := range lines {
		inSignature = strings.HasPrefix(line, "gpgsig ") || inSignature && strings.HasPrefix(line, " ")
		// The first line of the signature's base64: split it in two.
		if inSignature && len(line) > 10 && !strings.Contains(line, "-----") {
			lines[i] = line[:len(line)/2] + "\n " + line[len(line)/2:]
			break
		}
	}
	copied := strings.Join(lines, "\n")
	if copied == raw {
		t.Fatal("found no signature to re-encode")
	}
	cmd := exec.Command("git", "hash-object", "-t", "commit", "-w", "--stdin")
	cmd.Dir = l.repo.Dir
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(copied)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hash-object: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestRollbackByReencodedSignature force-pushes the branch to a copy of a
// commit older than the one applied, with its signature re-encoded: the
// copy is no ancestor of the applied commit, but it takes the source back
// all the same, so it must be held as a rollback.
func TestRollbackByReencodedSignature(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		openpgp bool
		mode    string
	}{
		{name: "ssh, mode head", mode: VerifyHead},
		{name: "ssh, mode all", mode: VerifyAll},
		{name: "openpgp, mode all", mode: VerifyAll, openpgp: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newSignedLab(t)
			sign := sigtest.SignWithSSH(l.trusted)
			if tc.openpgp {
				pgp := l.keys.OpenPGP("ops")
				sign = sigtest.SignWithOpenPGP(pgp)
				keyring := filepath.Join(t.TempDir(), "keys.asc")
				l.keys.WriteKeyring(keyring, pgp)
				v, err := commitsig.New(commitsig.Config{OpenPGPKeysFile: keyring})
				if err != nil {
					t.Fatal(err)
				}
				l.verifier = v
			}
			commit := func(content string) string {
				l.repo.Write(map[string]string{"a.yaml": content})
				return l.repo.CommitSigned(content, l.keys.Env(), sign...)
			}
			one := commit("a: 1\n")
			two := commit("a: 2\n")
			applied := &appliedRevision{}
			applied.set(two)
			s := newSource(t, l.repo.URL(), func(c *Config) {
				c.Verify = &Verify{Mode: tc.mode, Verifier: l.verifier, Applied: applied.get}
			})
			if snap := fetch(t, s); len(snap.Problems) != 0 || snap.Lineage == nil || snap.Lineage.Rollback != "" {
				t.Fatalf("the applied commit: %v %+v", snap.Problems, snap.Lineage)
			}

			replay := reencoded(t, l, one)
			l.repo.Git("update-ref", "refs/heads/main", replay)
			snap := fetch(t, s)
			if snap.Revision != manifest.Revision("main@sha1:"+replay) || contents(snap)["a.yaml"] != "a: 1\n" {
				t.Fatalf("revision %s, files %v: want the copy of %s", snap.Revision, contents(snap), one[:8])
			}
			if snap.Lineage == nil || !strings.Contains(snap.Lineage.Rollback, one[:12]) {
				t.Fatalf("a copy of %s, older than the applied %s, is not a rollback: lineage %+v, problems %v",
					one[:8], two[:8], snap.Lineage, snap.Problems)
			}
			// A copy of the applied commit itself goes nowhere.
			l.repo.Git("update-ref", "refs/heads/main", reencoded(t, l, two))
			if snap := fetch(t, s); snap.Lineage == nil || snap.Lineage.Rollback != "" || len(snap.Problems) != 0 {
				t.Fatalf("a copy of the applied commit: %+v %v", snap.Lineage, snap.Problems)
			}
		})
	}
}
