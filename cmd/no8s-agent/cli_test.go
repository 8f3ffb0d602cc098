package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// The command line's own contract, without an agent: help on stdout, a
// typo answered with a suggestion, shell completion, the version.
func TestCLIHelpSuggestionsCompletionVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		args            []string
		code            int
		stdout, stderr  string
		notOut, notErrs string
	}{
		{"root help", []string{"--help"}, 0, "Acting on a running agent", "", "", "unknown"},
		{"no command", nil, 1, "Usage:", "", "", ""},
		{"verb help", []string{"sync", "source", "--help"}, 0, "--wait", "", "", "Usage"},
		{"legacy help on stdout", []string{"get", "--help"}, 0, "-o wide", "", "", "Usage"},
		{"legacy single-dash help", []string{"diff", "-help"}, 0, "--base", "", "", "Usage"},
		{"typo", []string{"gte", "resources"}, 1, "", "Did you mean this?\n\tget", "", ""},
		{"verb typo", []string{"reconcil"}, 1, "", "Did you mean this?\n\treconcile", "", ""},
		{"object typo", []string{"reconcile", "resourse", "a/b"}, 1, "", "Did you mean this?\n\tresource", "", ""},
		{"bash completion", []string{"completion", "bash"}, 0, "__start_no8s-agent", "", "", ""},
		{"zsh completion", []string{"completion", "zsh"}, 0, "#compdef no8s-agent", "", "", ""},
		{"complete commands", []string{"__complete", "re"}, 0, "reconcile", "", "run", ""},
		{"complete get objects", []string{"__complete", "get", ""}, 0, "resources\nsources", "", "", ""},
		{"complete legacy flags", []string{"__complete", "get", "-"}, 0, "--database\ta postgres:// URL", "", "", ""},
		{"complete legacy short flag", []string{"__complete", "get", "-"}, 0, "\n-o\toutput format", "", "", ""},
		{"complete run flags", []string{"__complete", "run", "--"}, 0, "--listen\t", "", "", ""},
		{"complete version output", []string{"__complete", "version", "-o", ""}, 0, "json", "", "", ""},
		{"version json", []string{"version", "-o", "json"}, 0, `"goVersion": "go`, "", "", ""},
		{"version single-dash long flag", []string{"version", "-output", "json"}, 0, `"goVersion": "go`, "", "", ""},
		{"version bad output", []string{"version", "-o", "xml"}, 1, "", `-o must be text or json`, "", ""},
		{"version argument", []string{"version", "extra"}, 1, "", "unknown command", "", ""},
		{"reconcile bad ref", []string{"reconcile", "resource", "nameonly", "--server", "127.0.0.1:1"}, 1, "", "want KIND/NAME", "", ""},
		{"reconcile two refs", []string{"reconcile", "resource", "a/b", "c/d"}, 1, "", "accepts 1 arg", "", ""},
		{"sync unreachable", []string{"sync", "source", "x", "--server", "http://127.0.0.1:1"}, 1, "", "connection refused", "", ""},
		{"server not http", []string{"describe", "source", "x", "--server", "ftp://x"}, 1, "", "want an http or https URL", "", ""},
		{"get history name", []string{"get", "history", "x"}, 1, "", "history takes no NAME", "", ""},
		{"get watch types", []string{"get", "rt", "-w"}, 1, "", "-w watches resources or sources", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) ||
				(tt.notOut != "" && strings.Contains(out, tt.notOut)) || (tt.notErrs != "" && strings.Contains(errOut, tt.notErrs)) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
		})
	}
	// The JSON carries what the text does.
	_, out, _ := runCLI(t, "version", "-o", "json")
	var b buildInfo
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.Version == "" || b.Platform == "" {
		t.Errorf("version -o json: %v\n%s", err, out)
	}
}

// A job type whose exec action fails for the resource of size 13.
const (
	cliJobType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Job}
spec:
  action: jobs
  versions:
    - name: v1
      schema: {type: object, properties: {size: {type: integer}}}
`
	cliJobs = `apiVersion: no8s.io/v1
kind: Job
metadata: {name: good}
spec: {size: 1}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: bad}
dependsOn: [{kind: Job, name: good}]
spec: {size: 13}
`
	cliScript = `#!/bin/sh
