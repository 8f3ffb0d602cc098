package commitsig

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// commitDate is when every test commit is authored and committed, so that
// the allowed signers' validity windows can be placed around it.
const commitDate = "2024-06-01T12:00:00+0000"

// lab is a scratch world of real tools: a GnuPG home, SSH keys and a git
// repository, none of which reads the user's configuration.
type lab struct {
	t                   *testing.T
	dir, gnupg, repo    string
	git, gpg, sshKeygen string
	env                 []string
}

// tool finds a binary the tests cannot do without. A missing one fails the
// test: skipping would let CI pass without checking anything.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed by these tests and was not found: install it (Debian: apt-get install %s): %v", name, pkg, err)
	}
	return p
}

func newLab(t *testing.T) *lab {
	t.Helper()
	dir := t.TempDir()
	l := &lab{
		t:         t,
		dir:       dir,
		gnupg:     filepath.Join(dir, "gnupg"),
		repo:      filepath.Join(dir, "repo"),
		git:       tool(t, "git", "git"),
		gpg:       tool(t, "gpg", "gpg"),
		sshKeygen: tool(t, "ssh-keygen", "openssh-client"),
	}
	gpgconf := tool(t, "gpgconf", "gpgconf")
	tool(t, "gpg-agent", "gpg-agent")
	if err := os.Mkdir(l.gnupg, 0o700); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// A minimal environment: nothing of the user's git or gpg configuration,
	// agent or identity leaks in.
	l.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GNUPGHOME=" + l.gnupg,
		"LC_ALL=C",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Alice",
		"GIT_AUTHOR_EMAIL=alice@example.com",
		"GIT_COMMITTER_NAME=Alice",
		"GIT_COMMITTER_EMAIL=alice@example.com",
		"GIT_AUTHOR_DATE=" + commitDate,
		"GIT_COMMITTER_DATE=" + commitDate,
	}
	// gpg starts an agent on first use of a secret key; stop it with the test.
	t.Cleanup(func() {
		cmd := exec.Command(gpgconf, "--kill", "all")
		cmd.Env = l.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("gpgconf --kill all: %v\n%s", err, out)
		}
	})
	l.run(stdin(""), l.git, "init", "-q", "-b", "main", l.repo)
	return l
}

type stdin string

// run runs a command in the repository (or the lab when there is none
// yet) and returns its standard output; failure fails the test.
func (l *lab) run(in stdin, name string, args ...string) string {
	l.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = l.env
	cmd.Dir = l.dir
	if _, err := os.Stat(l.repo); err == nil {
		cmd.Dir = l.repo
	}
	cmd.Stdin = strings.NewReader(string(in))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		l.t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// pgpKey is an OpenPGP key made by gpg.
type pgpKey struct {
	fpr     string // primary key fingerprint
	signFpr string // the key gpg signs with: the newest signing subkey, else the primary
	keyID   string // signFpr's key ID
	uid     string
}

// genPGPKey makes an unprotected ed25519 key. extra gpg options come
// before the command, e.g. --faked-system-time to make a key in the past.
func (l *lab) genPGPKey(name, email, expire string, extra ...string) pgpKey {
	l.t.Helper()
	params := fmt.Sprintf("%%no-protection\nKey-Type: eddsa\nKey-Curve: ed25519\nKey-Usage: sign,cert\nName-Real: %s\nName-Email: %s\nExpire-Date: %s\n%%commit\n", name, email, expire)
	args := append(append([]string{}, extra...), "--batch", "--status-fd", "1", "--gen-key")
	out := l.run(stdin(params), l.gpg, args...)
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "KEY_CREATED" {
			return pgpKey{fpr: f[3], signFpr: f[3], keyID: f[3][len(f[3])-16:], uid: fmt.Sprintf("%s <%s>", name, email)}
		}
	}
	l.t.Fatalf("gpg --gen-key printed no KEY_CREATED:\n%s", out)
	return pgpKey{}
}

// addSigningSubkey gives k a signing subkey, which gpg then signs with.
func (l *lab) addSigningSubkey(k pgpKey) pgpKey {
	l.t.Helper()
	out := l.run("", l.gpg, "--batch", "--status-fd", "1", "--passphrase", "", "--pinentry-mode", "loopback", "--quick-add-key", k.fpr, "ed25519", "sign", "never")
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "KEY_CREATED" && f[2] == "S" {
			k.signFpr, k.keyID = f[3], f[3][len(f[3])-16:]
			return k
		}
	}
	l.t.Fatalf("gpg --quick-add-key printed no KEY_CREATED:\n%s", out)
	return k
}

