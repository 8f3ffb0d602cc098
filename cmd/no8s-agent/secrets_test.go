package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestSecretsNeverShown runs an agent configured with every kind of secret
// (API tokens, a webhook secret, Git credentials, an http action's signing
// secret and token), drives it through its API, dashboard, metrics and
// webhook, good requests and bad, and checks that no secret value appears
// in any response or log line.
func TestSecretsNeverShown(t *testing.T) {
	secrets := map[string]string{
		"read":    "read-tok-0c9e51d2",
		"write":   "write-tok-7f2ab4e8",
		"hook":    "hook-sec-3d8e0a61",
		"gituser": "git-user-5b7c",
		"gitpass": "git-pass-e41f9a07",
		"sign":    "sign-sec-a6d2c3f9",
		"bearer":  "bearer-tok-19e7b0c4",
	}
	env := map[string]string{}
	for k, v := range secrets {
		env[k] = setSecret(t, v)
	}
	// The http action's endpoint checks it gets the token, and answers
	// with outputs that the API will show.
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("Authorization") != "Bearer "+secrets["bearer"] || r.Header.Get("X-No8s-Signature-256") == "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"outputs": {"dns": "shop.example.com"}}`)
	}))
	t.Cleanup(endpoint.Close)
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": strings.Replace(siteType, "action: web", "action: notify", 1), "sites/shop.yaml": site("shop", 2)})
	repo.Commit("first")
	gs := gittest.NewServer(t, filepath.Dir(repo.Dir), secrets["gituser"], secrets["gitpass"])
	remote := gs.URL + "/" + filepath.Base(repo.Dir) + "/.git"
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
  - name: broken
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
api: {readTokenEnv: %s, writeTokenEnv: %s}
webhooks: {githubSecretEnv: %s}
actions:
  notify:
    plugin: http
    config: {url: %q, secretEnv: %s, tokenEnv: %s}
`, remote, env["gituser"], env["gitpass"], gs.URL+"/nope/.git", env["gituser"], env["gitpass"],
		env["read"], env["write"], env["hook"], endpoint.URL, env["sign"], env["bearer"])
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", path, "--log-level", "debug")
	base := agent.addr()
	waitFor(t, 30*time.Second, agent, "shop to be reconciled", func() (bool, string) {
		r, err := st.GetResourceByName(t.Context(), "Site", "shop")
		if err != nil {
			return false, err.Error()
		}
		return r.ObservedGeneration == 1, string(r.Phase) + " " + r.StatusMessage
	})
	waitFor(t, 30*time.Second, agent, "the broken source to fail", func() (bool, string) {
		src, err := st.GetSource(t.Context(), "broken")
		return err == nil && src.Message != "", fmt.Sprint(err)
	})
	shop, err := st.GetResourceByName(t.Context(), "Site", "shop")
	if err != nil {
		t.Fatal(err)
	}

	var seen strings.Builder
	request := func(method, path, token, body string, headers ...string) int {
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
		return resp.StatusCode
	}
	id := fmt.Sprint(shop.ID)
	reads := []string{"/api/v1/resources", "/api/v1/resources/" + id, "/api/v1/resources/" + id + "/history",
		"/api/v1/resources/" + id + "/outputs", "/api/v1/resource-types", "/api/v1/sources", "/api/v1/sources/sites",
		"/api/v1/sources/broken", "/api/v1/sources/sites/history", "/api/v1/sources/broken/history", "/metrics",
		"/", "/resources/" + id, "/sources/sites", "/sources/broken", "/readyz", "/health"}
	for _, p := range reads {
		if code := request("GET", p, secrets["read"], ""); code != 200 {
			t.Errorf("GET %s = %d", p, code)
		}
		request("GET", p, "wrong-token", "")
	}
	request("POST", "/api/v1/resources", secrets["read"], `{"name": "x"}`)
	request("POST", "/api/v1/resources", secrets["write"], `{"name": "x", "resource_type_name": "Site", "spec": {"replicas": "many"}}`)
	request("PUT", "/api/v1/resources/"+id, secrets["write"], `{"spec": {"replicas": 3}}`)
	request("POST", "/api/v1/sources/broken/sync", secrets["write"], "")
	request("POST", "/hooks/github", "", `{"zen": "x"}`, "X-GitHub-Event", "ping", "X-Hub-Signature-256", "sha256=00", "Content-Type", "application/json")

	if !strings.Contains(seen.String(), "shop.example.com") {
		t.Errorf("the http action's outputs are not shown; the check would prove nothing:\n%s", seen.String())
	}
	for name, value := range secrets {
		if strings.Contains(seen.String(), value) {
			t.Errorf("the %s secret appears in a response", name)
		}
		if strings.Contains(agent.log.String(), value) {
			t.Errorf("the %s secret appears in the log", name)
		}
	}
}