input=$(cat)
case "$input" in
*'"size":13'*) echo "size 13 is unlucky" >&2; exit 1 ;;
esac
echo '{"done":true}'
`
)

// TestCLIAgainstRunningAgent drives every verb against a running agent:
// exit codes, --wait outcomes both ways, describe, get and its watch.
func TestCLIAgainstRunningAgent(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"types.yaml": cliJobType, "jobs.yaml": cliJobs} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte(cliScript), 0o755); err != nil {
		t.Fatal(err)
	}
	tokenEnv := setSecret(t, "cli-write-token")
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - {name: local, dir: %q}
actions:
  jobs:
    plugin: exec
    config: {command: [%q], timeout: 1m}
api: {writeTokenEnv: %s}
`, repo, script, tokenEnv)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", cfgPath)
	base := agent.addr()
	waitFor(t, 60*time.Second, agent, "good ready and bad failed", func() (bool, string) {
		rs := listResources(t, st)
		phases := map[string]manifest.Phase{}
		for _, r := range rs {
			phases[r.Name] = r.Phase
		}
		return phases["good"] == manifest.PhaseReady && phases["bad"] == manifest.PhaseFailed, describe(rs)
	})
	// A configuration naming the agent's address: the default --server.
	listenCfg := filepath.Join(dir, "listen.yaml")
	if err := os.WriteFile(listenCfg, []byte("listen: "+strings.TrimPrefix(base, "http://")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := []string{"--server", base, "--token-env", tokenEnv}
	with := func(args ...string) []string { return append(args, srv...) }

	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"get short name", []string{"get", "res", "--database", url}, 0, "KIND", ""},
		{"get columns", []string{"get", "resources", "--database", url}, 0, "READY", ""},
		{"get one by name", []string{"get", "resources", "good", "--database", url, "-o", "name"}, 0, "Job/good\n", ""},
		{"get kind any case", []string{"get", "res", "--kind", "JOB", "--database", url, "-o", "name"}, 0, "Job/bad\nJob/good\n", ""},
		{"get nothing found", []string{"get", "res", "--kind", "Nothing", "--database", url}, 0, "", "No resources found"},
		{"get name not found", []string{"get", "src", "nope", "--database", url}, 1, "", `Error from store (NotFound): sources "nope" not found`},
		{"get wide", []string{"get", "res", "bad", "-o", "wide", "--database", url}, 0, "size 13 is unlucky", ""},
		{"get sources single dash", []string{"get", "src", "-database", url, "-o", "name"}, 0, "source/local\n", ""},
		{"get types short", []string{"get", "rt", "--database", url, "-o", "name"}, 0, "resourcetype/Job/v1\n", ""},
		{"sync without token", []string{"sync", "source", "local", "--server", base, "--token-env", "NO8S_TEST_UNSET_VARIABLE"}, 1, "", "401"},
		{"sync", with("sync", "source", "local"), 0, "source/local: sync requested", ""},
		{"sync wait", with("sync", "src", "local", "--wait"), 0, "source/local: ready at", ""},
		{"sync single-dash flags", []string{"sync", "source", "local", "-wait", "-server", base, "-token-env=" + tokenEnv}, 0, "source/local: ready at", ""},
		{"sync unknown source", with("sync", "source", "nope"), 1, "", "404"},
		{"approve not stalled", with("approve", "source", "local"), 1, "", "not stalled"},
		{"approve bad revision", with("approve", "source", "local", "--revision", "has space"), 1, "", "is not a revision"},
		{"reconcile", with("reconcile", "resource", "Job/good"), 0, "Job/good: reconcile requested", ""},
		{"reconcile wait ok", with("reconcile", "res", "job/good", "--wait"), 0, "Job/good: generation 1 reconciled", ""},
		{"reconcile wait failed", with("reconcile", "resource", "Job/bad", "--wait"), 1, "failed: ", ""},
		{"reconcile missing", with("reconcile", "resource", "Job/nope"), 1, "", "not found"},
		{"reconcile wait timeout", with("reconcile", "resource", "Job/good", "--wait", "--timeout", "1ms"), 1, "", "within 1ms"},
		{"describe resource", with("describe", "resource", "Job/bad"), 0, "Depends on:\n  Job/good (", ""},
		{"describe dependents", with("describe", "res", "job/good"), 0, "Required by:\n  Job/bad (", ""},
		{"describe attempts", with("describe", "resource", "Job/bad"), 0, "size 13 is unlucky", ""},
		{"describe missing", with("describe", "resource", "Job/nope"), 1, "", "Error from server (NotFound): resource Job/nope not found"},
		{"describe source", with("describe", "source", "local"), 0, "Last syncs:", ""},
		{"describe source missing", with("describe", "src", "nope"), 1, "", `Error from server (NotFound): source "nope" not found`},
		{"server from config", []string{"describe", "source", "local", "--config", listenCfg}, 0, "Phase:", ""},
		{"complete sources", append(append([]string{"__complete", "sync", "source"}, srv...), ""), 0, "local\n", ""},
		{"complete resources", append(append([]string{"__complete", "describe", "resource"}, srv...), ""), 0, "Job/bad\nJob/good\n", ""},
		{"suspend resource", with("suspend", "resource", "Job/good"), 0, "Job/good: suspended\n", ""},
		{"get suspended", []string{"get", "res", "good", "--database", url}, 0, "SUSPENDED", ""},
		{"get suspended value", []string{"get", "res", "good", "-o", "json", "--database", url}, 0, `"suspended_by": "api"`, ""},
		{"reconcile suspended", with("reconcile", "resource", "Job/good"), 1, "", "suspended"},
		{"describe suspended", with("describe", "resource", "Job/good"), 0, "Suspended:", ""},
		{"resume resource", with("resume", "res", "job/good"), 0, "Job/good: resumed\n", ""},
		{"suspend source", with("suspend", "source", "local"), 0, "source/local: suspended\n", ""},
		{"sync suspended source", with("sync", "source", "local"), 1, "", "suspended"},
		{"describe suspended source", with("describe", "source", "local"), 0, "yes, by the API", ""},
		{"resume source", with("resume", "src", "local"), 0, "source/local: resumed\n", ""},
		{"suspend unknown source", with("suspend", "source", "nope"), 1, "", "404"},
		{"suspend what", with("suspend", "sorce", "local"), 1, "", "Did you mean this?"},
		{"complete suspend", append(append([]string{"__complete", "suspend", "source"}, srv...), ""), 0, "local\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
		})
	}

	// get -w prints the changes the agent announces after the list.
	t.Run("get watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		out := &lockedWriter{w: &bytes.Buffer{}}
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"get", "res", "good", "-w", "--database", url, "--server", base}, out, &bytes.Buffer{})
		}()
		defer func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("get -w exited %d", code)
			}
		}()
		waitFor(t, 30*time.Second, agent, "the list", func() (bool, string) {
			return strings.Contains(out.String(), "READY"), out.String()
		})
		// The watch is open once the stream answers; a reconcile per check
		// makes sure one happens after that.
		waitFor(t, 30*time.Second, agent, "a watched change", func() (bool, string) {
			if strings.Count(out.String(), "\n") > 2 {
				return true, out.String()
			}
			r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Job", Namespace: "default", Name: "good"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Phase == manifest.PhaseReady {
				if _, err := st.RequestReconcile(t.Context(), r.ID); err != nil {
					t.Fatal(err)
				}
			}
			return false, out.String()
		})
		if o := out.String(); !strings.Contains(o, "Job  good") || strings.Contains(o, "bad") {
			t.Errorf("get -w:\n%s", o)
		}
		// A suspension is announced too.
		r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Job", Namespace: "default", Name: "good"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.SuspendResource(t.Context(), r.ID, true, store.Suspension{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, agent, "the suspension watched", func() (bool, string) {
			for _, row := range tableRows(out.String())[1:] {
				if len(row) == 8 && row[5] == "True" {
					return true, out.String()
				}
			}
			return false, out.String()
		})
		// Every row, listed or watched, has the header's columns: the
		// list's, with the Ready condition, reason and age.
		rows := tableRows(out.String())
		if len(rows) < 3 || strings.Join(rows[0], " ") != "KIND NAME READY STATUS REASON SUSPENDED AGE MESSAGE" {
			t.Fatalf("get -w: want the header, the list and the changes:\n%s", out.String())
		}
		for _, row := range rows[1:] {
			if len(row) != len(rows[0]) || row[0] != "Job" || row[1] != "good" || (row[2] != "True" && row[2] != "False" && row[2] != "Unknown") ||
				!regexp.MustCompile(`^[0-9]+[smhd]$`).MatchString(row[6]) {
				t.Errorf("get -w: row %q does not fill the header's %d columns:\n%s", row, len(rows[0]), out.String())
			}
		}
		if _, err := st.SuspendResource(t.Context(), r.ID, false, store.Suspension{}); err != nil {
			t.Fatal(err)
		}
	})

	// get src -w prints the list's columns for every change too.
	t.Run("get sources watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		out := &lockedWriter{w: &bytes.Buffer{}}
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"get", "src", "-w", "--database", url, "--server", base}, out, &bytes.Buffer{})
		}()
		defer func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("get src -w exited %d", code)
			}
		}()
		waitFor(t, 30*time.Second, agent, "the list", func() (bool, string) {
			return strings.Contains(out.String(), "READY"), out.String()
		})
		// A sync per check, so that one is announced after the stream
		// opened.
		waitFor(t, 30*time.Second, agent, "a watched source", func() (bool, string) {
			if len(tableRows(out.String())) > 2 {
				return true, out.String()
			}
			if code, o, e := runCLI(t, with("sync", "source", "local", "--wait")...); code != 0 {
				t.Fatalf("sync: exit %d\n%s%s", code, o, e)
			}
			return false, out.String()
		})
		rows := tableRows(out.String())
		if strings.Join(rows[0], "|") != "NAME|KIND|READY|PHASE|SUSPENDED|REVISION|LAST CHECK|MESSAGE" {
			t.Fatalf("get src -w: want the header first:\n%s", out.String())
		}
		for _, row := range rows[1:] {
			if len(row) != len(rows[0]) || row[0] != "local" || row[3] != "ready" || row[4] != "False" {
				t.Errorf("get src -w: row %q does not fill the header's %d columns:\n%s", row, len(rows[0]), out.String())
			}
		}
	})

	// The failing attempt --wait saw is in the history.
	r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Job", Namespace: "default", Name: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.ListReconcileRecords(t.Context(), r.ID, 10)
	if err != nil || len(recs) < 2 || recs[0].Success {
		t.Errorf("bad's history: %v %s", err, describeRecords(recs))
	}
}