// revoke imports the revocation certificate gpg stored when it made k.
func (l *lab) revoke(k pgpKey) {
	l.t.Helper()
	rev, err := os.ReadFile(filepath.Join(l.gnupg, "openpgp-revocs.d", k.fpr+".rev"))
	if err != nil {
		l.t.Fatal(err)
	}
	// gpg puts a colon before the armor so the file is not imported by
	// accident.
	cert := strings.Replace(string(rev), ":-----BEGIN PGP PUBLIC KEY BLOCK-----", "-----BEGIN PGP PUBLIC KEY BLOCK-----", 1)
	l.run(stdin(cert), l.gpg, "--batch", "--import")
}

// exportPGP writes the armored public keys to a file in the lab.
func (l *lab) exportPGP(name string, keys ...pgpKey) string {
	l.t.Helper()
	var text strings.Builder
	for _, k := range keys {
		text.WriteString(l.run("", l.gpg, "--export", "--armor", k.fpr))
	}
	return l.write(name, text.String())
}

// sshKey is an SSH key pair made by ssh-keygen.
type sshKey struct {
	path string // private key; path+".pub" is the public key
	pub  string // "keytype base64"
	fp   string // SHA256 fingerprint as ssh-keygen -l prints it
}

func (l *lab) genSSHKey(name string, typeArgs ...string) sshKey {
	l.t.Helper()
	path := filepath.Join(l.dir, name)
	args := append([]string{"-q", "-N", "", "-C", name, "-f", path}, typeArgs...)
	l.run("", l.sshKeygen, args...)
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		l.t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	fp := strings.Fields(l.run("", l.sshKeygen, "-l", "-E", "sha256", "-f", path+".pub"))
	return sshKey{path: path, pub: f[0] + " " + f[1], fp: fp[1]}
}

// write writes a file in the lab and returns its path.
func (l *lab) write(name, text string) string {
	l.t.Helper()
	path := filepath.Join(l.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// commit makes an empty commit with git and returns its hash. gitArgs
// come before "commit" (e.g. -c gpg.format=ssh), and sign says whether to
// sign it.
func (l *lab) commit(msg string, sign bool, gitArgs ...string) string {
	l.t.Helper()
	s := "--no-gpg-sign"
	if sign {
		s = "-S"
	}
	args := append(append([]string{}, gitArgs...), "commit", "-q", "--allow-empty", s, "-m", msg)
	l.run("", l.git, args...)
	return strings.TrimSpace(l.run("", l.git, "rev-parse", "HEAD"))
}

func (l *lab) commitPGP(msg string, k pgpKey, gitArgs ...string) string {
	l.t.Helper()
	return l.commit(msg, true, append([]string{"-c", "user.signingkey=" + k.fpr}, gitArgs...)...)
}

func (l *lab) commitSSH(msg string, k sshKey) string {
	l.t.Helper()
	return l.commit(msg, true, "-c", "gpg.format=ssh", "-c", "user.signingkey="+k.path)
}

// rawCommit is the commit object as git stores it.
func (l *lab) rawCommit(hash string) string {
	l.t.Helper()
	return l.run("", l.git, "cat-file", "commit", hash)
}

// writeCommit stores a raw commit object as it is, whatever its signature
// says, and returns its hash.
func (l *lab) writeCommit(raw string) string {
	l.t.Helper()
	return strings.TrimSpace(l.run(stdin(raw), l.git, "hash-object", "-t", "commit", "-w", "--stdin"))
}

// withSignature puts an armored signature into a raw unsigned commit's
// gpgsig header, continuation lines indented by one space as git does.
func withSignature(raw, sig string) string {
	headers, msg, _ := strings.Cut(raw, "\n\n")
	header := "gpgsig " + strings.ReplaceAll(strings.TrimSuffix(sig, "\n"), "\n", "\n ")
	return headers + "\n" + header + "\n\n" + msg
}

// commitObject opens the repository with go-git and reads a commit.
func (l *lab) commitObject(hash string) *object.Commit {
	l.t.Helper()
	repo, err := git.PlainOpen(l.repo)
	if err != nil {
		l.t.Fatal(err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		l.t.Fatalf("commit %s: %v", hash, err)
	}
	return c
}
