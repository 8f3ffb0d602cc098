package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// securityTaskType is a resource type run by the exec instance "runner".
const securityTaskType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Task}
spec:
  action: runner
  versions:
    - name: v1
      schema: {type: object, properties: {note: {type: string}}}
`

// securityLeakScript is an exec action that echoes the secret it is passed:
// a plan's summary and output, Task/good's progress and outputs (whose JSON
// escaping the test writes, as a script would use a JSON tool), Task/bad's
// failure.
const securityLeakScript = `#!/bin/sh
if [ "$NO8S_OPERATION" = plan ]; then
	printf 'deploy with %%s\n~ token: %%s\n' "$%[1]s" "$%[1]s"
	exit 2
fi
case "$NO8S_RESOURCE_NAME" in
good)
	printf 'logging in with %%s\n' "$%[1]s" >&2
	cat <<'EOF'
%[2]s
EOF
	;;
*)
	printf 'login failed for %%s\n' "$%[1]s" >&2
	exit 3
	;;
esac
`

// securityForms returns a secret in the forms the agent's encoders give it:
// JSON (with and without HTML escapes), Go quoting, HTML (standard and
// '&', '<', '>' only), a Markdown table cell, URL query and path escaping,
// and YAML's single quotes.
func securityForms(s string) map[string]string {
	js, _ := json.Marshal(s)
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	plain := strings.TrimSpace(noHTML.String())
	q := fmt.Sprintf("%q", s)
	return map[string]string{
		"as is":                     s,
		"JSON":                      string(js[1 : len(js)-1]),
		"JSON without HTML escapes": plain[1 : len(plain)-1],
		"Go-quoted":                 q[1 : len(q)-1],
		"HTML":                      html.EscapeString(s),
		"HTML, quotes as they are":  strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s),
		"html/template":             strings.ReplaceAll(html.EscapeString(s), "+", "&#43;"),
		"a Markdown table cell":     strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s),
		"URL query":                 url.QueryEscape(s),
		"URL path":                  url.PathEscape(s),
		"YAML single-quoted":        strings.ReplaceAll(s, "'", "''"),
	}
}

// echoRecorder keeps what a fake receiver was sent.
type echoRecorder struct {
	mu   gosync.Mutex
	seen []string
}

func (r *echoRecorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
}

func (r *echoRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// TestSecuritySecretsNeverShown runs the agent binary with a passEnv secret
// holding a quote, '&', '<' and '>', echoed by its exec action in outputs,
// progress, a failure and a plan, and quoted by a manifest and a commit
// message; with pull-request previews and commit statuses on a GitHub
// fake, and a Slack URL whose receiver echoes the path back in its error
// body. Neither the secret, in any form the agent's encoders give it, nor
// the Slack URL's path or token shows in the agent's log, its API and
// dashboard responses, the pull-request comment, the commit statuses, or
// the output of get -o json and -o yaml with --config.
func TestSecuritySecretsNeverShown(t *testing.T) {
	const (
		secret     = `fa"ults&<sec>ret 'x'-4e1d`
		ghToken    = "ghp_faultsSecT0ken-9a7b"
		slackToken = "xYz123FaultsSlack77"
	)
	secEnv := secretEnv(t, secret)
	ghEnv := secretEnv(t, ghToken)
	slack := &echoRecorder{}
	slackSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		slack.add(string(body))
		http.Error(w, "no_service: no route for "+r.URL.Path, http.StatusNotFound)
	}))
	t.Cleanup(slackSrv.Close)
	slackPath := "/services/T0FA12CD/B0FA34GH/" + slackToken
	slackEnv := secretEnv(t, slackSrv.URL+slackPath)

	work := t.TempDir()
	outputs, _ := json.Marshal(map[string]string{"token": secret, "note": "with " + secret})
	writeFile(t, filepath.Join(work, "leak.sh"), fmt.Sprintf(securityLeakScript, secEnv, outputs))
	if err := os.Chmod(filepath.Join(work, "leak.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(secret)
	changed, _ := json.Marshal("changed " + secret)
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": securityTaskType,
		"tasks/good.yaml": fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: good}\nspec: {note: %s}\n", quoted),
		"tasks/bad.yaml":  "apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: bad}\nspec: {}\n"})
	repo.Commit("deploy with " + secret)
	head := repo.PullRequest(7, repo.Head(), map[string]string{
		"tasks/good.yaml": fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: good}\nspec: {note: %s}\n", changed),
		"tasks/more.yaml": "apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: more}\nspec: {}\n"}, "more")
	mainSHA := repo.Git("rev-parse", "main")
	// Served as acme/infra, the way GitHub names repositories.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo.Dir, filepath.Join(root, "acme", "infra")); err != nil {
		t.Fatal(err)
	}
	gs := gittest.NewServer(t, root, "bot", "faults-git-pass-1")
	userEnv, passEnv := secretEnv(t, "bot"), secretEnv(t, "faults-git-pass-1")
	fake := githubtest.New(t, githubtest.Options{Token: ghToken, Owner: "acme", Repo: "infra"})
	fake.SetPull(githubtest.Pull{Number: 7, HeadSHA: head, BaseRef: "main"})
	t.Parallel()
	dbURL := pgtest.URL(t)
	cfg := writeConfig(t, work, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: tasks
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
    pullRequests: {enabled: true, tokenEnv: %s, apiURL: %q, interval: 1h}
reconcile: {backoff: {initial: 1h}}
actions:
  runner:
    plugin: exec
    config: {command: [./leak.sh], plan: true, passEnv: [%s]}
notifications:
  providers:
    chat: {type: slack, urlEnv: %s}
    commits: {type: github, tokenEnv: %s, apiURL: %q, repository: acme/infra}
  alerts:
    - providers: [chat]
`, dbURL, gs.URL+"/acme/infra/.git", userEnv, passEnv, ghEnv, fake.BaseURL(), secEnv, slackEnv, ghEnv, fake.BaseURL()))

	a := startAgent(t, work, "run", "--config", cfg, "--log-level", "debug")
	base := a.URL()
	waitUntil(t, 90*time.Second, "good to be ready and bad to fail", func() (bool, string) {
		var list []appResource
		apiGet(t, base+"/api/v1/resources", &list)
		state := map[string]string{}
		for _, r := range list {
			state[r.Name] = r.Status
		}
		return state["good"] == "ready" && state["bad"] == "failed", fmt.Sprint(state)
	})
	waitUntil(t, 90*time.Second, "the preview's final status", func() (bool, string) {
		ss := fake.Statuses(head)
		return len(ss) > 0 && ss[len(ss)-1].State != "pending", fmt.Sprintf("%+v", ss)
	})
	waitUntil(t, 90*time.Second, "the commit status and the Slack delivery", func() (bool, string) {
		ss := fake.Statuses(mainSHA)
		return len(ss) > 0 && ss[len(ss)-1].State != "pending" && slack.count() > 0, fmt.Sprintf("%+v, slack %d", ss, slack.count())
	})

	surfaces := map[string]string{}
	var list []appResource
	apiGet(t, base+"/api/v1/resources", &list)
	paths := []string{"/api/v1/resources", "/api/v1/sources", "/api/v1/sources/tasks", "/api/v1/sources/tasks/history",
		"/", "/sources/tasks", "/metrics"}
	for _, r := range list {
		paths = append(paths, fmt.Sprintf("/api/v1/resources/%d", r.ID), fmt.Sprintf("/api/v1/resources/%d/history", r.ID),
			fmt.Sprintf("/api/v1/resources/%d/outputs", r.ID), fmt.Sprintf("/resources/%d", r.ID))
	}
	var responses strings.Builder
	for _, p := range paths {
		status, body := getPath(t, base, p)
		fmt.Fprintf(&responses, "GET %s -> %d\n%s\n", p, status, body)
	}
	surfaces["the API and dashboard responses"] = responses.String()
	var comments, statuses []string
	for _, c := range fake.Comments(7) {
		comments = append(comments, c.Body)
	}
	surfaces["the pull-request comment"] = strings.Join(comments, "\n")
	for _, sha := range []string{head, mainSHA} {
		for _, s := range fake.Statuses(sha) {
			statuses = append(statuses, s.Description+" "+s.TargetURL)
		}
	}
	surfaces["the commit statuses"] = strings.Join(statuses, "\n")
	for _, format := range []string{"json", "yaml"} {
		for _, object := range []string{"resources", "sources", "history"} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			cmd := exec.CommandContext(ctx, agentBinary(t), "get", object, "-o", format, "--config", cfg)
			cmd.Dir = work
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			cancel()
			if err != nil {
				t.Errorf("get %s -o %s: %v\n%s", object, format, err, out.String())
			}
			surfaces[fmt.Sprintf("get %s -o %s --config", object, format)] = out.String()
		}
	}
	a.Stop()
	surfaces["the agent's log"] = a.Log()

	for surface, want := range map[string]string{
		"the pull-request comment":        "deploy with ***",
		"the API and dashboard responses": `"note":"***"`,
		"get resources -o json --config":  `"note": "***"`,
		"get resources -o yaml --config":  "note: '***'",
		"the agent's log":                 "no route for ***",
	} {
		if !strings.Contains(surfaces[surface], want) {
			t.Errorf("%s lacks %q; the check would prove nothing:\n%s", surface, want, surfaces[surface])
		}
	}
	for surface, text := range surfaces {
		for name, form := range securityForms(secret) {
			if strings.Contains(text, form) {
				t.Errorf("the secret is in %s %s: %q", surface, name, form)
			}
		}
		for _, part := range []string{slackToken, slackPath, strings.TrimPrefix(slackPath, "/")} {
			if strings.Contains(text, part) {
				t.Errorf("the Slack URL's %q is in %s", part, surface)
			}
		}
	}
	if t.Failed() {
		for surface, text := range surfaces {
			t.Logf("%s:\n%s", surface, text)
		}
	}
}