// tableRows splits a table get printed into rows of cells: columns are
// two spaces apart at least, and cells have no such gap. Comment lines
// (# ...) are left out.
func tableRows(out string) [][]string {
	var rows [][]string
	for line := range strings.Lines(out) {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(line, -1))
	}
	return rows
}

// TestCLIDescribeLease describes a resource while the agent's worker holds
// it: the lease holder, alive, since when and until when.
func TestCLIDescribeLease(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"types.yaml": cliJobType,
		"slow.yaml": "apiVersion: no8s.io/v1\nkind: Job\nmetadata: {name: slow}\nspec: {size: 1}\n"} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - {name: local, dir: %q}
actions:
  jobs:
    plugin: exec
    config: {command: [sleep, "120"], timeout: 5m}
`, repo)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", cfgPath)
	base := agent.addr()
	waitFor(t, 60*time.Second, agent, "the slow job to be held", func() (bool, string) {
		rs := listResources(t, st)
		return len(rs) == 1 && rs[0].LeaseOwner != "", describe(rs)
	})
	// The agent's read model hears of the claim a moment after the store
	// has it.
	var code int
	var out, errOut string
	waitFor(t, 10*time.Second, agent, "describe to show the lease", func() (bool, string) {
		code, out, errOut = runCLI(t, "describe", "resource", "job/slow", "--server", base)
		return code == 0 && strings.Contains(out, "Lease holder:"), out + errOut
	})
	for _, want := range []string{"Lease holder:", "(alive)", "Lease since:", "Lease expires:", "reconciling"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("describe lacks %q (exit %d)\nstdout:\n%s\nstderr:\n%s", want, code, out, errOut)
		}
	}
}
