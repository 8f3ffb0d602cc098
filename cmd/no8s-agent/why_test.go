package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestSuspendReasonAndDescribeWhy suspends with --reason as the token ops
// and describes: the Why section says who suspended it and why; a chain
// of dependencies shows each link and the root cause's reason, which its
// annotation gives; a reason on several lines is refused.
func TestSuspendReasonAndDescribeWhy(t *testing.T) {
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
kind: Job
metadata: {name: a}
dependsOn: [{kind: Job, name: b}]
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: b}
dependsOn: [{kind: Job, name: c}]
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata:
  name: c
  annotations: {no8s.io/suspend: "true", no8s.io/suspend-reason: "frozen <b>for</b> the audit"}
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: d}
spec: {}
`
	if err := os.WriteFile(filepath.Join(repo, "all.yaml"), []byte(files), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenEnv := setSecret(t, "ops-token-3f9a0c7d1e")
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - {name: local, dir: %q}
api:
  tokens:
    - {name: ops, tokenEnv: %s, allow: [{verbs: [get, list, suspend]}]}
`, repo, tokenEnv)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	agent := startAgent(t, pgtest.URL(t), "--config", cfgPath)
	srv := []string{"--server", agent.addr(), "--token-env", tokenEnv}
	cli := func(args ...string) (int, string, string) { return runCLI(t, append(args, srv...)...) }

	// a waits on b, which waits on c, which its annotation suspends.
	waitFor(t, 60*time.Second, agent, "a's chain", func() (bool, string) {
		code, out, errOut := cli("describe", "resource", "Job/a")
		return code == 0 && strings.Contains(out, "2. Job/default/c (") || code == 0 && strings.Contains(out, "2. Job/c ("), out + errOut
	})
	code, out, errOut := cli("describe", "resource", "Job/a")
	for _, want := range []string{"Why:", "Reason:", "DependencyNotReady", "Chain:", "1. Job/b (", "2. Job/c (",
		"Root cause:", "frozen <b>for</b> the audit"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("describe Job/a lacks %q (exit %d)\n%s%s", want, code, out, errOut)
		}
	}

	// The dashboard's page of a shows the chain, from the API's read model.
	m := regexp.MustCompile(`ID:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ID in\n%s", out)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, agent.addr()+"/resources/"+m[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv(tokenEnv))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `id="why-h"`) ||
		!strings.Contains(string(page), "DependencyNotReady") || !strings.Contains(string(page), "frozen &lt;b&gt;for&lt;/b&gt; the audit") {
		t.Errorf("dashboard page of Job/a = %d %v:\n%s", resp.StatusCode, err, page)
	}

	waitFor(t, 60*time.Second, agent, "d ready", func() (bool, string) {
		code, out, errOut := cli("describe", "resource", "Job/d")
		return code == 0 && strings.Contains(out, "Status:") && !strings.Contains(out, "Why:"), out + errOut
	})
	if code, out, errOut := cli("suspend", "resource", "Job/d", "--reason", "maintenance window until 18:00"); code != 0 {
		t.Fatalf("suspend --reason = %d\n%s%s", code, out, errOut)
	}
	waitFor(t, 30*time.Second, agent, "d's why", func() (bool, string) {
		code, out, errOut := cli("describe", "resource", "Job/d")
		return code == 0 && strings.Contains(out, "Why:") && strings.Contains(out, "api, by ops") &&
				strings.Contains(out, "maintenance window until 18:00") && strings.Contains(out, "To resume: no8s-agent resume resource Job/default/d"),
			out + errOut
	})
	if code, out, errOut := cli("suspend", "resource", "Job/d", "--reason", "one\ntwo"); code == 0 || !strings.Contains(errOut, "control character") {
		t.Errorf("a reason on two lines: exit %d\n%s%s", code, out, errOut)
	}

	if code, out, errOut := cli("suspend", "source", "local", "--reason", "release freeze"); code != 0 {
		t.Fatalf("suspend source --reason = %d\n%s%s", code, out, errOut)
	}
	waitFor(t, 30*time.Second, agent, "the source's why", func() (bool, string) {
		code, out, errOut := cli("describe", "source", "local")
		return code == 0 && strings.Contains(out, "Why:") && strings.Contains(out, "api, by ops") && strings.Contains(out, "release freeze"),
			out + errOut
	})
}
