package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The values `make build` stamps come out of `version`, in text and JSON;
// a binary built without them says (devel).
func TestVersionStamped(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "no8s-agent")
	ldflags := "-X main.version=v9.8.7 -X main.commit=0123abcd -X main.buildDate=2026-11-24T10:00:00Z"
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "no8s-agent v9.8.7 (commit 0123abcd, built 2026-11-24T10:00:00Z) go") {
		t.Errorf("version: %q %v", out, err)
	}
	out, err = exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var b buildInfo
	if err := json.Unmarshal(out, &b); err != nil || b.Version != "v9.8.7" || b.Commit != "0123abcd" || b.BuildDate != "2026-11-24T10:00:00Z" || b.Platform == "" {
		t.Errorf("version -o json: %s (%v)", out, err)
	}
	if code, _, errOut := runCLI(t, "version", "-o", "yaml"); code != exitError || !strings.Contains(errOut, "-o must be text or json") {
		t.Errorf("version -o yaml: exit %d, %q", code, errOut)
	}
	if code, out, _ := runCLI(t, "version"); code != 0 || !strings.Contains(out, "(devel)") {
		t.Errorf("unstamped version: %q", out)
	}
}
