// Package tofutest finds the OpenTofu binary that tests of the terraform
// action run: the one NO8S_TOFU names, or the one `make tofu` built into the
// repository's .tools folder. Tests fail, not skip, without one.
package tofutest

import (
	"os"
	"path/filepath"
	"testing"
)

// Binary returns the absolute path of the OpenTofu binary for tests, or
// fails t saying how to get one.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("NO8S_TOFU"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("NO8S_TOFU=%s: %v (run `make tofu`, which builds OpenTofu from its Go module)", p, err)
		}
		return abs
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			matches, _ := filepath.Glob(filepath.Join(dir, ".tools", "tofu-*", "tofu"))
			if len(matches) > 0 {
				return matches[len(matches)-1]
			}
			break
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	t.Fatal("no OpenTofu binary for the terraform action's tests: run `make tofu` (it builds OpenTofu from its Go module into .tools; `make test` does it) or set NO8S_TOFU to a tofu or terraform binary")
	return ""
}
