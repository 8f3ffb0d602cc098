package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source"
)

// newSource builds a source over url with its own cache folder.
func newSource(t *testing.T, url string, edit func(*Config)) *Source {
	t.Helper()
	cfg := Config{Name: "test", URL: url, CacheDir: filepath.Join(t.TempDir(), "cache"), Timeout: 20 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func fetch(t *testing.T, s *Source) *source.Snapshot {
	t.Helper()
	snap, err := s.Fetch(context.Background())
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return snap
}

// contents maps each snapshot file to its content.
func contents(snap *source.Snapshot) map[string]string {
	m := make(map[string]string, len(snap.Files))
	for _, f := range snap.Files {
		m[f.Path] = string(f.Data)
	}
	return m
}

func assertContents(t *testing.T, snap *source.Snapshot, want map[string]string) {
	t.Helper()
	got := contents(snap)
	if len(got) != len(want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("file %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

// dirDigest digests every path, mode and content under dir, to show that
// nothing in it changed.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := p + " " + info.Mode().String()
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
