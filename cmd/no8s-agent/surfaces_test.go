package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/notify/notifytest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// nastySecrets are passEnv values with every character an encoding the
// agent applies changes: quotes, '&', '<', '>', '|', a backslash, a
// newline, '%', spaces, '+', a backtick and non-ASCII letters.
var nastySecrets = []string{
	`pa"ss&w<o>rd|1f-9c0e`,
	"it's a\\back\nslash-77d1",
	"100% sure+secret ünï€ 3b",
	"`tick`&<x> 'q' -b7d2e",
}

// secretForms returns the forms a secret takes in the encodings the agent
// applies, by name: each is written by the code that the agent writes it
// with (encoding/json, fmt, html, html/template, net/url, the YAML encoder,
// the comment's Markdown escaping), and every line of a secret on several.
func secretForms(t *testing.T, s string) map[string]string {
	js := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	tmpl := func(before, after string) string {
		var b bytes.Buffer
		if err := template.Must(template.New("").Parse(before+"{{.}}"+after)).Execute(&b, s); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(strings.TrimPrefix(b.String(), before), after)
	}
	y, _ := yaml.Marshal(map[string]string{"k": s})
	q := strconv.Quote(s)
	qa := strconv.QuoteToASCII(s)
	cell := strings.NewReplacer("|", `\|`, "\n", " ", "\r", "", "<", "&lt;", ">", "&gt;")
	forms := map[string]string{
		"as is":                      s,
		"JSON":                       js(s),
		"JSON without HTML escapes":  strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(noHTML.String(), `"`), "\n"), `"`),
		"JSON in JSON":               js(js(s)),
		"Go %q":                      q[1 : len(q)-1],
		"Go %+q":                     qa[1 : len(qa)-1],
		"HTML":                       html.EscapeString(s),
		"HTML, quotes as they are":   strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s),
		"html/template text":         tmpl("<p>", "</p>"),
		"html/template URL query":    tmpl(`<a href="/?q=`, `">`),
		"html/template URL path":     tmpl(`<a href="/x/`, `">`),
		"Markdown table cell":        cell.Replace(s),
		"JSON in a Markdown cell":    strings.ReplaceAll(cell.Replace(js(s)), "`", "'"),
		"URL query":                  url.QueryEscape(s),
		"URL path segment":           url.PathEscape(s),
		"URL password":               strings.TrimPrefix(url.UserPassword("u", s).String(), "u:"),
		"control characters escaped": manifest.EscapeControl(s),
		"YAML":                       strings.TrimSpace(strings.TrimPrefix(string(y), "k:")),
		"YAML single-quoted":         strings.ReplaceAll(s, "'", "''"),
	}
	for i, line := range strings.Split(s, "\n") {
		if strings.Contains(s, "\n") && len(strings.TrimSpace(line)) >= 8 {
			forms[fmt.Sprintf("line %d", i+1)] = strings.TrimSpace(line)
		}
	}
	return forms
}

// surfaceScript is an exec action that echoes the secrets it is passed, as
// a careless script does (with printf: dash's echo would turn the
// backslash of one into a control character, an encoding of its own): its plans in their summary and output, Task/good
// in its progress and outputs (the outputs' JSON escaping written by the
// test, as a script would use a JSON tool), Task/bad in its failure.
const surfaceScript = `#!/bin/sh
if [ "$NO8S_OPERATION" = plan ]; then
	printf 'deploy with %%s\n~ token: %%s\n' "$%[1]s" "$%[2]s"
	exit 2
fi
case "$NO8S_RESOURCE_NAME" in
good)
	printf 'logging in with %%s and %%s\n' "$%[1]s" "$%[3]s" >&2
	cat <<'EOF'
%[5]s
EOF
	;;
*)
	printf 'login failed for %%s and %%s\n' "$%[2]s" "$%[4]s" >&2
	exit 3
	;;
esac
`

// recorder is an HTTP receiver that keeps every request's path and body
// and answers with handle.
type recorder struct {
	mu   gosync.Mutex
	seen []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.seen, "\n")
}

