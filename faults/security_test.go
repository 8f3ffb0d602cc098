package faults_test

// The security suite: the built agent driven through the ways around its
// trust features that an attacker tries first. Each area has its file, and
// `go test -run TestSecurity ./faults` runs them all:
//
//   - security_signatures_test.go: a force-push back to unsigned or older
//     signed history, approvals, a retired SSH key signing backdated commits;
//   - security_auth_test.go: ID tokens whose claim names a shorthand or a
//     secret token, forged key ids against the issuer, scoped tokens that
//     create over what exists or name another action instance, DNS rebinding;
//   - security_admission_test.go: pruning an orphaned source through the API
//     and the CLI is put to the admission hooks;
//   - security_secrets_test.go: a secret with quotes and HTML metacharacters
//     in every output the agent has;
//   - security_terraform_test.go: a resource moved to another terraform
//     instance, and the agent killed mid-apply with provisioners running.
//
// docs/security.md says what each feature guarantees and what it does not,
// naming these tests as its evidence; the test below keeps it honest.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSecurityDocsNameRealTests fails when docs/security.md names a test
// that no file of the module defines, so that the page's evidence cannot
// silently go stale when a test is renamed or removed.
func TestSecurityDocsNameRealTests(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	prefixes := []string{}
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range defined {
		prefixes = append(prefixes, name)
	}
	named := regexp.MustCompile("`(Test[A-Za-z0-9_]+)(\\*?)`").FindAllStringSubmatch(string(doc), -1)
	if len(named) < 10 {
		t.Fatalf("docs/security.md names %d tests; it should name its evidence", len(named))
	}
	for _, m := range named {
		name, wildcard := m[1], m[2] == "*"
		found := defined[name]
		if wildcard {
			for _, d := range prefixes {
				if strings.HasPrefix(d, name) {
					found = true
					break
				}
			}
		}
		if !found {
			t.Errorf("docs/security.md names %s, which no test file defines", m[0])
		}
	}
}

var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(t \*testing\.T\)`)
