package commitsig

import (
	"errors"
	"os"
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
