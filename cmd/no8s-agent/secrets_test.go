package main

import (
	"bufio"
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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// taskType is a resource type whose resources run the exec instance "runner".
const taskType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Task}
spec:
  action: runner
  versions:
    - name: v1
      schema: {type: object, properties: {note: {type: string}}}
`

func task(name string) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Task\nmetadata: {name: %s}\nspec: {}\n", name)
}

// leakScript is an exec action that echoes the secrets it is passed, as a
// careless script does: in its outputs (as values, as a key, in a URL), in
// its progress on stderr and, for the job "bad", in the stderr of a failure.
const leakScript = `#!/bin/sh
case "$NO8S_RESOURCE_NAME" in
good)
	echo "logging in with $%[1]s" >&2
	printf '{"token": "%%s", "%%s": "as a key", "nested": {"url": "https://u:%%s@example.com/"}}\n' "$%[1]s" "$%[1]s" "$%[1]s"
	echo "deployed with $%[1]s" >&2
	;;
*)
	echo "login failed for $%[2]s (short: $%[3]s)" >&2
	exit 3
	;;
esac
`

// TestSecretsNeverShown runs an agent configured with every kind of secret
// (API tokens, a webhook secret, Git credentials, an http action's signing
// secret and token, an exec action's passEnv values) whose actions and Git
// servers echo them: an exec command in its outputs, progress and failure
// message, an http receiver in its outputs and error body, a Git server in
// the URL its error names. It drives the agent through its API, event
// stream, dashboard, metrics, webhook and CLI, good requests and bad, and
// checks that no secret value appears, as is or escaped, in any response
// or log line.
func TestSecretsNeverShown(t *testing.T) {
	secrets := map[string]string{
		"read":    "read-tok-0c9e51d2",
		"write":   "write-tok-7f2ab4e8",
		"hook":    "hook-sec-3d8e0a61",
		"gituser": "git-user-5b7c",
		"gitpass": "git-pass-e41f9a07",
		"gittok":  "git-tok-92c1e5d0",
		"sign":    "sign-sec-a6d2c3f9",
		"bearer":  "bearer-tok-19e7b0c4",
		// Characters that JSON and HTML escape, so that escaped forms are
		// checked too.
		"execout": "exec-out<&>-51f0e2",
		"execerr": "exec-err-'b7'-d4c0",
	}
	// Too short to be masked without mangling ordinary text: the agent
	// warns and runs.
	const short = "abc12"
	env := map[string]string{}
	for k, v := range secrets {
		env[k] = setSecret(t, v)
	}
	env["short"] = setSecret(t, short)
	// The http action's endpoint checks it gets the token, and answers
	// with outputs that echo it; for the site "failsite", with an error
	// that echoes it.
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		if auth != "Bearer "+secrets["bearer"] || r.Header.Get("X-No8s-Signature-256") == "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if strings.Contains(string(body), "failsite") {
			http.Error(w, `{"error": "quota exceeded for `+auth+`"}`, http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"outputs": {"dns": "shop.example.com", "seen": %q}}`, auth)
	}))
	t.Cleanup(endpoint.Close)
	// A Git server that redirects to a URL carrying a token (the API's read
	// token, as when one token serves several purposes) and then fails:
	// Git's error names that URL.
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("sig") == "" {
			http.Redirect(w, r, r.URL.Path+"?service=git-upload-pack&sig="+url.QueryEscape(secrets["read"]), http.StatusFound)
			return
		}
		http.Error(w, "backend down", http.StatusInternalServerError)
	}))
	t.Cleanup(redirecting.Close)

	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{
		"types.yaml":      strings.Replace(siteType, "action: web", "action: notify", 1) + "---\n" + taskType,
		"sites/shop.yaml": site("shop", 2),
		// A manifest that quotes a secret: the agent serves it masked, but
		// keeps it as written for the action.
		"sites/failsite.yaml": "apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: failsite}\nspec: {replicas: 1, tier: " + secrets["hook"] + "}\n",
		"tasks/good.yaml":     task("good"),
		"tasks/bad.yaml":      task("bad"),
	})
	repo.Commit("first")
	gs := gittest.NewServer(t, filepath.Dir(repo.Dir), secrets["gituser"], secrets["gitpass"])
	remote := gs.URL + "/" + filepath.Base(repo.Dir) + "/.git"
	dir := t.TempDir()
	script := filepath.Join(dir, "leak.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(leakScript, env["execout"], env["execerr"], env["short"])), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
  - name: broken
    git: {url: %q, branch: main, interval: 1h, auth: {tokenEnv: %s}}
api: {readTokenEnv: %s, writeTokenEnv: %s}
webhooks: {githubSecretEnv: %s}
reconcile: {backoff: {initial: 1h}}
actions:
  notify:
    plugin: http
    config: {url: %q, secretEnv: %s, tokenEnv: %s}
  runner:
    plugin: exec
    config: {command: [%q], passEnv: [%s, %s, %s]}
`, remote, env["gituser"], env["gitpass"], redirecting.URL+"/broken.git", env["gittok"],
		env["read"], env["write"], env["hook"], endpoint.URL, env["sign"], env["bearer"],
		script, env["execout"], env["execerr"], env["short"])
	path := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	dbURL := pgtest.URL(t)
	st := openTestStore(t, dbURL)
	agent := startAgent(t, dbURL, "--config", path, "--log-level", "debug")
	base := agent.addr()

	// Follow the event stream from the start, as a dashboard would.
	events := &lockedWriter{w: &bytes.Buffer{}}
	subscribed := make(chan struct{})
	streamCtx, stopStream := context.WithCancel(t.Context())
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		req, _ := http.NewRequestWithContext(streamCtx, "GET", base+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+secrets["read"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			close(subscribed)
			return
		}
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		once := false
		for lines.Scan() {
			fmt.Fprintln(events, lines.Text())
			if !once && lines.Text() == ": subscribed" {
				once = true
				close(subscribed)
			}
		}
		if !once {
			close(subscribed)
		}
	}()
	<-subscribed

	resourceIn := func(kind, name string, done func(phase, message string, outputs string) bool) func() (bool, string) {
		return func() (bool, string) {
			r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: kind, Namespace: "default", Name: name})
			if err != nil {
				return false, err.Error()
			}
			return done(string(r.Phase), r.StatusMessage, string(r.Outputs)), string(r.Phase) + " " + r.StatusMessage
		}
	}
	ready := func(phase, _, outputs string) bool { return phase == "ready" && outputs != "" }
	failed := func(phase, message, _ string) bool { return phase == "failed" && message != "" }
	waitFor(t, 30*time.Second, agent, "shop to be reconciled", resourceIn("Site", "shop", ready))
	waitFor(t, 30*time.Second, agent, "good to be reconciled", resourceIn("Task", "good", ready))
	waitFor(t, 30*time.Second, agent, "failsite to fail", resourceIn("Site", "failsite", failed))
	waitFor(t, 30*time.Second, agent, "bad to fail", resourceIn("Task", "bad", failed))
	waitFor(t, 30*time.Second, agent, "the broken source to fail", func() (bool, string) {
		src, err := st.GetSource(t.Context(), "broken")
		return err == nil && src.Message != "", fmt.Sprint(err)
	})

	var seen strings.Builder
	request := func(method, path, token, body string, headers ...string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(&seen, "%s %s -> %d %v\n%s\n", method, path, resp.StatusCode, resp.Header, data)
		return resp.StatusCode, string(data)
	}

	// Reconcile the failing job and sync the broken source again while the
	// stream follows, so that their failures are events.
	ids := map[string]string{}
	for _, ref := range [][2]string{{"Site", "shop"}, {"Site", "failsite"}, {"Task", "good"}, {"Task", "bad"}} {
		r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: ref[0], Namespace: "default", Name: ref[1]})
		if err != nil {
			t.Fatal(err)
		}
		ids[ref[1]] = fmt.Sprint(r.ID)
	}
	request("POST", "/api/v1/resources/"+ids["bad"]+"/reconcile", secrets["write"], "")
	request("POST", "/api/v1/sources/broken/sync", secrets["write"], "")
	waitFor(t, 30*time.Second, agent, "the events of the failing job", func() (bool, string) {
		for line := range strings.Lines(events.String()) {
			if strings.Contains(line, `"name":"bad"`) && strings.Contains(line, `"status":"failed"`) {
				return true, ""
			}
		}
		return false, events.String()
	})

	reads := []string{"/api/v1/resources", "/api/v1/resource-types", "/api/v1/resource-types/Task/v1",
		"/api/v1/sources", "/api/v1/sources/sites", "/api/v1/sources/broken",
		"/api/v1/sources/sites/history", "/api/v1/sources/broken/history", "/metrics",
		"/", "/sources/sites", "/sources/broken", "/readyz", "/health", "/healthz"}
	for name, id := range ids {
		reads = append(reads, "/api/v1/resources/"+id, "/api/v1/resources/"+id+"/history", "/api/v1/resources/"+id+"/outputs",
			"/resources/"+id)
		kind := "Site"
		if name == "good" || name == "bad" {
			kind = "Task"
		}
		reads = append(reads, "/api/v1/resources/by-name/"+kind+"/v1/"+name)
	}
	for _, p := range reads {
		if code, _ := request("GET", p, secrets["read"], ""); code != 200 {
			t.Errorf("GET %s = %d", p, code)
		}
		request("GET", p, "wrong-token", "")
	}
	request("POST", "/api/v1/resources", secrets["read"], `{"name": "x"}`)
	request("POST", "/api/v1/resources", secrets["write"], `{"name": "x", "resource_type_name": "Site", "spec": {"replicas": "many"}}`)
	request("PUT", "/api/v1/resources/"+ids["shop"], secrets["write"], `{"spec": {"replicas": 3}}`)
	request("POST", "/api/v1/sources/broken/sync", secrets["write"], "")
	request("POST", "/hooks/github", "", `{"zen": "x"}`, "X-GitHub-Event", "ping", "X-Hub-Signature-256", "sha256=00", "Content-Type", "application/json")
	// The CLI reads the same store, and knows no secret: what the agent
	// stored is masked, what Git declares is as written.
	var cli strings.Builder
	for _, args := range [][]string{{"get", "resources", "-o", "json"}, {"get", "sources", "-o", "json"}, {"get", "resources"},
		{"get", "history", "-o", "json"}} {
		var out, errOut strings.Builder
		code := run(t.Context(), append(args, "--database", dbURL), &out, &errOut)
		fmt.Fprintf(&cli, "%s -> %d\n%s%s\n", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	stopStream()
	<-streamDone
	fmt.Fprintf(&seen, "events:\n%s\n", events.String())

	// The actions and the Git server did echo the secrets: the masks show
	// where. Without them the check would prove nothing.
	_, outputs := request("GET", "/api/v1/resources/"+ids["good"]+"/outputs", secrets["read"], "")
	var decoded map[string]any
	if err := json.Unmarshal([]byte(outputs), &decoded); err != nil {
		t.Errorf("the outputs are not JSON: %v\n%s", err, outputs)
	}
	for what, want := range map[string]string{
		"exec outputs":               `"token":"***"`,
		"exec outputs, as a key":     `"***":"as a key"`,
		"exec failure":               "login failed for ***",
		"exec progress":              "deployed with ***",
		"http outputs":               `"seen":"Bearer ***"`,
		"the Git error":              "sig=***",
		"the http outputs' own text": "shop.example.com",
		"a spec":                     `"tier":"***"`,
	} {
		if !strings.Contains(seen.String(), want) {
			t.Errorf("%s: no %q in what the agent showed; the check would prove nothing", what, want)
		}
	}
	if !strings.Contains(seen.String(), short) {
		t.Errorf("the short value %q was masked: ordinary text would be mangled", short)
	}
	if !strings.Contains(agent.log.String(), "too short to be masked") {
		t.Error("no warning about the secret too short to be masked")
	}
	for name, value := range secrets {
		for _, form := range escapedForms(value) {
			if strings.Contains(seen.String(), form) {
				t.Errorf("the %s secret appears in a response as %q", name, form)
			}
			if strings.Contains(agent.log.String(), form) {
				t.Errorf("the %s secret appears in the log as %q", name, form)
			}
			if name != "hook" && strings.Contains(cli.String(), form) {
				t.Errorf("the %s secret appears in the output of get as %q", name, form)
			}
		}
	}
	if t.Failed() {
		t.Logf("responses:\n%s\nget:\n%s", seen.String(), cli.String())
	}
}

// escapedForms returns value as is and as JSON, HTML, Go (%q) and URLs
// escape it.
func escapedForms(value string) []string {
	js, _ := json.Marshal(value)
	forms := []string{value, string(js[1 : len(js)-1]), html.EscapeString(value), fmt.Sprintf("%q", value), url.QueryEscape(value)}
	return forms
}
