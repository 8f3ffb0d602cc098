package release

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// writeChecksums writes to out the SHA-256 of every regular file directly
// in dir (out aside), sorted by name, as sha256sum prints them and
// `sha256sum -c` reads them: the digest, two spaces, the name.
func writeChecksums(dir, out string) error {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == filepath.Base(out) {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("release: %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
