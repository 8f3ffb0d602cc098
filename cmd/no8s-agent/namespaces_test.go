package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestNamespacesCLI: get lists the default namespace (and cluster-scoped
// resources) unless -n names another or -A asks for all, with a NAMESPACE
// column; the verbs take KIND/NAME in -n's namespace or the default one, and
// KIND/NAMESPACE/NAME; a token granted one namespace acts there only.
func TestNamespacesCLI(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Job}
spec:
  versions:
    - name: v1
      schema: {type: object}
---
apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Zone}
spec:
  scope: Cluster
  versions:
    - name: v1
      schema: {type: object}
---
apiVersion: no8s.io/v1
kind: Zone
metadata: {name: z1}
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: web}
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: web, namespace: team-a}
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: web, namespace: team-b}
dependsOn: [{kind: Job, namespace: team-a, name: web}]
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: only-b, namespace: team-b}
spec: {}
`
	if err := os.WriteFile(filepath.Join(repo, "all.yaml"), []byte(files), 0o644); err != nil {
		t.Fatal(err)
	}
	writer := setSecret(t, "ns-cli-writer-token")
	teamA := setSecret(t, "ns-cli-team-a-token")
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - {name: local, dir: %q}
api:
  writeTokenEnv: %s
  tokens:
    - {name: team-a, tokenEnv: %s, allow: [{verbs: [get, list, reconcile, suspend], namespaces: [team-a]}]}
`, repo, writer, teamA)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", cfgPath)
	base := agent.addr()
	waitFor(t, 60*time.Second, agent, "the five resources", func() (bool, string) {
		rs := listResources(t, st)
		return len(rs) == 5, describe(rs)
	})

	// get, from the store.
	for _, tt := range []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"the default namespace", []string{"get", "resources"}, []string{"KIND ", "Job   web", "Zone  z1"}, []string{"NAMESPACE", "only-b"}},
		{"-n", []string{"get", "resources", "-n", "team-b"}, []string{"only-b", "z1"}, []string{"NAMESPACE"}},
		{"--namespace", []string{"get", "resources", "--namespace", "team-a", "-o", "name"}, []string{"Job/team-a/web\nZone/z1\n"}, []string{"team-b"}},
		{"-A", []string{"get", "resources", "-A"}, []string{"NAMESPACE  KIND", "default    Job   web", "team-a     Job   web", "team-b     Job   only-b", "-          Zone  z1"}, nil},
		{"-A, by name", []string{"get", "resources", "-A", "-o", "name"},
			[]string{"Job/web\nJob/team-a/web\nJob/team-b/only-b\nJob/team-b/web\nZone/z1\n"}, nil},
		{"-A, wide", []string{"get", "resources", "--all-namespaces", "-o", "wide"}, []string{"NAMESPACE  ID"}, nil},
		{"one name in a namespace", []string{"get", "resources", "web", "-n", "team-b", "-o", "json"}, []string{`"namespace": "team-b"`}, []string{`"only-b"`, `"namespace": "default"`}},
	} {
		code, out, errOut := runCLI(t, append(tt.args, "--database", url)...)
		if code != 0 {
			t.Errorf("%s: exit %d\n%s%s", tt.name, code, out, errOut)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tt.name, w, out)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(out, n) {
				t.Errorf("%s: output has %q:\n%s", tt.name, n, out)
			}
		}
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"-n and -A", []string{"get", "resources", "-n", "team-a", "-A"}, "not both"},
		{"a bad namespace", []string{"get", "resources", "-n", "Team_A"}, "not a namespace"},
		{"a ref in another namespace than -n", []string{"get", "history", "--resource", "Job/team-a/web", "-n", "team-b"}, "but -n says team-b"},
		{"history of a name elsewhere", []string{"get", "history", "--resource", "Job/only-b"}, "it is in namespace(s) team-b"},
	} {
		code, out, errOut := runCLI(t, append(tt.args, "--database", url)...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, want an error with %q\n%s%s", tt.name, code, tt.want, out, errOut)
		}
	}
	for _, args := range [][]string{{"--resource", "Job/team-b/web"}, {"--resource", "Job/web", "-n", "team-b"}, {"--resource", "Zone/z1", "-n", "team-a"}} {
		if code, out, errOut := runCLI(t, append([]string{"get", "history", "--database", url}, args...)...); code != 0 {
			t.Errorf("get history %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}

	// The verbs, through the API.
	srv := []string{"--server", base, "--token-env", writer}
	waitFor(t, 30*time.Second, agent, "the resources through the API", func() (bool, string) {
		code, out, errOut := runCLI(t, append([]string{"describe", "resource", "Job/team-b/web"}, srv...)...)
		return code == 0 && strings.Contains(out, "Job/team-a/web ("), out + errOut
	})
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"describe", "resource", "Job/web"}, []string{"Namespace:", "default", "Required by:\n  <none>"}},
		{[]string{"describe", "resource", "-n", "team-a", "Job/web"}, []string{"team-a", "Required by:\n  Job/team-b/web ("}},
		{[]string{"describe", "resource", "Job/team-b/web"}, []string{"team-b", "Depends on:\n  Job/team-a/web ("}},
		{[]string{"describe", "resource", "Zone/z1", "-n", "team-a"}, []string{"Name:", "z1"}},
	} {
		code, out, errOut := runCLI(t, append(tt.args, srv...)...)
		for _, w := range tt.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%v: lacks %q (exit %d)\n%s%s", tt.args, w, code, out, errOut)
			}
		}
		if strings.Contains(tt.args[len(tt.args)-1], "z1") && strings.Contains(out, "Namespace:") {
			t.Errorf("%v: a cluster-scoped resource shows a namespace:\n%s", tt.args, out)
		}
	}
	code, _, errOut := runCLI(t, append([]string{"describe", "resource", "Job/only-b"}, srv...)...)
	if code == 0 || !strings.Contains(errOut, "not found in namespace default; it is in namespace(s) team-b") {
		t.Errorf("describe of a name in another namespace: exit %d %s", code, errOut)
	}

	// The team-a token suspends team-a's, and finds no other namespace's.
	asA := []string{"--server", base, "--token-env", teamA}
	code, out, errOut := runCLI(t, append([]string{"suspend", "resource", "-n", "team-a", "Job/web"}, asA...)...)
	if code != 0 || !strings.Contains(out, "Job/team-a/web: suspended") {
		t.Errorf("suspend with -n: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"suspend", "resource", "Job/team-b/web"}, {"suspend", "resource", "Job/web"},
		{"reconcile", "resource", "-n", "team-b", "Job/web"}, {"describe", "resource", "Job/team-b/only-b"}} {
		if code, out, errOut := runCLI(t, append(args, asA...)...); code == 0 || !strings.Contains(errOut, "not found") {
			t.Errorf("%v with the team-a token: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	for _, r := range listResources(t, st) {
		want := r.Ref() == manifest.ObjectRef{Kind: "Job", Namespace: "team-a", Name: "web"}
		if r.Suspended() != want {
			t.Errorf("%s suspended: %v, want %v", r.Ref(), r.Suspended(), want)
		}
	}
	code, out, errOut = runCLI(t, append([]string{"resume", "resource", "Job/team-a/web"}, asA...)...)
	if code != 0 || !strings.Contains(out, "Job/team-a/web: resumed") {
		t.Errorf("resume of KIND/NAMESPACE/NAME: exit %d\n%s%s", code, out, errOut)
	}
}
