// Package sigtest makes real signing keys for tests of commit signature
// verification: OpenPGP keys with gpg, in a GnuPG home of the test's own,
// and SSH keys with ssh-keygen, with the files that trust them and the git
// options that sign with them. A missing tool fails the test: skipping
// would let a run pass without checking anything.
package sigtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Keys is a test's scratch keyring.
type Keys struct {
	t         testing.TB
	dir       string
	gnupg     string
	gpg       string
	sshKeygen string
	n         int
}

// PGPKey is an OpenPGP key gpg made.
type PGPKey struct {
	// Fingerprint is the primary key's, upper-case hex.
	Fingerprint string
	// Email is its user id's address.
	Email string
}

// SSHKey is an SSH key pair ssh-keygen made.
type SSHKey struct {
	// Path is the private key file.
	Path string
	// Public is the public key line, "ssh-ed25519 AAAA...".
	Public string
	// Fingerprint is "SHA256:..." as ssh-keygen -l prints it.
	Fingerprint string
}

func tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed by this test and was not found: install it (Debian: apt-get install %s): %v", name, pkg, err)
	}
	return p
}

// New makes an empty keyring; its gpg agent stops with the test.
func New(t testing.TB) *Keys {
	t.Helper()
	k := &Keys{t: t, dir: t.TempDir(), gpg: tool(t, "gpg", "gpg"), sshKeygen: tool(t, "ssh-keygen", "openssh-client")}
	tool(t, "gpg-agent", "gpg-agent")
	gpgconf := tool(t, "gpgconf", "gpgconf")
	k.gnupg = filepath.Join(k.dir, "gnupg")
	if err := os.Mkdir(k.gnupg, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd := exec.Command(gpgconf, "--kill", "all")
		cmd.Env = k.Env()
		_ = cmd.Run()
	})
	return k
}

// Env is what a git process needs to sign with these keys.
func (k *Keys) Env() []string {
	return []string{"GNUPGHOME=" + k.gnupg, "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
}

func (k *Keys) run(stdin, name string, args ...string) string {
	k.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(k.Env(), "HOME="+k.dir)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		k.t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// OpenPGP makes an unprotected ed25519 OpenPGP key.
func (k *Keys) OpenPGP(name string) PGPKey {
	k.t.Helper()
	email := strings.ToLower(name) + "@example.com"
	params := fmt.Sprintf("%%no-protection\nKey-Type: eddsa\nKey-Curve: ed25519\nKey-Usage: sign,cert\nName-Real: %s\nName-Email: %s\nExpire-Date: 0\n%%commit\n", name, email)
	out := k.run(params, k.gpg, "--batch", "--status-fd", "1", "--gen-key")
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "KEY_CREATED" {
			return PGPKey{Fingerprint: f[3], Email: email}
		}
	}
	k.t.Fatalf("gpg --gen-key printed no KEY_CREATED:\n%s", out)
	return PGPKey{}
}

// SSH makes an unprotected ed25519 SSH key.
func (k *Keys) SSH(name string) SSHKey {
	k.t.Helper()
	p := filepath.Join(k.dir, "ssh-"+name)
	k.run("", k.sshKeygen, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p)
	pub, err := os.ReadFile(p + ".pub")
	if err != nil {
		k.t.Fatal(err)
	}
	f := strings.Fields(k.run("", k.sshKeygen, "-l", "-f", p+".pub"))
	fields := strings.Fields(string(pub))
	return SSHKey{Path: p, Public: fields[0] + " " + fields[1], Fingerprint: f[1]}
}

// WriteKeyring writes the armored public keys to path, replacing it.
func (k *Keys) WriteKeyring(path string, keys ...PGPKey) {
	k.t.Helper()
	args := []string{"--batch", "--armor", "--export"}
	for _, key := range keys {
		args = append(args, key.Fingerprint)
	}
	out := ""
	if len(keys) > 0 {
		out = k.run("", k.gpg, args...)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// WriteAllowedSigners writes an allowed-signers file trusting keys for git
// signatures, replacing path.
func (k *Keys) WriteAllowedSigners(path string, keys ...SSHKey) {
	k.t.Helper()
	var b strings.Builder
	for i, key := range keys {
		fmt.Fprintf(&b, "signer%d@example.com namespaces=\"git\" %s\n", i, key.Public)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// SignWithOpenPGP are the git options (before the subcommand) of a commit
// signed with key.
func SignWithOpenPGP(key PGPKey) []string {
	return []string{"-c", "gpg.format=openpgp", "-c", "user.signingkey=" + key.Fingerprint}
}

// SignWithSSH are the git options (before the subcommand) of a commit
// signed with key.
func SignWithSSH(key SSHKey) []string {
	return []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + key.Path}
}
