package commitsig

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestKeyRemovedInPlaceWithOldTime removes a key by rewriting the allowed
// signers file in place with another key of the same size, keeping the
// file's old modification time, as cp -p or tar extraction do: the removed
// key must not verify any more.
func TestKeyRemovedInPlaceWithOldTime(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	removed := l.genSSHKey("removed", "-t", "ed25519")
	kept := l.genSSHKey("kept", "-t", "ed25519")
	commit := l.commitObject(l.commitSSH("by the key about to be removed", removed))

	signers := l.write("allowed_signers", "a@example.com "+removed.pub+"\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(signers, old, old); err != nil {
		t.Fatal(err)
	}
	v, err := New(Config{SSHAllowedSignersFile: signers})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(commit); err != nil {
		t.Fatalf("before the removal: %v", err)
	}

	if err := os.WriteFile(signers, []byte("a@example.com "+kept.pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(signers, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(commit); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("after the removal: %v, want %v", err, ErrUntrusted)
	}
}

// TestOpenPGPTextSignatureRefused signs a commit with a text-mode OpenPGP
// signature (gpg --textmode, or "textmode" in gpg.conf), which covers the
// commit with its line endings made CRLF: a copy whose message ends in
// CRLF verifies too, a new commit hash no one signed. Such signatures are
// refused; git's own (binary) ones verify.
func TestOpenPGPTextSignatureRefused(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	key := l.genPGPKey("Ops", "ops@example.com", "0")
	v, err := New(Config{OpenPGPKeysFile: l.exportPGP("keys.asc", key)})
	if err != nil {
		t.Fatal(err)
	}
	textGPG := l.write("gpg-textmode", "#!/bin/sh\nexec "+l.gpg+" --textmode \"$@\"\n")
	if err := os.Chmod(textGPG, 0o755); err != nil {
		t.Fatal(err)
	}
	text := l.commitPGP("text mode", key, "-c", "gpg.program="+textGPG)
	raw := l.rawCommit(text)
	crlf := l.writeCommit(strings.TrimSuffix(raw, "\n") + "\r\n")
	for _, c := range []string{text, crlf} {
		if _, err := v.Verify(l.commitObject(c)); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "text") {
			t.Errorf("commit %s: %v, want a bad text-mode signature", c[:8], err)
		}
	}
	if _, err := v.Verify(l.commitObject(l.commitPGP("binary", key))); err != nil {
		t.Fatalf("a binary signature: %v", err)
	}
}
