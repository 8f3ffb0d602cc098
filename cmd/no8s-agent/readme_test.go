package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's commands, read from the README itself, so that the newcomer
// test runs what a newcomer types.

const goRunAgent = "go run ./cmd/no8s-agent "

// readmeCommands returns the lines of the README's fenced shell blocks,
// comments and blank lines left out, with any indentation removed.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inShell := false
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !inShell && trimmed == "```sh":
			inShell = true
		case inShell && trimmed == "```":
			inShell = false
		case inShell && trimmed != "" && !strings.HasPrefix(trimmed, "#"):
			if cmd, _, _ := strings.Cut(trimmed, " #"); cmd != "" {
				out = append(out, strings.TrimSpace(cmd))
			}
		}
	}
	return out
}

// readmeAgentArgs returns the arguments of the README's first command that
// runs the agent with verb (after `go run ./cmd/no8s-agent`).
func readmeAgentArgs(t *testing.T, verb string) []string {
	t.Helper()
	for _, c := range readmeCommands(t) {
		if rest, ok := strings.CutPrefix(c, goRunAgent); ok && strings.HasPrefix(rest, verb+" ") {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("the README has no %q%s command", goRunAgent, verb)
	return nil
}

var perlEditRE = regexp.MustCompile(`^perl -pi -e 's/([^/]+)/([^/]+)/' (\S+)$`)

// readmeEdit returns the tour's edit of a manifest: the file, and the text
// replaced and its replacement.
func readmeEdit(t *testing.T) (file, from, to string) {
	t.Helper()
	for _, c := range readmeCommands(t) {
		if m := perlEditRE.FindStringSubmatch(c); m != nil {
			return m[3], m[1], m[2]
		}
	}
	t.Fatal("the README's tour edits no manifest with perl -pi -e 's/.../.../' FILE")
	return "", "", ""
}

// TestReadmeTwoCommands: the README's two commands are the agent on the
// example configuration and `make test`, a target the Makefile has.
func TestReadmeTwoCommands(t *testing.T) {
	t.Parallel()
	cmds := readmeCommands(t)
	if len(cmds) < 2 || !strings.HasPrefix(cmds[0], goRunAgent+"run ") || cmds[1] != "make test" {
		t.Fatalf("the README's first commands are %q, want the agent's run and make test", cmds)
	}
	args := readmeAgentArgs(t, "run")
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			if _, err := os.Stat(filepath.Join("..", "..", args[i+1])); err != nil {
				t.Errorf("the README runs the agent on %s: %v", args[i+1], err)
			}
		}
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^test:`).Match(makefile) {
		t.Error("the Makefile has no test target")
	}
}

// checkReadmeGet runs the tour's `get resources` with the built binary in
// dir and checks that it lists the example's resources as ready.
func checkReadmeGet(t *testing.T, bin, dir string) {
	t.Helper()
	args := readmeAgentArgs(t, "get")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, name := range []string{"production-pg", "staging-pg", "prod-vpc", "db-production"} {
		if !regexp.MustCompile(`(?m)^\S+\s+` + name + `\s+True\s+ready\s`).Match(out) {
			t.Errorf("%s does not show %s ready:\n%s", strings.Join(args, " "), name, out)
		}
	}
}