// TestSecretsEverySurface runs an agent whose exec action is passed nasty
// secrets and echoes them in its outputs, progress, failures and plans,
// whose manifest and commit message quote one, with pull-request previews,
// commit statuses, a Slack URL whose receiver echoes its path back and a
// signed webhook. It then reads every surface the agent writes to — its
// log, the API, sync and reconcile history, the dashboard, the metrics, the
// pull-request comment and statuses, the commit statuses and messages of
// notifications, and the CLI's get and describe in every format — and
// checks that no secret appears in any of them in any form an encoding
// the agent applies gives.
func TestSecretsEverySurface(t *testing.T) {
	const ghToken = "ghp_surfaceT0ken-4d1c9e"
	const slackToken = "xYz123SurfaceSlack9"
	var env []string
	for _, s := range nastySecrets {
		env = append(env, setSecret(t, s))
	}
	ghEnv := setSecret(t, ghToken)
	readToken := "read-tok-surface-0c9e51"
	readEnv := setSecret(t, readToken)
	hookSecret := "hook-sec-surface-8e2a"
	hookEnv := setSecret(t, hookSecret)

	slack := &recorder{}
	slackSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		slack.add(r.URL.Path + " " + string(body))
		http.Error(w, "no_service: no route for "+r.URL.Path, http.StatusNotFound)
	}))
	t.Cleanup(slackSrv.Close)
	slackURL := slackSrv.URL + "/services/T0AB12CD/B0EF34GH/" + slackToken
	slackEnv := setSecret(t, slackURL)
	hook := notifytest.NewReceiver(t, hookSecret)

	outputs, _ := json.Marshal(map[string]string{"token": nastySecrets[0], "url": "https://u:" + url.QueryEscape(nastySecrets[1]) + "@example.com/",
		"note": "with " + nastySecrets[2]})
	dir := t.TempDir()
	script := filepath.Join(dir, "leak.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(surfaceScript, env[0], env[1], env[2], env[3], outputs)), 0o755); err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(nastySecrets[3])
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{
		"types.yaml":      taskType,
		"tasks/good.yaml": fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: good}\nspec: {note: %s}\n", quoted),
		"tasks/bad.yaml":  task("bad"),
	})
	repo.Commit("deploy with " + nastySecrets[0])
	quotedPR, _ := json.Marshal("changed " + nastySecrets[0])
	head := repo.PullRequest(7, repo.Head(), map[string]string{
		"tasks/good.yaml": fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: good}\nspec: {note: %s}\n", quotedPR),
		"tasks/more.yaml": task("more"),
	}, "more")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo.Dir, filepath.Join(root, "acme", "infra")); err != nil {
		t.Fatal(err)
	}
	gs := gittest.NewServer(t, root, "bot", "git-pass-surface")
	gitUser, gitPass := setSecret(t, "bot"), setSecret(t, "git-pass-surface")
	fake := githubtest.New(t, githubtest.Options{Token: ghToken, Owner: "acme", Repo: "infra"})
	fake.SetPull(githubtest.Pull{Number: 7, HeadSHA: head, BaseRef: "main"})
	cfg := fmt.Sprintf(`sources:
  - name: tasks
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
    pullRequests: {enabled: true, tokenEnv: %s, apiURL: %q, interval: 1h}
api: {readTokenEnv: %s}
reconcile: {backoff: {initial: 1h}}
actions:
  runner:
    plugin: exec
    config: {command: [%q], plan: true, passEnv: [%s]}
notifications:
  providers:
    chat: {type: slack, urlEnv: %s}
    hook: {type: webhook, url: %q, secretEnv: %s}
    commits: {type: github, tokenEnv: %s, apiURL: %q, repository: acme/infra}
  alerts:
    - providers: [chat, hook]
`, gs.URL+"/acme/infra/.git", gitUser, gitPass, ghEnv, fake.BaseURL(), readEnv, script, strings.Join(env, ", "),
		slackEnv, hook.URL, hookEnv, ghEnv, fake.BaseURL())
	path := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	dbURL := pgtest.URL(t)
	st := openTestStore(t, dbURL)
	agent := startAgent(t, dbURL, "--config", path, "--log-level", "debug")
	base := agent.addr()

	waitFor(t, 60*time.Second, agent, "good to be ready and bad to fail", func() (bool, string) {
		good, err1 := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Task", Namespace: "default", Name: "good"})
		bad, err2 := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Task", Namespace: "default", Name: "bad"})
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		return good.Phase == manifest.PhaseReady && bad.Phase == manifest.PhaseFailed, string(good.Phase) + " " + string(bad.Phase)
	})
	waitFor(t, 60*time.Second, agent, "the preview's final status", func() (bool, string) {
		ss := fake.Statuses(head)
		return len(ss) > 0 && ss[len(ss)-1].State != "pending", fmt.Sprintf("%+v", ss)
	})
	waitFor(t, 60*time.Second, agent, "the notifications", func() (bool, string) {
		ns, err := st.ListNotices(t.Context(), "", 100)
		if err != nil {
			return false, err.Error()
		}
		slackFailed, commit := false, false
		for _, n := range ns {
			if r := n.Results["chat"]; r.Error != "" {
				slackFailed = true
			}
			if r := n.Results["commits"]; r.Result == store.DeliveryDelivered {
				commit = true
			}
		}
		return slackFailed && commit && len(hook.Accepted()) > 0, fmt.Sprintf("%d notices, slack failed %v, commit status %v, webhook %d",
			len(ns), slackFailed, commit, len(hook.Accepted()))
	})

	surfaces := map[string]string{}
	get := func(p string) string {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+p, nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d\n%s", p, resp.StatusCode, body)
		}
		return string(body)
	}
	good, _ := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Task", Namespace: "default", Name: "good"})
	bad, _ := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Task", Namespace: "default", Name: "bad"})
	for _, p := range []string{"/api/v1/resources", "/api/v1/sources", "/api/v1/sources/tasks", "/api/v1/sources/tasks/history",
		"/api/v1/resource-types"} {
		surfaces["API "+p] = get(p)
	}
	for _, id := range []int64{good.ID, bad.ID} {
		for _, p := range []string{"/api/v1/resources/%d", "/api/v1/resources/%d/history", "/api/v1/resources/%d/outputs"} {
			p = fmt.Sprintf(p, id)
			surfaces["API "+p] = get(p)
		}
		surfaces[fmt.Sprintf("dashboard /resources/%d", id)] = get(fmt.Sprintf("/resources/%d", id))
	}
	surfaces["dashboard /"] = get("/")
	surfaces["dashboard /sources/tasks"] = get("/sources/tasks")
	surfaces["metrics"] = get("/metrics")
	var comments, statuses []string
	for _, c := range fake.Comments(7) {
		comments = append(comments, c.Body)
	}
	for _, s := range fake.Statuses(head) {
		statuses = append(statuses, s.Description)
	}
	surfaces["pull-request comment"] = strings.Join(comments, "\n")
	surfaces["pull-request statuses"] = strings.Join(statuses, "\n")
	statuses = nil
	for _, s := range fake.Statuses(repo.Git("rev-parse", "main")) {
		statuses = append(statuses, s.Description+" "+s.TargetURL)
	}
	surfaces["commit statuses"] = strings.Join(statuses, "\n")
	surfaces["Slack"] = slack.String()
	var hooks []string
	for _, d := range hook.Accepted() {
		hooks = append(hooks, d.Body)
	}
	surfaces["webhook"] = strings.Join(hooks, "\n")
	for _, args := range [][]string{
		{"get", "resources"}, {"get", "resources", "-o", "wide"}, {"get", "resources", "-o", "json"}, {"get", "resources", "-o", "yaml"},
		{"get", "sources", "-o", "json"}, {"get", "sources", "-o", "yaml"}, {"get", "sources"},
		{"get", "history", "-o", "json"}, {"get", "history", "--resource", "Task/bad", "-o", "yaml"},
	} {
		var out, errOut strings.Builder
		code := run(t.Context(), append(args, "--config", path, "--database", dbURL), &out, &errOut)
		surfaces["CLI "+strings.Join(args, " ")] = fmt.Sprintf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, args := range [][]string{{"describe", "resource", "Task/bad"}, {"describe", "resource", "Task/good"}, {"describe", "source", "tasks"}} {
		var out, errOut strings.Builder
		code := run(t.Context(), append(args, "--server", base, "--token-env", readEnv), &out, &errOut)
		surfaces["CLI "+strings.Join(args, " ")] = fmt.Sprintf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	agent.stop()
	surfaces["agent log"] = agent.log.String()

	// The secrets were echoed where the check looks: the masks show it.
	for surface, want := range map[string]string{
		"pull-request comment":      "deploy with ***",
		"API /api/v1/resources":     `"note":"***"`,
		"API /api/v1/sources/tasks": "deploy with ***",
		"CLI get resources -o json": `"note": "***"`,
		"Slack":                     "/services/T0AB12CD/B0EF34GH/" + slackToken,
		"dashboard /sources/tasks":  "no route for ***",
		fmt.Sprintf("API /api/v1/resources/%d/outputs", good.ID): `"token":"***"`,
	} {
		if !strings.Contains(surfaces[surface], want) {
			t.Errorf("%s lacks %q; the check would prove nothing:\n%s", surface, want, surfaces[surface])
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range surfaces {
			if !yield(k) {
				return
			}
		}
	})
	for _, surface := range names {
		text := surfaces[surface]
		if surface == "Slack" {
			// The receiver's own record of the path it was posted to.
			text = strings.ReplaceAll(text, "/services/T0AB12CD/B0EF34GH/"+slackToken+" ", "")
		}
		for i, secret := range append(slices.Clone(nastySecrets), slackToken, ghToken, hookSecret, readToken) {
			for name, form := range secretForms(t, secret) {
				if len(form) >= 8 && strings.Contains(text, form) {
					t.Errorf("%s: secret %d appears %s: %q", surface, i, name, form)
				}
			}
		}
	}
	if t.Failed() {
		for _, surface := range names {
			t.Logf("%s:\n%s", surface, surfaces[surface])
		}
	}
}
