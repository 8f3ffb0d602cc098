//go:build unix

package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.yaml", "a: 1\n")
	write("empty.yaml", "")
	write("big.yaml", strings.Repeat("x", 100))
	write("target.yaml", "b: 2\n")
	if err := os.Symlink("target.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	d, err := root.Open(".")
	if err != nil {
		t.Fatal(err)
	}
	// Cleanup, not defer: the parallel subtests run after this returns.
	t.Cleanup(func() { d.Close() })
	tests := []struct {
		name, file, data, msg string
	}{
		{"a file", "ok.yaml", "a: 1\n", ""},
		{"an empty file", "empty.yaml", "", ""},
		{"over the limit", "big.yaml", "", "file is 100 bytes, over the limit of 50 bytes (maxFileSize)"},
		{"a file that became a link", "link.yaml", "", "cannot read: it became a symlink while the tree was read"},
		{"a fifo does not block", "fifo.yaml", "", "cannot read: not a regular file"},
		{"a folder", "sub.yaml", "", "cannot read: not a regular file"},
		{"gone", "missing.yaml", "", "cannot read: no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data, msg, ok := readIn(d, tc.file, sizeLimit{50, DefaultSizeSetting})
			if !ok || string(data) != tc.data || msg != tc.msg {
				t.Errorf("readIn(%s) = %q, %q, %v; want %q, %q", tc.file, data, msg, ok, tc.data, tc.msg)
			}
		})
	}
}
