package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestDashboardActions runs an agent with a write token: its dashboard
// listens to the event stream, offers a resource's actions to a browser
// logged in with the token and to no one else, and the write its button
// sends (JSON, basic auth, from the agent's own origin) is accepted and
// audited with the token's name.
func TestDashboardActions(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	const token = "dashboard-token-93c1"
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("api: {writeTokenEnv: %s}\n", setSecret(t, token))), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, url, "--config", path)
	base := agent.addr()
	if st, body := curl(t, "POST", base+"/api/v1/resource-types", token, seedType); st != 201 {
		t.Fatalf("create type = %d %s", st, body)
	}
	st, body := curl(t, "POST", base+"/api/v1/resources", token, strings.Replace(seedResource, `"github_actions"`, `"noop"`, 1))
	if st != 201 {
		t.Fatalf("create resource = %d %s", st, body)
	}
	var created api.Resource
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	browser := func(method, path, password, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if password != "" {
			req.SetBasicAuth("me", password)
		}
		if method == "POST" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data), resp.Header
	}
	page := fmt.Sprintf("/resources/%d", created.ID)
	buttons := regexp.MustCompile(`data-url="(/api/v1/resources/\d+/[a-z]+)"`)
	for password, want := range map[string]string{
		"":      "[]",
		token:   fmt.Sprintf("[/api/v1/resources/%d/reconcile /api/v1/resources/%d/suspend]", created.ID, created.ID),
		"wrong": "[]",
	} {
		st, body, hdr := browser("GET", page, password, "")
		if st != 200 {
			// Reads are open: a wrong password is no login, and no harm.
			t.Fatalf("GET %s with %q = %d", page, password, st)
		}
		var got []string
		for _, m := range buttons.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		if fmt.Sprint(got) != want && !(want == "[]" && got == nil) {
			t.Errorf("GET %s with %q offers %v, want %s", page, password, got, want)
		}
		if !strings.Contains(body, `data-events="/api/v1/events"`) || !strings.Contains(hdr.Get("Content-Security-Policy"), "script-src 'nonce-") {
			t.Errorf("GET %s does not listen to the event stream under a nonce policy: %v", page, hdr)
		}
	}
	reconcile := fmt.Sprintf("/api/v1/resources/%d/reconcile", created.ID)
	if st, body, _ := browser("POST", reconcile, token, "{}"); st != 202 {
		t.Fatalf("the reconcile button's request = %d %s", st, body)
	}
	if !strings.Contains(agent.log.String(), `"api request" token=write method=POST path=`+reconcile) {
		t.Errorf("the write is not audited with the token's name:\n%s", agent.log)
	}
}
