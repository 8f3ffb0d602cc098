package commitsig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVerify signs commits with gpg, ssh-keygen and git, and checks each
// verdict; for SSH signatures it also checks that git verify-commit, given
// the same allowed signers file, agrees.
func TestVerify(t *testing.T) {
	t.Parallel()
	l := newLab(t)

	alice := l.addSigningSubkey(l.genPGPKey("Alice", "alice@example.com", "0"))
	mallory := l.genPGPKey("Mallory", "mallory@example.com", "0")
	// Made, and used, in January 2020 by a gpg told that is the date, and
	// expired since February 2020.
	old := l.genPGPKey("Old", "old@example.com", "2020-02-01", "--faked-system-time", "20200101T000000")
	gone := l.genPGPKey("Gone", "gone@example.com", "0")

	edKey := l.genSSHKey("ed25519", "-t", "ed25519")
	ecKey := l.genSSHKey("ecdsa", "-t", "ecdsa", "-b", "256")
	rsaKey := l.genSSHKey("rsa", "-t", "rsa", "-b", "2048")
	strangerKey := l.genSSHKey("stranger", "-t", "ed25519")
	fileKey := l.genSSHKey("files-only", "-t", "ed25519")
	expiredKey := l.genSSHKey("expired", "-t", "ed25519")
	futureKey := l.genSSHKey("future", "-t", "ed25519")

	pastGPG := l.write("gpg-in-2020", "#!/bin/sh\nexec "+l.gpg+" --faked-system-time 20200115T000000 \"$@\"\n")
	if err := os.Chmod(pastGPG, 0o755); err != nil {
		t.Fatal(err)
	}

	pgpGood := l.commitPGP("trusted openpgp", alice)
	pgpUntrusted := l.commitPGP("untrusted openpgp", mallory)
	pgpExpired := l.commitPGP("expired openpgp", old, "-c", "gpg.program="+pastGPG)
	pgpRevoked := l.commitPGP("revoked openpgp", gone)
	sshEd := l.commitSSH("trusted ed25519", edKey)
	sshEC := l.commitSSH("trusted ecdsa", ecKey)
	sshRSA := l.commitSSH("trusted rsa", rsaKey)
	sshUntrusted := l.commitSSH("untrusted ssh", strangerKey)
	sshFileNS := l.commitSSH("files-only ssh", fileKey)
	sshExpired := l.commitSSH("expired ssh", expiredKey)
	sshFuture := l.commitSSH("not yet valid ssh", futureKey)
	unsigned := l.commit("unsigned", false)

	// The same message changed after signing, signature kept.
	pgpTampered := l.writeCommit(strings.Replace(l.rawCommit(pgpGood), "trusted openpgp", "tampered openpgp", 1))
	sshTampered := l.writeCommit(strings.Replace(l.rawCommit(sshEd), "trusted ed25519", "tampered ed25519", 1))

	// Signatures made by ssh-keygen directly and put in by hand: one in the
	// git namespace, which shows the hand-made commit is sound, and one in
	// the namespace for files.
	byHand := strings.Replace(l.rawCommit(unsigned), "unsigned", "signed by hand", 1)
	sshByHand := l.writeCommit(withSignature(byHand, l.run(stdin(byHand), l.sshKeygen, "-Y", "sign", "-n", "git", "-f", edKey.path)))
	forFiles := strings.Replace(l.rawCommit(unsigned), "unsigned", "signed for files", 1)
	sshWrongNS := l.writeCommit(withSignature(forFiles, l.run(stdin(forFiles), l.sshKeygen, "-Y", "sign", "-n", "file", "-f", edKey.path)))

	l.revoke(gone)
	keys := l.exportPGP("trusted.asc", alice, old, gone)
	signers := l.write("allowed_signers", strings.Join([]string{
		"# Trusted commit signers",
		"",
		"alice@example.com " + edKey.pub + " alice's laptop",
		// The first line naming the ecdsa key does not allow git; the
		// second does, and wins.
		`ci@example.com namespaces="file" ` + ecKey.pub,
		`*@example.com namespaces="git",valid-after="20240101Z",valid-before="29991231235959Z" ` + ecKey.pub,
		`carol@example.com NAMESPACES="g*" ` + rsaKey.pub,
		`files@example.com namespaces="file" ` + fileKey.pub,
		`old@example.com valid-before="20240101Z" ` + expiredKey.pub,
		`new@example.com valid-after="20250101Z" ` + futureKey.pub,
		"",
	}, "\n"))

	v, err := New(Config{OpenPGPKeysFile: keys, SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		commit string
		want   *Signer
		// For a failure: its class, key, and the whole message, or a
		// fragment of it when it holds more than fits here.
		wantErr    error
		wantKey    string
		wantMsg    string
		wantInMsg  string
		checkByGit bool
	}{
		{
			name: "trusted openpgp key signing with its subkey", commit: pgpGood,
			want: &Signer{Kind: KindOpenPGP, Fingerprint: alice.fpr, KeyID: alice.keyID, Identity: "Alice <alice@example.com>"},
		},
		{
			name: "trusted ed25519 key", commit: sshEd, checkByGit: true,
			want: &Signer{Kind: KindSSH, Fingerprint: edKey.fp, Identity: "alice@example.com"},
		},
		{
			name: "trusted ecdsa key within its validity", commit: sshEC, checkByGit: true,
			want: &Signer{Kind: KindSSH, Fingerprint: ecKey.fp, Identity: "*@example.com"},
		},
		{
			name: "trusted rsa key with a namespace pattern", commit: sshRSA, checkByGit: true,
			want: &Signer{Kind: KindSSH, Fingerprint: rsaKey.fp, Identity: "carol@example.com"},
		},
		{
			name: "ssh signature put in by hand", commit: sshByHand, checkByGit: true,
			want: &Signer{Kind: KindSSH, Fingerprint: edKey.fp, Identity: "alice@example.com"},
		},
		{
			name: "unsigned", commit: unsigned, checkByGit: true,
			wantErr: ErrNotSigned, wantMsg: "commit " + unsigned[:8] + ": not signed",
		},
		{
			name: "untrusted openpgp key", commit: pgpUntrusted,
			wantErr: ErrUntrusted, wantKey: mallory.fpr,
			wantMsg: "commit " + pgpUntrusted[:8] + ": signed by " + mallory.fpr + " which is not trusted",
		},
		{
			name: "expired openpgp key", commit: pgpExpired,
			wantErr: ErrUntrusted, wantKey: old.fpr,
			wantMsg: "commit " + pgpExpired[:8] + ": signed by " + old.fpr + " which has expired",
		},
		{
			name: "revoked openpgp key", commit: pgpRevoked,
			wantErr: ErrUntrusted, wantKey: gone.fpr,
			wantMsg: "commit " + pgpRevoked[:8] + ": signed by " + gone.fpr + " which is revoked",
		},
		{
			name: "untrusted ssh key", commit: sshUntrusted, checkByGit: true,
			wantErr: ErrUntrusted, wantKey: strangerKey.fp,
			wantMsg: "commit " + sshUntrusted[:8] + ": signed by " + strangerKey.fp + " which is not trusted",
		},
		{
			name: "ssh key for files only", commit: sshFileNS, checkByGit: true,
			wantErr: ErrUntrusted, wantKey: fileKey.fp,
			wantInMsg: "signed by " + fileKey.fp + " which is not trusted for this commit (" + signers + `:7: namespaces="file" excludes "git")`,
		},
		{
			name: "ssh key valid before the commit", commit: sshExpired, checkByGit: true,
			wantErr: ErrUntrusted, wantKey: expiredKey.fp,
			wantInMsg: signers + ":8: valid before 2024-01-01T00:00:00Z, committed 2024-06-01T12:00:00Z",
		},
		{
			name: "ssh key valid after the commit", commit: sshFuture, checkByGit: true,
			wantErr: ErrUntrusted, wantKey: futureKey.fp,
			wantInMsg: signers + ":9: valid after 2025-01-01T00:00:00Z, committed 2024-06-01T12:00:00Z",
		},
		{
			name: "openpgp signed commit altered after signing", commit: pgpTampered,
			wantErr: ErrBadSignature, wantKey: alice.signFpr,
			wantInMsg: "commit " + pgpTampered[:8] + ": bad signature by key " + alice.signFpr + ": ",
		},
		{
			name: "ssh signed commit altered after signing", commit: sshTampered, checkByGit: true,
			wantErr: ErrBadSignature, wantKey: edKey.fp,
			wantInMsg: "commit " + sshTampered[:8] + ": bad signature by key " + edKey.fp + ": ",
		},
		{
			name: "ssh signature for another namespace", commit: sshWrongNS, checkByGit: true,
			wantErr: ErrBadSignature, wantKey: edKey.fp,
			wantMsg: "commit " + sshWrongNS[:8] + ": bad signature by key " + edKey.fp + `: made for namespace "file", not "git"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := v.Verify(l.commitObject(tc.commit))
			if tc.checkByGit {
				gitSays := l.gitVerifies(tc.commit, signers)
				if gitSays != (err == nil) {
					t.Errorf("git verify-commit says verified=%v, Verify says %v", gitSays, err)
				}
			}
			if tc.want != nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if *got != *tc.want {
					t.Errorf("Verify = %+v, want %+v", *got, *tc.want)
				}
				return
			}
			var ue *UnverifiedError
			if !errors.As(err, &ue) {
				t.Fatalf("Verify = %+v, %v; want an *UnverifiedError", got, err)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v is not %v", err, tc.wantErr)
			}
			if ue.Commit != tc.commit {
				t.Errorf("Commit = %q, want %q", ue.Commit, tc.commit)
			}
			if ue.Key != tc.wantKey {
				t.Errorf("Key = %q, want %q", ue.Key, tc.wantKey)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Errorf("error = %q\nwant    %q", err, tc.wantMsg)
			}
			if !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("error = %q\nwant it to hold %q", err, tc.wantInMsg)
			}
		})
	}

	// A format without its key file configured is not trusted by default.
	notConfigured := []struct {
		name, commit, want string
		cfg                Config
	}{
		{"openpgp", pgpGood, "signed with OpenPGP but no openpgpKeysFile is configured", Config{SSHAllowedSignersFile: signers}},
		{"ssh", sshEd, "signed with SSH but no sshAllowedSignersFile is configured", Config{OpenPGPKeysFile: keys}},
	}
	for _, tc := range notConfigured {
		t.Run("no key file for "+tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(l.commitObject(tc.commit))
			if !errors.Is(err, ErrNotConfigured) {
				t.Fatalf("Verify: %v; want ErrNotConfigured", err)
			}
			if want := "commit " + tc.commit[:8] + ": " + tc.want; err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		})
	}
}

// gitVerifies reports whether git verify-commit accepts an SSH-signed
// commit against the allowed signers file.
func (l *lab) gitVerifies(commit, allowedSigners string) bool {
	l.t.Helper()
	cmd := exec.Command(l.git, "-c", "gpg.ssh.allowedSignersFile="+allowedSigners, "verify-commit", commit)
	cmd.Env, cmd.Dir = l.env, l.repo
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		l.t.Fatalf("git verify-commit: %v\n%s", err, out)
	}
	return err == nil
}

// TestVerifyRotatesKeys edits the key files under a running Verifier and
// checks that each edit takes effect on the next Verify.
func TestVerifyRotatesKeys(t *testing.T) {
	t.Parallel()
	l := newLab(t)

	first := l.genPGPKey("First", "first@example.com", "0")
	second := l.genPGPKey("Second", "second@example.com", "0")
	// ed25519 public key lines all have the same length, so that a and b
	// lines of the same principal length make files of the same size.
	a := l.genSSHKey("a", "-t", "ed25519")
	b := l.genSSHKey("b", "-t", "ed25519")
	pgpCommit := l.commitPGP("by second", second)
	sshCommit := l.commitSSH("by b", b)

	firstOnly := l.run("", l.gpg, "--export", "--armor", first.fpr)
	secondOnly := l.run("", l.gpg, "--export", "--armor", second.fpr)
	keys := l.write("keys.asc", firstOnly)
	signers := l.write("allowed_signers", "a@example.com "+a.pub+"\n")

	v, err := New(Config{OpenPGPKeysFile: keys, SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}

	// replace swaps the file for a new one, as editors and config
	// management tools that write atomically do.
	replace := func(t *testing.T, path, text string) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	// overwrite rewrites the file in place, and keeps its modification
	// time when asked, to show that a same-size rewrite within one clock
	// tick is not missed.
	overwrite := func(t *testing.T, path, text string, keepMtime bool) {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if keepMtime {
			if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
	}

	type step struct {
		name    string
		edit    func(t *testing.T)
		wantErr error // nil: verifies
		// wantLine, for a *FileError, is the line it names.
		wantLine int
	}
	kinds := []struct {
		name   string
		commit string
		steps  []step
	}{
		{
			name: "openpgp", commit: pgpCommit,
			steps: []step{
				{name: "signing key not in the file", wantErr: ErrUntrusted},
				{name: "signing key added", edit: func(t *testing.T) { replace(t, keys, firstOnly+secondOnly) }},
				{name: "old key dropped", edit: func(t *testing.T) { overwrite(t, keys, secondOnly, false) }},
				{name: "file broken", edit: func(t *testing.T) { replace(t, keys, secondOnly+"\nnot a key\n") }, wantLine: strings.Count(secondOnly, "\n") + 2},
				{name: "file mended", edit: func(t *testing.T) { replace(t, keys, secondOnly) }},
				{name: "signing key removed", edit: func(t *testing.T) { replace(t, keys, firstOnly) }, wantErr: ErrUntrusted},
			},
		},
		{
			name: "ssh", commit: sshCommit,
			steps: []step{
				{name: "signing key not in the file", wantErr: ErrUntrusted},
				{name: "signing key added", edit: func(t *testing.T) {
					overwrite(t, signers, "a@example.com "+a.pub+"\nb@example.com "+b.pub+"\n", false)
				}},
				{name: "signing key removed", edit: func(t *testing.T) {
					replace(t, signers, "a@example.com "+a.pub+"\n")
				}, wantErr: ErrUntrusted},
				{name: "same size and time, other key", edit: func(t *testing.T) {
					overwrite(t, signers, "b@example.com "+b.pub+"\n", true)
				}},
				{name: "file broken", edit: func(t *testing.T) {
					replace(t, signers, "# signers\nb@example.com "+b.pub+"\nb@example.com namespaces=git "+b.pub+"\n")
				}, wantLine: 3},
				{name: "file removed", edit: func(t *testing.T) {
					if err := os.Remove(signers); err != nil {
						t.Fatal(err)
					}
				}, wantErr: fs.ErrNotExist},
				{name: "file back", edit: func(t *testing.T) {
					replace(t, signers, "b@example.com "+b.pub+"\n")
				}},
			},
		},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			c := l.commitObject(k.commit)
			for _, s := range k.steps {
				if s.edit != nil {
					s.edit(t)
				}
				_, err := v.Verify(c)
				var fe *FileError
				switch {
				case s.wantLine > 0:
					if !errors.As(err, &fe) || fe.Line != s.wantLine {
						t.Fatalf("%s: Verify: %v; want a *FileError at line %d", s.name, err, s.wantLine)
					}
				case s.wantErr == nil:
					if err != nil {
						t.Fatalf("%s: Verify: %v", s.name, err)
					}
				case !errors.Is(err, s.wantErr):
					t.Fatalf("%s: Verify: %v; want %v", s.name, err, s.wantErr)
				}
			}
		})
	}
}

// TestNewRefusesMalformedFiles checks that a key file ssh-keygen or gpg
// would not read is refused, naming the file and line.
func TestNewRefusesMalformedFiles(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	key := l.genSSHKey("key", "-t", "ed25519")
	pgp := l.run("", l.gpg, "--export", "--armor", l.genPGPKey("Some One", "someone@example.com", "0").fpr)
	good := "someone@example.com " + key.pub

	// Flip one base64 character in the middle of the key block so that its
	// checksum no longer holds.
	pgpLines := strings.Split(pgp, "\n")
	mid := len(pgpLines) / 2
	flipped := []byte(pgpLines[mid])
	if flipped[5] == 'A' {
		flipped[5] = 'B'
	} else {
		flipped[5] = 'A'
	}
	pgpLines[mid] = string(flipped)
	corrupt := strings.Join(pgpLines, "\n")

	tests := []struct {
		name      string
		openpgp   bool
		text      string
		wantLine  int
		wantInMsg string
	}{
		{name: "principals only", text: good + "\n\nsomeone@example.com\n", wantLine: 3, wantInMsg: "expected principals, options and a key"},
		{name: "bad base64", text: "# c\nx@example.com ssh-ed25519 AAAA!!!!\n", wantLine: 2, wantInMsg: "invalid base64"},
		{name: "key type mismatch", text: "x@example.com ssh-rsa " + strings.Fields(key.pub)[1] + "\n", wantLine: 1, wantInMsg: `key type "ssh-rsa" does not match`},
		{name: "unquoted namespaces", text: good + "\nx@example.com namespaces=git " + key.pub + "\n", wantLine: 2, wantInMsg: "must be double-quoted"},
		{name: "unsupported option", text: "x@example.com no-touch-required " + key.pub + "\n", wantLine: 1, wantInMsg: `unsupported option "no-touch-required"`},
		{name: "cert-authority", text: "*@example.com cert-authority " + key.pub + "\n", wantLine: 1, wantInMsg: "cert-authority lines are not supported"},
		{name: "bad time", text: `x@example.com valid-after="2024-01-01" ` + key.pub + "\n", wantLine: 1, wantInMsg: "is not YYYYMMDD"},
		{name: "window closed", text: `x@example.com valid-after="20240101",valid-before="20230101" ` + key.pub + "\n", wantLine: 1, wantInMsg: "is not after"},
		{name: "trailing comma", text: `x@example.com namespaces="git", ` + key.pub + "\n", wantLine: 1, wantInMsg: "end with a comma"},
		{name: "unclosed quote", text: `x@example.com namespaces="git ` + key.pub + "\n", wantLine: 1, wantInMsg: "no closing quote"},
		{name: "no key after options", text: `x@example.com namespaces="git"` + "\n", wantLine: 1, wantInMsg: "missing key"},
		{name: "openpgp text outside a block", openpgp: true, text: pgp + "\nhello\n", wantLine: strings.Count(pgp, "\n") + 2, wantInMsg: "expected -----BEGIN PGP PUBLIC KEY BLOCK-----"},
		{name: "openpgp unterminated block", openpgp: true, text: "# keys\n" + strings.Replace(pgp, "-----END PGP PUBLIC KEY BLOCK-----", "", 1), wantLine: 2, wantInMsg: "has no -----END PGP PUBLIC KEY BLOCK----- line"},
		{name: "openpgp corrupt block", openpgp: true, text: "\n" + corrupt, wantLine: 2, wantInMsg: "public key block: "},
		{name: "openpgp private key", openpgp: true, text: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n", wantLine: 1, wantInMsg: "expected -----BEGIN PGP PUBLIC KEY BLOCK-----"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := l.write(fmt.Sprintf("malformed-%d", i), tc.text)
			cfg := Config{SSHAllowedSignersFile: path}
			if tc.openpgp {
				cfg = Config{OpenPGPKeysFile: path}
			}
			_, err := New(cfg)
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("New: %v; want a *FileError", err)
			}
			if fe.Path != path || fe.Line != tc.wantLine {
				t.Errorf("error names %s:%d, want %s:%d", fe.Path, fe.Line, path, tc.wantLine)
			}
			if prefix := fmt.Sprintf("%s:%d: ", path, tc.wantLine); !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			if !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("error %q does not hold %q", err, tc.wantInMsg)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name        string
		cfg         Config
		wantCheck   bool // Check fails
		wantMissing bool // New fails for a missing file
	}{
		{name: "nothing set", cfg: Config{}, wantCheck: true},
		{name: "openpgp file missing", cfg: Config{OpenPGPKeysFile: missing}, wantMissing: true},
		{name: "ssh file missing", cfg: Config{SSHAllowedSignersFile: missing}, wantMissing: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.cfg.Check(); (err != nil) != tc.wantCheck {
				t.Errorf("Check() = %v, want failure %v", err, tc.wantCheck)
			}
			_, err := New(tc.cfg)
			if err == nil {
				t.Fatal("New succeeded")
			}
			var fe *FileError
			if tc.wantMissing && (!errors.Is(err, fs.ErrNotExist) || !errors.As(err, &fe) || fe.Path != missing) {
				t.Errorf("New: %v; want a *FileError for %s that is fs.ErrNotExist", err, missing)
			}
		})
	}
}

func TestMatchPatternList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s, list string
		want    int
	}{
		{"git", "git", 1},
		{"git", "file", 0},
		{"git", "file,git", 1},
		{"git", "g*", 1},
		{"git", "g?t", 1},
		{"git", "g??t", 0},
		{"git", "*", 1},
		{"git", "!git,*", -1},
		{"git", "*,!g*", -1},
		{"git", "!file", 0},
		{"git", "Git", 0},
		{"alice@example.com", "*@example.com", 1},
		{"aXbXc", "a*b*c", 1},
		{"abc", "a*b*c*d", 0},
	}
	for _, tc := range tests {
		t.Run(tc.s+" in "+tc.list, func(t *testing.T) {
			t.Parallel()
			if got := matchPatternList(tc.s, tc.list); got != tc.want {
				t.Errorf("matchPatternList(%q, %q) = %d, want %d", tc.s, tc.list, got, tc.want)
			}
		})
	}
}

func TestParseSSHTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "20240102Z", want: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)},
		{in: "202401021304UTC", want: time.Date(2024, 1, 2, 13, 4, 0, 0, time.UTC)},
		{in: "20240102130405z", want: time.Date(2024, 1, 2, 13, 4, 5, 0, time.UTC)},
		{in: "20240102", want: time.Date(2024, 1, 2, 0, 0, 0, 0, time.Local)},
		{in: "2024010", wantErr: true},
		{in: "20241301Z", wantErr: true},
		{in: "Z", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseSSHTime(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseSSHTime(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && !got.Equal(tc.want) {
				t.Errorf("parseSSHTime(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
