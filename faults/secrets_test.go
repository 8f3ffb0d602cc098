package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
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

// secretEnv sets an environment variable of a name of its own to value,
// for the agents the test starts (they inherit the test's environment),
// and returns its name. Parallel tests cannot use t.Setenv.
func secretEnv(t *testing.T, value string) string {
	t.Helper()
	name := "NO8S_FAULTS_" + strings.ToUpper(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), "_")) +
		fmt.Sprint(time.Now().UnixNano())
	if err := os.Setenv(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(name) })
	return name
}

// appResource is what the test reads of a resource in the API.
type appResource struct {
	ID                 int64  `json:"id"`
	Name               string `json:"name"`
	Status             string `json:"status"`
	StatusMessage      string `json:"status_message"`
	ObservedGeneration int64  `json:"observed_generation"`
}

// leakyType is a resource type provisioned by the exec instance "deploy".
const leakyType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: App}
spec:
  action: deploy
  versions:
    - name: v1
      schema: {type: object}
`

// leakyScript deploys an App as a careless script does: it prints the
// credentials it is passed in its progress and its outputs. The first
// apply hangs after its first progress line, so that the agent running
// it can be killed then.
const leakyScript = `#!/bin/sh
set -eu
echo "step 1: logging in as $%[1]s with $%[2]s" >&2
if [ ! -e started ]; then
	: >started
	sleep 30
fi
echo "step 2: deployed with $%[2]s" >&2
printf '{"login": "%%s", "password": "%%s", "%%s": true}\n' "$%[1]s" "$%[2]s" "$%[2]s"
`

// TestSecretsThroughCrash runs the agent binary with secrets its action
// prints, kills it with SIGKILL while the action has printed a secret in
// its progress, lets a second agent on the same database take the resource
// over and finish, takes the Git remote down, and checks that no secret
// value, as is or escaped, is in any response of the second agent or in
// either agent's log, while the masks show that they were printed.
func TestSecretsThroughCrash(t *testing.T) {
	secrets := map[string]string{
		"write":   "write-tok-5e0a9c21",
		"hook":    "hook-sec-b83f1d07",
		"gittok":  "git-tok-4c6e2a90",
		"user":    "deploy-user-7d1b",
		"pass":    "deploy-p'ss<&>-e29f",
		"another": "unused-but-known-0f3c",
	}
	env := map[string]string{}
	for k, v := range secrets {
		env[k] = secretEnv(t, v)
	}
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "deploy.sh"), fmt.Sprintf(leakyScript, env["user"], env["pass"]))
	if err := os.Chmod(filepath.Join(work, "deploy.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	remote := newGitRemote(t)
	remote.Commit(t, map[string]string{"types.yaml": leakyType,
		"apps/shop.yaml": "apiVersion: no8s.io/v1\nkind: App\nmetadata: {name: shop}\nspec: {}\n"}, "one app")
	served := serveGitHTTP(t, remote)
	t.Parallel()
	dbURL := pgtest.URL(t)
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: apps
    git: {url: %q, branch: main, interval: 1h, auth: {tokenEnv: %s}}
api: {writeTokenEnv: %s}
webhooks: {githubSecretEnv: %s}
actions:
  deploy:
    plugin: exec
    config: {command: [./deploy.sh], timeout: 2m, passEnv: [%s, %s, %s]}
reconcile: {leaseDuration: 2s, backoff: {initial: 1s, max: 2s}}
`, dbURL, served.URL(), env["gittok"], env["write"], env["hook"], env["user"], env["pass"], env["another"]))

	first := startAgent(t, work, "run", "--config", cfg, "--log-level", "debug")
	base := first.URL()
	var shop appResource
	waitUntil(t, 60*time.Second, "the first apply's progress", func() (bool, string) {
		var list []appResource
		apiGet(t, base+"/api/v1/resources", &list)
		for _, r := range list {
			if r.Name == "shop" {
				shop = r
			}
		}
		return strings.Contains(shop.StatusMessage, "step 1"), shop.Status + " " + shop.StatusMessage
	})
	if want := "step 1: logging in as *** with ***"; shop.StatusMessage != want {
		t.Errorf("progress stored as %q, want %q", shop.StatusMessage, want)
	}
	first.Kill9()

	second := startAgent(t, work, "run", "--config", cfg, "--log-level", "debug")
	base = second.URL()
	var id int64
	waitUntil(t, 60*time.Second, "the second agent to finish the apply", func() (bool, string) {
		var list []appResource
		apiGet(t, base+"/api/v1/resources", &list)
		for _, r := range list {
			if r.Name == "shop" {
				id = r.ID
				return r.Status == "ready" && r.ObservedGeneration == 1, r.Status + " " + r.StatusMessage
			}
		}
		return false, "no shop"
	})
	served.Down()
	post, err := http.NewRequest(http.MethodPost, base+"/api/v1/sources/apps/sync", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Header.Set("Authorization", "Bearer "+secrets["write"])
	if resp, err := http.DefaultClient.Do(post); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	waitUntil(t, 60*time.Second, "the source to fail", func() (bool, string) {
		var src struct{ Phase, Message string }
		apiGet(t, base+"/api/v1/sources/apps", &src)
		return src.Phase == "failed", src.Phase + " " + src.Message
	})

	var seen strings.Builder
	for _, p := range []string{"/api/v1/resources", fmt.Sprintf("/api/v1/resources/%d", id),
		fmt.Sprintf("/api/v1/resources/%d/history", id), fmt.Sprintf("/api/v1/resources/%d/outputs", id),
		"/api/v1/resources/by-name/App/v1/shop", "/api/v1/sources", "/api/v1/sources/apps", "/api/v1/sources/apps/history",
		"/", fmt.Sprintf("/resources/%d", id), "/sources/apps", "/metrics"} {
		status, body := getPath(t, base, p)
		if strings.HasSuffix(p, "/outputs") {
			var outputs struct {
				Outputs map[string]any `json:"outputs"`
			}
			if err := json.Unmarshal(body, &outputs); err != nil {
				t.Errorf("outputs are not JSON: %v\n%s", err, body)
			}
			if outputs.Outputs["login"] != "***" || outputs.Outputs["password"] != "***" || outputs.Outputs["***"] != true {
				t.Errorf("outputs not masked as expected: %s", body)
			}
		}
		fmt.Fprintf(&seen, "GET %s -> %d\n%s\n", p, status, body)
	}
	second.Stop()

	if !strings.Contains(seen.String(), "step 2: deployed with ***") {
		t.Error("the second apply's message is not shown masked; the check would prove nothing")
	}
	for name, value := range secrets {
		js, _ := json.Marshal(value)
		for _, form := range []string{value, string(js[1 : len(js)-1]), html.EscapeString(value)} {
			for where, text := range map[string]string{"a response": seen.String(),
				"the first agent's log": first.Log(), "the second agent's log": second.Log()} {
				if strings.Contains(text, form) {
					t.Errorf("the %s secret is in %s as %q", name, where, form)
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("responses:\n%s", seen.String())
	}
}

// getPath GETs the path p of the agent at base, failing the test when it
// cannot be read and noting any status but 200, and returns the status and
// body.
func getPath(t *testing.T, base, p string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", p, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s = %d", p, resp.StatusCode)
	}
	return resp.StatusCode, body
}
