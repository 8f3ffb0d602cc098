package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/no8s/no8s-agent/manifest"
)

// TestValidateEscapesFileNames checks that a file name holding control
// characters cannot forge lines of validate's output: each problem stays
// one line, the name comes out quoted, and JSON output keeps the real name.
func TestValidateEscapesFileNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	names := map[string]string{
		"a\nb.yaml":                        `"a\nb.yaml"`,
		"forged.yaml\nOK: all good\n.yaml": `"forged.yaml\nOK: all good\n.yaml"`,
		"cr\r.yaml":                        `"cr\r.yaml"`,
		"esc\x1b[2J.yaml":                  `"esc\x1b[2J.yaml"`,
		"rtl\u202ElmAy.yaml":               `"rtl\u202elmAy.yaml"`,
		"tab\tname.yaml":                   `"tab\tname.yaml"`,
		"plain name.yaml":                  `plain name.yaml`,
	}
	for name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("kind: [\n"), 0o644); err != nil {
			t.Skipf("the file system refuses %q: %v", name, err)
		}
	}
	code, out, errOut := runCLI(t, "validate", dir)
	if code != 1 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if strings.IndexFunc(out, func(r rune) bool { return r != '\n' && (unicode.IsControl(r) || r == '\u202e') }) >= 0 {
		t.Errorf("stdout holds raw control characters: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(names) {
		t.Fatalf("%d lines for %d problems:\n%s", len(lines), len(names), out)
	}
	prefix := filepath.ToSlash(dir) + "/"
	for name, want := range names {
		printed := `"` + prefix + strings.TrimPrefix(want, `"`)
		if !strings.HasPrefix(want, `"`) {
			printed = prefix + want
		}
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, printed+":") {
				found = true
			}
		}
		if !found {
			t.Errorf("no line for %q starting with %s in\n%s", name, printed, out)
		}
	}

	// JSON output carries the name as it is, escaped by JSON.
	_, jsonOut, _ := runCLI(t, "validate", "-o", "json", dir)
	var problems []manifest.Problem
	if err := json.Unmarshal([]byte(jsonOut), &problems); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range problems {
		got[strings.TrimPrefix(p.File, prefix)] = true
	}
	for name := range names {
		if !got[name] {
			t.Errorf("JSON output lacks %q: %v", name, got)
		}
	}
}
